#!/usr/bin/env node
// The baseline of daemon.bench.mjs: a bare JSON-RPC server with nothing but the transport, run
// as its own process so that it, like the daemon, has a core to itself. It listens on 127.0.0.1
// only (random ports) and prints one line `{"tcp":PORT,"http":PORT}` when ready.
//
//   TCP   newline-delimited JSON, Nagle off: JSON.parse of the line, JSON.stringify of the reply.
//   HTTP  POST /api/v1/rpc: the same per request, with node:http (keep-alive).
//   SSE   GET /api/v1/events: a `send` (TCP or HTTP) is written at once, in the daemon's SSE
//         format, to every open stream: the send → SSE path with no storage and no second
//         process, the floor for the daemon's send → SSE numbers.
//
// Every call other than `send` gets the fixed reply {"jsonrpc":"2.0","result":{"version":"x"},"id":ID}.
// It stops on SIGTERM or SIGINT, and when its stdin closes (the benchmark is gone).
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';

const HOST = '127.0.0.1';
const ACCOUNT = '+15550000002';
const streams = new Set();
let eventSeq = 0;

/** One request line or body in, one reply string out (the whole of the baseline's work). */
function answer(text) {
  let req;
  try {
    req = JSON.parse(text);
  } catch {
    return JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
  }
  if (req.method === 'send') {
    const timestamp = Date.now();
    const message = req.params?.message ?? null;
    const data = JSON.stringify({
      envelope: {
        source: '+15550000001',
        sourceNumber: '+15550000001',
        timestamp,
        dataMessage: { timestamp, message },
      },
      account: ACCOUNT,
    });
    eventSeq += 1;
    const event = `id:${eventSeq}\nevent:receive\ndata:${data}\n\n`;
    for (const res of streams) res.write(event);
    return JSON.stringify({ jsonrpc: '2.0', result: { timestamp }, id: req.id });
  }
  return JSON.stringify({ jsonrpc: '2.0', result: { version: 'x' }, id: req.id });
}

const tcp = createTcpServer({ noDelay: true }, (socket) => {
  socket.setNoDelay(true);
  socket.setEncoding('utf8');
  let buf = '';
  socket.on('data', (chunk) => {
    buf += chunk;
    let start = 0;
    for (;;) {
      const nl = buf.indexOf('\n', start);
      if (nl < 0) break;
      const line = buf.slice(start, nl);
      start = nl + 1;
      if (line.trim() !== '') socket.write(`${answer(line)}\n`);
    }
    buf = start >= buf.length ? '' : buf.slice(start);
    if (buf.length > 1024 * 1024) socket.destroy(); // bounded: no line is this long here
  });
  socket.on('error', () => {});
});

const http = createHttpServer((req, res) => {
  if (req.method === 'GET' && req.url === '/api/v1/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    streams.add(res);
    res.on('close', () => streams.delete(res));
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = answer(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
http.keepAliveTimeout = 5000;

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, () => resolve(server.address().port));
  });
}

const stop = () => {
  for (const res of streams) res.end();
  tcp.close();
  http.closeAllConnections();
  http.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();

const ports = { tcp: await listen(tcp), http: await listen(http) };
process.stdout.write(`${JSON.stringify(ports)}\n`);
