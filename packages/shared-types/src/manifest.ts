/**
 * The integrity manifest of a file (a model, a binary): its format, parsed in one place for the
 * inference server (which verifies its model) and the guardian (which verifies the binary).
 *
 * `{"files":[{"path":"model.gguf","sha256":"…","size":123}],"signature":"base64…"}`; the
 * signature (ed25519) covers `canonicalManifestFiles(files)`. The guardian also accepts
 * `sha256sum` lines (`<64 hex>  path`).
 */
import { VIGIL_ERRORS, VigilError } from './errors.js';

export interface ManifestEntry {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
}

export interface Manifest {
  readonly files: readonly ManifestEntry[];
  readonly signature?: string;
}

/** Why a manifest cannot be used: `format` (not a manifest) or `signature` (a bad signature field). */
export class ManifestFormatError extends VigilError {
  constructor(
    readonly kind: 'format' | 'signature',
    message: string,
  ) {
    super(VIGIL_ERRORS.VIGIL_ERR_MANIFEST_FORMAT, message);
  }
}

/** Parses a JSON manifest; `source` names it in the messages. Throws ManifestFormatError. */
export function parseManifest(text: string, source: string): Manifest {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch (err) {
    throw new ManifestFormatError('format', `${source} is not valid JSON: ${(err as Error).message}`);
  }
  const files = (m as { files?: unknown } | null)?.files;
  if (!Array.isArray(files)) throw new ManifestFormatError('format', `${source} has no "files" list`);
  for (const f of files) {
    const e = f as Partial<ManifestEntry> | null;
    if (typeof e?.path !== 'string' || typeof e.sha256 !== 'string' || typeof e.size !== 'number') {
      throw new ManifestFormatError('format', `${source}: every entry needs path, sha256 and size`);
    }
    if (!/^[0-9a-f]{64}$/i.test(e.sha256)) {
      throw new ManifestFormatError('format', `${source}: ${e.path} has no valid sha256`);
    }
  }
  const signature = (m as { signature?: unknown }).signature;
  if (signature !== undefined && typeof signature !== 'string') {
    throw new ManifestFormatError('signature', `${source}: "signature" is not a string`);
  }
  const entries = files as ManifestEntry[];
  return signature === undefined ? { files: entries } : { files: entries, signature };
}

/** The bytes (as text) a manifest's signature covers: each entry's keys in the order path, sha256, size. */
export function canonicalManifestFiles(files: readonly ManifestEntry[]): string {
  return JSON.stringify(files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size })));
}

const baseName = (p: string): string => p.slice(p.lastIndexOf('/') + 1);

/** The entry a manifest has for `file`, by path as written or by base name. */
export function manifestEntry(manifest: Manifest, file: string): ManifestEntry | undefined {
  const name = baseName(file);
  return manifest.files.find((f) => f.path === file || f.path === name || baseName(f.path) === name);
}

/**
 * The sha256 a manifest (JSON, or `sha256sum` lines) gives for `file`, by path or base name;
 * or why it gives none.
 */
export function manifestDigest(
  text: string,
  file: string,
  source = 'the manifest',
): { sha256: string } | { error: string } {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    let manifest: Manifest;
    try {
      manifest = parseManifest(trimmed, source);
    } catch (err) {
      return { error: (err as Error).message };
    }
    const entry = manifestEntry(manifest, file);
    return entry ? { sha256: entry.sha256.toLowerCase() } : { error: `${source} does not list ${baseName(file)}` };
  }
  const name = baseName(file);
  for (const line of trimmed.split('\n')) {
    const m = /^([0-9a-fA-F]{64})\s+\*?(.+)$/.exec(line.trim());
    if (m && (m[2] === file || baseName(m[2]!) === name)) return { sha256: m[1]!.toLowerCase() };
  }
  return { error: `${source} does not list ${name}` };
}
