import { describe, expect, it } from '@jest/globals';
import { hostAllowed, lineTime, manifestDigest, parseManifest, splitList } from '../src/index.js';

describe('hostAllowed (DNS-rebinding guard)', () => {
  it('accepts loopback names and the bound host in any case and with any port; refuses others', () => {
    expect(hostAllowed('127.0.0.1:8080', '127.0.0.1')).toBe(true);
    expect(hostAllowed('LOCALHOST:8080', '127.0.0.1')).toBe(true);
    expect(hostAllowed('[::1]:8080', '127.0.0.1')).toBe(true);
    expect(hostAllowed('My-Host.lan:8080', 'my-host.lan')).toBe(true);
    expect(hostAllowed('evil.example:8080', '127.0.0.1')).toBe(false);
    expect(hostAllowed('evil.example', '0.0.0.0')).toBe(true);
    expect(hostAllowed(undefined, '127.0.0.1')).toBe(true);
  });
});

describe('splitList', () => {
  it('splits on commas and white space alike', () => {
    expect(splitList('10.0.0.0/8, 192.168.0.0/16 127.0.0.1')).toEqual(['10.0.0.0/8', '192.168.0.0/16', '127.0.0.1']);
    expect(splitList('  ')).toEqual([]);
  });
});

describe('lineTime', () => {
  it('reads seconds or milliseconds, ISO times and http.server times, always as seconds', () => {
    expect(lineTime('{"ts":1700000000.5,"level":"info"}')).toBe(1700000000.5);
    expect(lineTime('{"ts":1700000000500}')).toBe(1700000000.5);
    expect(lineTime('{"time":"2023-11-14T22:13:20.000Z"}')).toBe(1700000000);
    expect(lineTime('2023-11-14T22:13:20Z request completed')).toBe(1700000000);
    const py = lineTime('127.0.0.1 - - [14/Nov/2023 22:13:20] "POST /v1/chat/completions HTTP/1.1" 200 -');
    expect(py).toBe(new Date(2023, 10, 14, 22, 13, 20).getTime() / 1000);
    expect(lineTime('no time here')).toBeNull();
  });
});

describe('manifests', () => {
  const sha = 'a'.repeat(64);
  it('parses the JSON format and finds a file by path or base name', () => {
    const text = JSON.stringify({ files: [{ path: 'model.gguf', sha256: sha, size: 3 }] });
    expect(parseManifest(text, 'm.json').files).toHaveLength(1);
    expect(manifestDigest(text, '/models/model.gguf')).toEqual({ sha256: sha });
    expect(manifestDigest(text, '/models/other.gguf', 'm.json')).toEqual({ error: 'm.json does not list other.gguf' });
    expect(() => parseManifest('{"files":[{"path":"x"}]}', 'm.json')).toThrow(
      'every entry needs path, sha256 and size',
    );
    expect(() => parseManifest('nope', 'm.json')).toThrow(/m\.json is not valid JSON/);
  });
  it('reads sha256sum lines', () => {
    expect(manifestDigest(`${sha}  /usr/bin/server\n`, '/opt/server')).toEqual({ sha256: sha });
    expect(manifestDigest(`${sha} *server\n`, '/opt/server')).toEqual({ sha256: sha });
  });
});

describe('log lines', () => {
  it('always write ts as seconds with a fraction, first, and never let a field override it', async () => {
    const { jsonLogLine, logLine } = await import('../src/index.js');
    expect(logLine('info', 'm', 's', { ts: 5, level: 'x', a: 1 }, 1_700_000_000_000)).toBe(
      '{"ts":1700000000.000,"level":"info","msg":"m","service":"s","a":1}',
    );
    expect(logLine('warn', 'm', 's', {}, 1_700_000_000_123)).toBe(
      '{"ts":1700000000.123,"level":"warn","msg":"m","service":"s"}',
    );
    expect(jsonLogLine(12, {})).toBe('{"ts":12.000}');
    expect(JSON.parse(jsonLogLine(1.5, { event: 'probe_ok', ts: 9 }))).toEqual({ ts: 1.5, event: 'probe_ok' });
  });
});
