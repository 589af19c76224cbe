#!/usr/bin/env node
// The baseline of the /v1/models measurement: a bare Node HTTP server that answers one static
// JSON model list, nothing else. Listens on 127.0.0.1, a free port, printed on stdout.
import { createServer } from 'node:http';

const body = Buffer.from(
  JSON.stringify({ object: 'list', data: [{ id: 'bench', object: 'model', created: 0, owned_by: 'vigil' }] }),
);
const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
