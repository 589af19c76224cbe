/**
 * The integrity check of the primary binary (spec 8: every 5 minutes): it exists, its sha256
 * matches the manifest (the format of shared-types' `manifestDigest`: inference-server's manifest
 * JSON, or `sha256sum` lines), and, where configured (macOS), `codesign --verify --strict` accepts it.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { manifestDigest } from '@vigil/shared-types';
import { runCommand } from '@vigil/shared-types/node';

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
    const want = manifestDigest(text, binary, `manifest ${target.manifest}`);
    if ('error' in want) return { result: 'mismatch', detail: want.error };
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
    const r = await runCommand(['codesign', '--verify', '--strict', binary], timeoutMs, { env });
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
