/**
 * Files that must not be lost or half-written: written atomically (a temporary file beside the
 * target, fsync of the file, rename, fsync of the directory), so that a `kill -9` or a power loss
 * at any point leaves the old content or the new, never a mix. One mode policy: what vigil writes
 * for itself (state, locks, messages, keys, logs) is 0600 in a 0700 directory, whatever the umask.
 */
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { VIGIL_ERRORS, VigilError } from '../errors.js';

/** The mode of a private file (state, messages, keys, logs). */
export const PRIVATE_FILE = 0o600;
/** The mode of a private directory. */
export const PRIVATE_DIR = 0o700;

export interface AtomicWriteOptions {
  /** The file's mode, applied whatever the umask (default 0600). */
  readonly mode?: number;
  /** The mode of directories created on the way (default 0700). */
  readonly dirMode?: number;
}

/**
 * Creates a directory (and its parents) with `mode` whatever the umask; a directory that exists
 * keeps its mode unless `enforce` is set (then the last component is chmod-ed to `mode`).
 */
export function ensureDir(dir: string, mode = PRIVATE_DIR, enforce = false): void {
  const created = mkdirSync(dir, { recursive: true, mode });
  // mkdir applies the umask: set the exact mode on what this call created.
  if (created !== undefined) {
    let d = dir;
    for (;;) {
      chmodSync(d, mode);
      if (d === created || dirname(d) === d) break;
      d = dirname(d);
    }
  } else if (enforce) {
    chmodSync(dir, mode);
  }
}

/** fsync of a directory, so that a rename or unlink in it survives a power loss. */
export function fsyncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Not every platform or filesystem can fsync a directory; the rename is still atomic.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** A temporary name beside `path`, unique to this call (a crashed writer's leftover is never reused). */
function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/** A file's directory is a symbolic link that someone other than root made: nothing is written through it. */
export class SymlinkedDirError extends VigilError {
  constructor(
    readonly path: string,
    readonly dir: string,
  ) {
    super(
      VIGIL_ERRORS.VIGIL_ERR_SYMLINK_DIR,
      `refusing to write ${path}: its directory ${dir} is a symbolic link (give the real directory)`,
    );
  }
}

/**
 * Refuses (SymlinkedDirError) to write `path` when its directory is a symbolic link: a link in a
 * shared or foreign directory would send vigil's file into another user's directory. Only the
 * system's own top-level links (macOS's /tmp, /var, /etc: in `/`, owned by root) are followed. A
 * missing directory passes (the writer creates a real one).
 */
export function refuseSymlinkedDir(path: string): void {
  const dir = dirname(path);
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(dir);
  } catch {
    return;
  }
  const system = st.uid === 0 && dirname(resolve(dir)) === '/';
  if (st.isSymbolicLink() && !system) throw new SymlinkedDirError(path, dir);
}

/**
 * Appends `data` to a log file in one write, creating it with `mode`: never through a symbolic
 * link (the file's or its directory's, see refuseSymlinkedDir), so a planted link cannot turn a
 * log into a write to someone else's file.
 */
export function appendFileNoFollow(path: string, data: string, mode = PRIVATE_FILE): void {
  refuseSymlinkedDir(path);
  const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (constants.O_NOFOLLOW ?? 0);
  const fd = openSync(path, flags, mode);
  try {
    const buf = Buffer.from(data, 'utf8');
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes a file atomically (see the module's comment). Creates its directory when missing; refuses
 * a directory that is a symbolic link (refuseSymlinkedDir). A link at `path` itself is replaced,
 * never written through.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): void {
  const mode = options.mode ?? PRIVATE_FILE;
  const dir = dirname(path);
  refuseSymlinkedDir(path);
  ensureDir(dir, options.dirMode ?? PRIVATE_DIR);
  const tmp = tempPathFor(path);
  const fd = openSync(tmp, 'wx', mode);
  try {
    try {
      const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      chmodSync(tmp, mode);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    removeQuietly(tmp);
    throw err;
  }
  fsyncDir(dir);
}

/**
 * Writes a (large) file atomically through `write`, which gets the open temporary file: for
 * content produced piece by piece (a model file). The same guarantees as `writeFileAtomic`.
 */
export async function writeFileAtomicWith(
  path: string,
  write: (file: FileHandle) => Promise<void>,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const mode = options.mode ?? PRIVATE_FILE;
  const dir = dirname(path);
  refuseSymlinkedDir(path);
  ensureDir(dir, options.dirMode ?? PRIVATE_DIR);
  const tmp = tempPathFor(path);
  const fh = await open(tmp, 'wx', mode);
  try {
    try {
      await write(fh);
      await fh.chmod(mode);
      await fh.sync();
    } finally {
      await fh.close();
    }
    renameSync(tmp, path);
  } catch (err) {
    removeQuietly(tmp);
    throw err;
  }
  fsyncDir(dir);
}

/** Removes a file (and makes the removal durable); true when it existed. */
export function removeFile(path: string): boolean {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  fsyncDir(dirname(path));
  return true;
}

/** The file's text, or null when it does not exist. */
export function readTextOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export function fileExists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}
