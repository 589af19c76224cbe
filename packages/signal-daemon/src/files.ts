/**
 * The modes of what the daemon keeps, whatever the umask: its SQLite files (and their `-wal`,
 * `-shm`, `-journal`) 0600, its directories 0700. Files and directories left more open by an
 * older version or by another tool (e.g. a data home created 0755) are tightened at start.
 */
import { chmodSync, closeSync, openSync, statSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { ensureDir, PRIVATE_DIR, PRIVATE_FILE } from '@vigil/shared-types/node';

/** Sets `mode` on an existing path whose mode gives more than it (group or other bits). */
function tighten(path: string, mode: number): void {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if ((st.mode & 0o777 & ~mode) !== 0) chmodSync(path, mode);
}

/**
 * Creates a SQLite file 0600 before SQLite opens it (SQLite gives its `-wal`, `-shm` and
 * `-journal` files the mode of the database file), and tightens those that exist.
 */
export function preparePrivateDatabase(file: string): void {
  ensureDir(dirname(file));
  closeSync(openSync(file, 'a', PRIVATE_FILE));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) tighten(f, PRIVATE_FILE);
}

/**
 * Creates `dir` 0700. A directory that exists is made 0700 when `enforce` is set, and so is
 * every directory from `home` down to `dir` when `dir` lies in `home` (vigil's data home, which
 * holds nothing but vigil's own state); a directory elsewhere that the operator chose keeps its
 * mode (the files in it are 0600).
 */
export function preparePrivateDir(dir: string, home: string, enforce = false): void {
  ensureDir(dir, PRIVATE_DIR, enforce);
  const rel = relative(resolve(home), resolve(dir));
  if (rel.startsWith('..') || rel.startsWith(sep)) return;
  let d = resolve(dir);
  for (;;) {
    tighten(d, PRIVATE_DIR);
    if (d === resolve(home) || dirname(d) === d) return;
    d = dirname(d);
  }
}
