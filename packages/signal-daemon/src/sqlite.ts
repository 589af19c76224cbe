import Database from 'better-sqlite3';
import { preparePrivateDatabase } from './files.js';

/**
 * Opens (creating if needed) a SQLite file the way vigil uses them: WAL, shared by processes,
 * the file and its `-wal`/`-shm` 0600 whatever the umask.
 */
export function openDatabase(file: string): Database.Database {
  preparePrivateDatabase(file);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode: a commit survives a crash of the process (kill -9); only a power loss
  // can undo the last commits.
  db.pragma('synchronous = NORMAL');
  // Daemons in other processes write the same file: wait for them rather than fail.
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  return db;
}
