/**
 * The integrity check of the primary binary (spec 8: every 5 minutes): it exists, its sha256
 * matches the manifest (inference-server's manifest JSON, `{"files":[{"path","sha256",…}]}`, or
 * `sha256sum` lines), and, where configured (macOS), `codesign --verify --strict` accepts it.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { runCommand } from './command.js';

export interface IntegrityResult {
  readonly result: 'ok' | 'missing' | 'mismatch';
  readonly detail: string;
}

export interface IntegrityTarget {
  readonly binary: string;
  readonly manifest?: string;
  readonly codesign: boolean;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** The digest a manifest gives for `binary` (by absolute path or base name), or an error message. */
export function manifestDigest(text: string, binary: string): { sha256: string } | { error: string } {
  const name = basename(binary);
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    let files: unknown;
    try {
      files = (JSON.parse(trimmed) as { files?: unknown }).files;
    } catch (err) {
      return { error: `not valid JSON: ${(err as Error).message}` };
    }
    if (!Array.isArray(files)) return { error: 'has no "files" list' };
    const entry = (files as { path?: unknown; sha256?: unknown }[]).find((f) => f.path === binary || f.path === name);
    if (!entry) return { error: `does not list ${name}` };
    if (typeof entry.sha256 !== 'string' || !/^[0-9a-f]{64}$/i.test(entry.sha256)) {
      return { error: `has no valid sha256 for ${name}` };
    }
    return { sha256: entry.sha256.toLowerCase() };
  }
  for (const line of trimmed.split('\n')) {
    const m = /^([0-9a-fA-F]{64})\s+\*?(.+)$/.exec(line.trim());
    if (m && (m[2] === binary || basename(m[2]!) === name)) return { sha256: m[1]!.toLowerCase() };
  }
  return { error: `does not list ${name}` };
}

export async function checkIntegrity(
  target: IntegrityTarget,
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<IntegrityResult> {
  const { binary } = target;
  try {
    const st = await stat(binary);
    if (!st.isFile()) return { result: 'missing', detail: `${binary} is not a regular file` };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return {
      result: 'missing',
      detail: code === 'ENOENT' ? `${binary} does not exist` : `${binary} cannot be read: ${code}`,
    };
  }
  const checked = ['exists'];
  if (target.manifest) {
    let text: string;
    try {
      text = await readFile(target.manifest, 'utf8');
    } catch (err) {
      return {
        result: 'mismatch',
        detail: `manifest ${target.manifest} cannot be read: ${(err as NodeJS.ErrnoException).code ?? err}`,
      };
    }
    const want = manifestDigest(text, binary);
    if ('error' in want) return { result: 'mismatch', detail: `manifest ${target.manifest} ${want.error}` };
    let have: string;
    try {
      have = await sha256File(binary);
    } catch (err) {
      return { result: 'mismatch', detail: `${binary} cannot be read: ${(err as Error).message}` };
    }
    if (have !== want.sha256) {
      return {
        result: 'mismatch',
        detail: `${binary} has sha256 ${have}, the manifest ${target.manifest} says ${want.sha256}`,
      };
    }
    checked.push('sha256 matches the manifest');
  }
  if (target.codesign) {
    const r = await runCommand(['codesign', '--verify', '--strict', binary], timeoutMs, env);
    if (r.rc !== 0) {
      return {
        result: 'mismatch',
        detail: `codesign --verify failed for ${binary} (rc ${r.rc})${r.detail ? `: ${r.detail}` : ''}`,
      };
    }
    checked.push('codesign verified');
  }
  return { result: 'ok', detail: `${binary}: ${checked.join(', ')}` };
}
