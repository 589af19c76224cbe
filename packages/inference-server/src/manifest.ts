/**
 * Model integrity: a manifest of sha256 digests, optionally signed with ed25519. The format (and
 * the canonical bytes a signature covers) is the shared one (`@vigil/shared-types` manifest);
 * this module makes digests, signs and verifies. Paths are base names, resolved next to the
 * model being verified.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import {
  canonicalManifestFiles,
  type Manifest,
  type ManifestEntry,
  ManifestFormatError,
  manifestEntry,
  parseManifest,
} from '@vigil/shared-types';
import { PRIVATE_DIR, writeFileAtomic } from '@vigil/shared-types/node';
import { ConfigError, ManifestError } from './errors.js';

export type { Manifest, ManifestEntry } from '@vigil/shared-types';

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
const signedBytes = (files: readonly ManifestEntry[]): Buffer => Buffer.from(canonicalManifestFiles(files), 'utf8');

export async function createManifest(models: readonly string[], signKeyFile?: string): Promise<Manifest> {
  const files: ManifestEntry[] = [];
  for (const m of models) {
    const d = await digestFile(m);
    files.push({ path: basename(m), sha256: d.sha256, size: d.size });
  }
  if (!signKeyFile) return { files };
  const key = createPrivateKey(await readFile(signKeyFile));
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new ConfigError(`${signKeyFile} is a ${key.asymmetricKeyType} key: an ed25519 private key is needed`);
  }
  return { files, signature: sign(null, signedBytes(files), key).toString('base64') };
}

/** Writes a manifest atomically, 0644 (it holds digests, not secrets). */
export async function writeManifest(out: string, manifest: Manifest): Promise<void> {
  // The manifest is public (0644); a directory created for it is private (0700), as every vigil directory.
  writeFileAtomic(out, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o644, dirMode: PRIVATE_DIR });
}

/** A new ed25519 key pair, PEM: the private key (PKCS#8) and the public key (SPKI). */
export function generateSigningKey(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

function readManifest(text: string, file: string): Manifest {
  try {
    return parseManifest(text, file);
  } catch (err) {
    if (err instanceof ManifestFormatError) {
      throw new ManifestError(err.kind === 'signature' ? 'signature' : 'mismatch', err.message);
    }
    throw err;
  }
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
  const manifest = readManifest(await readFile(manifestFile, 'utf8'), manifestFile);
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
    const ok = verify(null, signedBytes(manifest.files), key, Buffer.from(manifest.signature, 'base64'));
    if (!ok) throw new ManifestError('signature', `${manifestFile} does not match its signature`);
    signatureChecked = true;
  }
  const name = basename(model);
  const entry = manifestEntry(manifest, name);
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
