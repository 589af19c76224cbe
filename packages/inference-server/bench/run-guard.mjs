// What every inference benchmark does around its run: `cleanup` (its servers killed, its temporary
// directory removed) on exit and on SIGINT/SIGTERM, and a limit on the whole run, past which it
// says so and stops with exit 1; and the ports of the servers it starts.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export function guardRun(cleanup, timeoutMs, log, message = `the run took more than ${timeoutMs / 1000} s: stopping`) {
  process.on('exit', cleanup);
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      cleanup();
      process.exit(1);
    });
  }
  setTimeout(() => {
    log(message);
    cleanup();
    process.exit(1);
  }, timeoutMs).unref();
}

const handedOut = new Set();
/**
 * A port for a server the benchmark starts: random, below the kernel's ephemeral range (where the
 * benchmark's own client connections take theirs, and where one of them could hold it when the
 * server binds), one that can be listened on now, never the same twice in a run.
 */
export async function serverPort(host = '127.0.0.1') {
  let low = 32768;
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(first) && first > 12000) low = first;
  } catch {}
  for (let i = 0; i < 200; i++) {
    const port = 10000 + Math.floor(Math.random() * (low - 10000));
    if (handedOut.has(port)) continue;
    const free = await new Promise((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, host, () => s.close(() => resolve(true)));
    });
    if (free) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no free port below the ephemeral range');
}
