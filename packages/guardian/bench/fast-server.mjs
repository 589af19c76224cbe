#!/usr/bin/env node
// The fast server of the guardian benchmark: answers POST /v1/chat/completions and GET /v1/models
// at once with fixed bodies, and (with --access-log F) appends one "request completed" line per
// completion, as the inference server does, except for the baseline's requests (header
// x-bench-baseline), which the guardian would otherwise take for clients keeping the server busy.
// Prints {"port":N} once listening on 127.0.0.1.
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';

const args = process.argv.slice(2);
const i = args.indexOf('--access-log');
const access = i >= 0 ? createWriteStream(args[i + 1], { flags: 'a' }) : null;
const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 0,
  model: 'tiny',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'length' }],
  usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
});
const models = JSON.stringify({
  object: 'list',
  data: [{ id: 'tiny', object: 'model', created: 0, owned_by: 'vigil' }],
});

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const body = req.url === '/v1/models' ? models : completion;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    if (access && req.url === '/v1/chat/completions' && !req.headers['x-bench-baseline']) {
      access.write(`{"ts":${Date.now() / 1000},"level":"info","msg":"request completed","status":200}\n`);
    }
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
process.on('SIGTERM', () => process.exit(0));
