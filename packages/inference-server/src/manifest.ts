/**
 * Model integrity: a manifest of sha256 digests, optionally signed with ed25519.
 *
 * `{"files":[{"path":"model.gguf","sha256":"…","size":123}],"signature":"base64…"}`. The signature
 * covers the canonical JSON of `files`: each entry's keys in the order path, sha256, size, no
 * spaces. Paths are base names, resolved next to the model being verified.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { writeFileAtomic } from './files.js';

export interface ManifestEntry {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
}

export interface Manifest {
  readonly files: readonly ManifestEntry[];
  readonly signature?: string;
}

/** Why a manifest check failed: `mismatch` → "manifest verification failed", `signature` → "signature invalid". */
export class ManifestError extends Error {
  constructor(
    readonly kind: 'mismatch' | 'signature',
    message: string,
  ) {
    super(message);
    this.name = 'ManifestError';
  }
  get code(): string {
    return this.kind === 'mismatch' ? 'EMANIFEST' : 'ESIGNATURE';
  }
}

/** sha256 (hex) and size of a file, streamed. */
export async function digestFile(path: string): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 4 << 20 })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), size };
}

/** The bytes a signature covers. */
export function canonicalFiles(files: readonly ManifestEntry[]): Buffer {
  return Buffer.from(JSON.stringify(files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size }))), 'utf8');
}

export async function createManifest(models: readonly string[], signKeyFile?: string): Promise<Manifest> {
  const files: ManifestEntry[] = [];
  for (const m of models) {
    const d = await digestFile(m);
    files.push({ path: basename(m), sha256: d.sha256, size: d.size });
  }
  if (!signKeyFile) return { files };
  const key = createPrivateKey(await readFile(signKeyFile));
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new Error(`${signKeyFile} is a ${key.asymmetricKeyType} key: an ed25519 private key is needed`);
  }
  return { files, signature: sign(null, canonicalFiles(files), key).toString('base64') };
}

export async function writeManifest(out: string, manifest: Manifest): Promise<void> {
  await writeFileAtomic(out, `${JSON.stringify(manifest, null, 2)}\n`, 0o644);
}

/** A new ed25519 key pair, PEM: the private key (PKCS#8) and the public key (SPKI). */
export function generateSigningKey(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

function parseManifest(text: string, file: string): Manifest {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    throw new ManifestError('mismatch', `${file} is not JSON`);
  }
  const files = (m as { files?: unknown }).files;
  if (!Array.isArray(files)) throw new ManifestError('mismatch', `${file} has no "files" list`);
  for (const f of files) {
    const e = f as Partial<ManifestEntry>;
    if (typeof e?.path !== 'string' || typeof e.sha256 !== 'string' || typeof e.size !== 'number') {
      throw new ManifestError('mismatch', `${file}: every entry needs path, sha256 and size`);
    }
  }
  const signature = (m as { signature?: unknown }).signature;
  if (signature !== undefined && typeof signature !== 'string') {
    throw new ManifestError('signature', `${file}: "signature" is not a string`);
  }
  return signature === undefined ? { files } : { files, signature };
}

/**
 * Checks the model against the manifest (and the manifest's signature against `publicKeyFile`
 * when given). Throws ManifestError; returns what it checked.
 */
export async function verifyManifest(
  manifestFile: string,
  model: string,
  publicKeyFile?: string | null,
): Promise<{ entry: ManifestEntry; signed: boolean; signatureChecked: boolean }> {
  const manifest = parseManifest(await readFile(manifestFile, 'utf8'), manifestFile);
  let signatureChecked = false;
  if (publicKeyFile) {
    if (!manifest.signature) throw new ManifestError('signature', `${manifestFile} is not signed`);
    let key: ReturnType<typeof createPublicKey>;
    try {
      key = createPublicKey(await readFile(publicKeyFile));
    } catch (err) {
      throw new ManifestError('signature', `cannot read the public key ${publicKeyFile}: ${(err as Error).message}`);
    }
    if (key.asymmetricKeyType !== 'ed25519') {
      throw new ManifestError('signature', `${publicKeyFile} is not an ed25519 public key`);
    }
    const ok = verify(null, canonicalFiles(manifest.files), key, Buffer.from(manifest.signature, 'base64'));
    if (!ok) throw new ManifestError('signature', `${manifestFile} does not match its signature`);
    signatureChecked = true;
  }
  const name = basename(model);
  const entry = manifest.files.find((f) => f.path === name || basename(f.path) === name);
  if (!entry) throw new ManifestError('mismatch', `${name} is not listed in ${manifestFile}`);
  const size = (await stat(model)).size;
  if (size !== entry.size) {
    throw new ManifestError('mismatch', `${name} has ${size} bytes, the manifest says ${entry.size}`);
  }
  const { sha256 } = await digestFile(model);
  if (sha256 !== entry.sha256.toLowerCase()) {
    throw new ManifestError('mismatch', `${name} has sha256 ${sha256}, the manifest says ${entry.sha256}`);
  }
  return { entry, signed: manifest.signature !== undefined, signatureChecked };
}
