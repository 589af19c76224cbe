/**
 * The logs `vigil start` keeps under its home are bounded: once a minute, a log over `--log-max-mib`
 * is copied to `FILE.1` (replacing the one before) and cut to nothing where it is, so the service
 * that writes it goes on writing at its start. The files are opened for appending (the supervisor's
 * stdout files, the guardian's log, the access logs, the health log), so nothing needs to reopen
 * them; lines written between the copy and the cut are lost, as with logrotate's copytruncate. The
 * guardian's log reader, the status page and `vigil logs -f` read a cut log from its start again.
 */
import { copyFileSync, statSync, truncateSync } from 'node:fs';

/** Cuts each log over `maxBytes` (see above); the logs it cut. */
export function boundLogs(files: readonly string[], maxBytes: number): string[] {
  const cut: string[] = [];
  for (const file of files) {
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      continue; // not written yet
    }
    if (size <= maxBytes) continue;
    copyFileSync(file, `${file}.1`);
    truncateSync(file, 0);
    cut.push(file);
  }
  return cut;
}

/** Every minute, boundLogs over `files()`; one line per log cut; a failure said once until it works again. */
export function keepLogsBounded(
  files: () => readonly string[],
  maxBytes: number,
  say: (line: string) => void,
  everyMs = 60_000,
): () => void {
  let failing = false;
  const timer = setInterval(() => {
    try {
      for (const file of boundLogs(files(), maxBytes))
        say(`vigil: ${file} reached ${Math.round(maxBytes / 2 ** 20)} MiB: the last of it is in ${file}.1`);
      failing = false;
    } catch (err) {
      if (!failing) say(`vigil: cannot bound the logs: ${(err as Error).message}`);
      failing = true;
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
