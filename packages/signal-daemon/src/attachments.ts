/**
 * Attachments given as file paths, as local clients give them to signal-cli. A path is a request
 * to read a file of the host, so it is checked before anything is read: it must name a regular
 * file (never a device, a FIFO, a socket or a directory, whatever a symlink points to), no larger
 * than the limit, and, when the operator named allowed directories, lie inside one of them once
 * every symlink is resolved. The file is read off the event loop, never more than its size.
 */
import { constants, type Stats } from 'node:fs';
import { type FileHandle, open, readlink, realpath, stat } from 'node:fs/promises';
import { isAbsolute, resolve, sep } from 'node:path';
import { ConfigError, invalidParams, type RpcFailure } from './errors.js';

export interface AttachmentPolicy {
  /** Largest file accepted, in bytes. */
  readonly maxBytes: number;
  /** Real paths of the directories attachments may come from; empty: any directory. */
  readonly allowedDirs: readonly string[];
}

/** Resolves `--attachment-dir` values to real paths at start; a missing one is bad configuration. */
export async function resolveAllowedDirs(dirs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const dir of dirs) {
    let real: string;
    let st: Stats;
    try {
      real = await realpath(resolve(dir));
      st = await stat(real);
    } catch (err) {
      throw new ConfigError(`invalid --attachment-dir ${dir}: ${describe(err)}`);
    }
    if (!st.isDirectory()) throw new ConfigError(`invalid --attachment-dir ${dir}: not a directory`);
    out.push(real);
  }
  return out;
}

const refuse = (path: string, why: string): RpcFailure => invalidParams(`attachment ${path} ${why}`);

function describe(err: unknown): string {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return 'does not exist';
    case 'EACCES':
    case 'EPERM':
      return 'cannot be read: permission denied';
    case 'ELOOP':
      return 'cannot be read: too many levels of symbolic links';
    default:
      return `cannot be read: ${(err as Error).message}`;
  }
}

function kind(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'a special file';
}

function inside(real: string, dirs: readonly string[]): boolean {
  return dirs.some((d) => real === d || real.startsWith(d.endsWith(sep) ? d : d + sep));
}

/** The checks on what a path names; throws -32602 naming the reason. */
function checkStats(path: string, st: Stats, policy: AttachmentPolicy): void {
  if (!st.isFile()) throw refuse(path, `is not a regular file (${kind(st)})`);
  if (st.size > policy.maxBytes) {
    throw refuse(path, `is larger than the limit of ${policy.maxBytes} bytes (${st.size} bytes)`);
  }
}

/**
 * Checks a path without reading it (for a backend that reads it itself): absolute, inside the
 * allowed directories, a regular file within the limit. Throws -32602 naming the reason.
 */
export async function checkAttachmentPath(path: string, policy: AttachmentPolicy): Promise<void> {
  if (!isAbsolute(path)) {
    throw invalidParams('attachments must be data URIs (data:MIME;base64,DATA) or absolute file paths');
  }
  let st: Stats;
  try {
    if (policy.allowedDirs.length > 0 && !inside(await realpath(path), policy.allowedDirs)) {
      throw refuse(path, 'is outside the allowed directories');
    }
    st = await stat(path);
  } catch (err) {
    if ((err as { rpcCode?: number }).rpcCode !== undefined) throw err;
    throw refuse(path, describe(err));
  }
  checkStats(path, st, policy);
}

/**
 * Reads an attachment file after `checkAttachmentPath`. The file is opened without blocking (a
 * FIFO swapped in meanwhile cannot hold the open) and checked again on the open descriptor, so
 * what is read is what was checked.
 */
export async function readAttachmentFile(path: string, policy: AttachmentPolicy): Promise<Buffer> {
  await checkAttachmentPath(path, policy);
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    throw refuse(path, describe(err));
  }
  try {
    const st = await fh.stat();
    checkStats(path, st, policy);
    if (policy.allowedDirs.length > 0) {
      // What was opened, not what the path names now (Linux; elsewhere the check above stands).
      const opened = await readlink(`/proc/self/fd/${fh.fd}`).catch(() => null);
      if (opened !== null && !inside(opened, policy.allowedDirs)) {
        throw refuse(path, 'is outside the allowed directories');
      }
    }
    const data = Buffer.alloc(st.size);
    let off = 0;
    while (off < data.length) {
      const { bytesRead } = await fh.read(data, off, data.length - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
    }
    return off === data.length ? data : data.subarray(0, off);
  } finally {
    await fh.close();
  }
}
