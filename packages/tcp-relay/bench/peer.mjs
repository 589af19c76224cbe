#!/usr/bin/env node
// The child processes of relay.bench.mjs, so that the load client, the servers and the relay each
// have an event loop (and a core, when there is one) of their own. Not run by `pnpm bench` (the
// name does not end in .bench.mjs). Three roles, chosen by the first argument:
//
//   server  listens on 127.0.0.1 (an ephemeral port) and serves each connection as its first line
//           says: `#bench <mode> <id> [<bytes>]\n`, mode one of
//             sink    reads and counts everything up to the client's end, then ends;
//             source  writes <bytes> bytes in 64 KiB chunks with backpressure, then ends;
//             json    like sink, and also counts the lines and takes the SHA-256 of what came;
//             echo    writes back every byte it reads.
//           A connection without such a line (the bench's readiness probes) is read and ended.
//           Results go to the parent over IPC, keyed by <id>.
//   client  runs one command at a time from the parent (over IPC) against a host and port:
//           send (c->s bulk), recv (s->c bulk), json (c->s JSON-RPC lines), pingAll (round
//           trips of one line at a time on several paths, taking turns in blocks).
//   guard   `guard <command> [args...]`: runs the command (the relay under test, or socat) as its
//           child and kills it when the parent goes away, even when the parent was killed.
//
// Times are process.hrtime.bigint() (CLOCK_MONOTONIC, the same clock in every process on the
// host), sent as decimal strings. Every socket has setNoDelay(true). Only loopback is used.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { connect, createServer } from 'node:net';

const CHUNK = 64 * 1024;
const HEADER_MAX = 256;
const LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
const hr = () => process.hrtime.bigint();

const role = process.argv[2];
if (typeof process.send !== 'function') {
  process.stderr.write('peer.mjs: run by relay.bench.mjs (it needs an IPC channel)\n');
  process.exit(2);
}
// The parent went away (also when it was killed): nothing is left to report to.
process.on('disconnect', () => process.exit(0));
const send = (msg) => {
  if (process.connected) process.send(msg);
};

/**
 * Random bytes, so that nothing on the way (the kernel, socat, the relay) gets an easy stream;
 * without `"` or `\` bytes, since the filter answers and drops a line that could hold a refused
 * name or a `\u` escape and is not JSON (random bytes never are): every byte must arrive.
 */
const BULK = randomBytes(CHUNK).map((b) => (b === 0x22 ? 0x21 : b === 0x5c ? 0x5b : b));

/** Writes `total` bytes of BULK to `sock` with backpressure; calls `done` after the last write. */
function pump(sock, total, done) {
  let sent = 0;
  const more = () => {
    while (sent < total) {
      if (sock.destroyed) return;
      const n = Math.min(CHUNK, total - sent);
      sent += n;
      if (!sock.write(n === CHUNK ? BULK : BULK.subarray(0, n))) {
        sock.once('drain', more);
        return;
      }
    }
    done();
  };
  more();
}

// ---- server ------------------------------------------------------------------------------------

function server() {
  const srv = createServer({ allowHalfOpen: true, noDelay: true }, (sock) => {
    sock.setNoDelay(true);
    sock.on('error', () => sock.destroy());
    let head = Buffer.alloc(0);
    const onHead = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const nl = head.indexOf(0x0a);
      if (nl < 0) {
        if (head.length > HEADER_MAX) sock.destroy();
        return;
      }
      sock.off('data', onHead);
      const [tag, mode, id, arg] = head.subarray(0, nl).toString('latin1').split(' ');
      const rest = head.subarray(nl + 1);
      if (tag !== '#bench') {
        sock.resume();
        sock.on('end', () => sock.end());
        return;
      }
      serve(sock, mode, id, arg, rest);
    };
    sock.on('data', onHead);
    // A probe that ends without a header.
    sock.on('end', () => {
      if (head.indexOf(0x0a) < 0) sock.end();
    });
  });
  srv.on('error', (err) => {
    process.stderr.write(`peer server: ${err.message}\n`);
    process.exit(1);
  });
  srv.listen({ host: '127.0.0.1', port: 0 }, () => send({ type: 'ready', port: srv.address().port }));
}

function serve(sock, mode, id, arg, rest) {
  const fail = (err) => send({ type: 'result', id, error: err.message });
  sock.on('error', fail);
  if (mode === 'sink' || mode === 'json') {
    const hash = mode === 'json' ? createHash('sha256') : null;
    let bytes = 0;
    let lines = 0;
    let last = hr();
    const take = (chunk) => {
      bytes += chunk.length;
      last = hr();
      if (hash) {
        hash.update(chunk);
        for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) lines++;
      }
    };
    if (rest.length > 0) take(rest);
    sock.on('data', take);
    sock.on('end', () => {
      send({ type: 'result', id, bytes, lines, t1: String(last), sha256: hash ? hash.digest('hex') : null });
      sock.end();
    });
  } else if (mode === 'source') {
    const total = Number(arg);
    sock.resume(); // the client sends nothing more, but read whatever comes
    const t0 = hr();
    let written = false;
    // A path that went away mid-transfer (a relay that died) is reported at once.
    sock.on('close', () => {
      if (!written) fail(new Error('the connection closed before every byte was written'));
    });
    pump(sock, total, () => {
      written = true;
      sock.end();
      send({ type: 'result', id, t0: String(t0), bytes: total });
    });
  } else if (mode === 'echo') {
    if (rest.length > 0) sock.write(rest);
    sock.on('data', (chunk) => sock.write(chunk));
    sock.on('end', () => {
      sock.end();
      send({ type: 'result', id });
    });
  } else {
    sock.destroy();
    fail(new Error(`unknown mode ${mode}`));
  }
}

// ---- client ------------------------------------------------------------------------------------

/** The JSON-RPC streams of the `json` command by size, made once (not timed), with line count and hash. */
const jsonStreams = new Map();

/** Realistic `send` requests: ~200 characters of message, now and then a quote or a non-ASCII one. */
function makeJsonStream(totalBytes) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789      .,!?-:;()';
  const extras = ['"quoted"', 'café', 'naïve', '😀', 'über', '→'];
  const buf = Buffer.allocUnsafe(totalBytes);
  const rnd = randomBytes(4096);
  let r = 0;
  const next = () => {
    if (r >= rnd.length) {
      randomBytes(rnd.length).copy(rnd);
      r = 0;
    }
    return rnd[r++];
  };
  let at = 0;
  let lines = 0;
  let quoted = 0;
  for (let id = 1; ; id++) {
    let message = '';
    for (let i = 0; i < 200; i++) message += alphabet[next() % alphabet.length];
    const roll = next();
    if (roll < 13) {
      // ~5% of the lines: an escaped quote, so the relay's filter parses them (its slow path).
      message = `${message.slice(0, 100)} ${extras[0]} ${message.slice(100)}`;
      quoted++;
    } else if (roll < 39) {
      message = `${message.slice(0, 100)} ${extras[1 + (next() % (extras.length - 1))]} ${message.slice(100)}`;
    }
    const line = `${JSON.stringify({
      jsonrpc: '2.0',
      method: 'send',
      params: { recipient: ['+15550000002'], message },
      id,
    })}\n`;
    const n = Buffer.byteLength(line);
    if (at + n > totalBytes) break;
    buf.write(line, at);
    at += n;
    lines++;
  }
  const data = buf.subarray(0, at);
  return { data, lines, quoted, sha256: createHash('sha256').update(data).digest('hex') };
}

/** Connects (to loopback only) and runs `body(sock, finish)`; resolves with what finish gets. */
function withSocket(host, port, timeoutMs, body) {
  if (!LOOPBACK.test(host)) return Promise.reject(new Error(`not a loopback address: ${host}`));
  return new Promise((resolve, reject) => {
    let settled = false;
    const sock = connect({ host, port, noDelay: true });
    const timer = setTimeout(() => finish(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const finish = (err, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        sock.destroy();
        reject(err);
      } else resolve(value);
    };
    sock.on('error', (err) => finish(err));
    sock.once('connect', () => {
      sock.setNoDelay(true);
      body(sock, finish);
    });
  });
}

const commands = {
  /** Client -> server bulk: `bytes` after the header, then end; done when the server has ended. */
  send: ({ host, port, id, bytes, timeoutMs }) =>
    withSocket(host, port, timeoutMs, (sock, finish) => {
      sock.resume();
      sock.on('close', () => finish(null, { t0: String(t0) }));
      sock.write(`#bench sink ${id}\n`);
      const t0 = hr();
      pump(sock, bytes, () => sock.end());
    }),

  /** Server -> client bulk: counts until the server ends. */
  recv: ({ host, port, id, bytes, timeoutMs }) =>
    withSocket(host, port, timeoutMs, (sock, finish) => {
      let got = 0;
      let last = hr();
      sock.on('data', (chunk) => {
        got += chunk.length;
        last = hr();
      });
      sock.on('end', () => finish(null, { bytes: got, t1: String(last) }));
      sock.write(`#bench source ${id} ${bytes}\n`);
    }),

  /** Client -> server JSON-RPC lines, written in 64 KiB slices (lines split anywhere). */
  json: ({ host, port, id, bytes, timeoutMs }) => {
    if (!jsonStreams.has(bytes)) jsonStreams.set(bytes, makeJsonStream(bytes));
    const { data, lines, quoted, sha256 } = jsonStreams.get(bytes);
    if (!host) return Promise.resolve({ bytes: data.length, lines, quoted, sha256 });
    return withSocket(host, port, timeoutMs, (sock, finish) => {
      sock.resume();
      sock.on('close', () => finish(null, { t0: String(t0), bytes: data.length, lines, quoted, sha256 }));
      sock.write(`#bench json ${id}\n`);
      const t0 = hr();
      let at = 0;
      const more = () => {
        while (at < data.length) {
          if (sock.destroyed) return;
          const end = Math.min(at + CHUNK, data.length);
          const ok = sock.write(data.subarray(at, end));
          at = end;
          if (!ok) {
            sock.once('drain', more);
            return;
          }
        }
        sock.end();
      };
      more();
    });
  },

  /** Round trips on several paths, interleaved (see pingAll). */
  pingAll,
};

/** The line of the round trips: a JSON-RPC `send` request of `size` bytes, newline included. */
function pingLine(size) {
  const body = '{"jsonrpc":"2.0","method":"send","params":{"recipient":["+15550000002"],"message":"';
  return Buffer.from(`${body}${'x'.repeat(Math.max(0, size - body.length - 4))}"}}\n`);
}

/** p50, p99 and max of round-trip samples in µs. */
function quantiles(samples) {
  const n = samples.length;
  const s = samples.sort();
  const q = (p) => (n === 0 ? Number.NaN : s[Math.min(n - 1, Math.floor(p * n))]);
  return { n, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: q(1) };
}

/**
 * Round trips on several paths at once, so that each sees the same state of the machine (on a
 * small VM the scheduler's mood changes within seconds): one connection per path, `block` round
 * trips on one, then `block` on the next, and so on, until each has had `warmup` unrecorded and
 * `count` recorded. One round trip at a time over all.
 */
function pingAll({ targets, id, size, warmup, count, block, timeoutMs }) {
  const line = pingLine(size);
  const deadline = Date.now() + timeoutMs - 1000;
  const opened = targets.map((t, k) =>
    withSocket(t.host, t.port, timeoutMs, (sock, finish) => finish(null, { sock, k })).then(({ sock }) => {
      sock.write(`#bench echo ${id}-${k}\n`);
      return sock;
    }),
  );
  return Promise.all(opened).then(
    (socks) =>
      new Promise((resolve, reject) => {
        const samples = targets.map(() => new Float64Array(count));
        const done = targets.map(() => 0);
        let cur = 0;
        let inBlock = 0;
        let got = 0;
        let t = 0n;
        const close = () => {
          for (const s of socks) s.end();
        };
        const fail = (err) => {
          for (const s of socks) s.destroy();
          reject(err);
        };
        const fire = () => {
          if (Date.now() > deadline) {
            fail(new Error(`round trips not done within ${timeoutMs} ms`));
            return;
          }
          got = 0;
          t = hr();
          socks[cur].write(line);
        };
        socks.forEach((sock, k) => {
          sock.on('error', fail);
          sock.on('data', (chunk) => {
            if (k !== cur) return fail(new Error(`bytes from path ${k} out of turn`));
            got += chunk.length;
            if (got < line.length) return;
            const dt = Number(hr() - t) / 1000;
            const i = done[k]++;
            if (i >= warmup) samples[k][i - warmup] = dt;
            // Next: the same path until its block is done, then the next path with turns left.
            if (++inBlock >= block || done[k] >= warmup + count) {
              inBlock = 0;
              let next = -1;
              for (let j = 1; j <= targets.length; j++) {
                const c = (cur + j) % targets.length;
                if (done[c] < warmup + count) {
                  next = c;
                  break;
                }
              }
              if (next < 0) {
                close();
                resolve({ lineBytes: line.length, paths: samples.map((x) => quantiles(x)) });
                return;
              }
              cur = next;
            }
            fire();
          });
        });
        fire();
      }),
    (err) => {
      for (const p of opened)
        p.then(
          (s) => s.destroy(),
          () => {},
        );
      throw err;
    },
  );
}

function client() {
  process.on('message', async (msg) => {
    const run = commands[msg?.cmd];
    try {
      if (!run) throw new Error(`unknown command ${msg?.cmd}`);
      send({ type: 'done', seq: msg.seq, ...(await run(msg)) });
    } catch (err) {
      send({ type: 'done', seq: msg.seq, error: err.message });
    }
  });
  send({ type: 'ready' });
}

// ---- guard -------------------------------------------------------------------------------------

function guard() {
  const [cmd, ...args] = process.argv.slice(3);
  const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      process.exit(0);
    }, 3000).unref();
  };
  process.removeAllListeners('disconnect');
  process.on('disconnect', kill);
  process.on('SIGTERM', kill);
  process.on('SIGINT', kill);
  child.on('error', (err) => {
    send({ type: 'exit', error: err.message });
    process.exit(1);
  });
  child.on('spawn', () => send({ type: 'spawned', pid: child.pid }));
  child.on('exit', (code, signal) => {
    send({ type: 'exit', code, signal });
    process.exit(0);
  });
}

if (role === 'server') server();
else if (role === 'client') client();
else if (role === 'guard') guard();
else {
  process.stderr.write(`peer.mjs: unknown role ${role}\n`);
  process.exit(2);
}
