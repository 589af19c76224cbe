/** The incremental log reader: from a remembered offset, through rotation, truncation and half-written lines. */
import { appendFileSync, renameSync, rmSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { lineTime } from '@vigil/shared-types';
import { endPosition, readNewLines } from '../src/logreader.js';
import { tmpDir } from './helpers.js';

const tmp = tmpDir();
afterAll(() => tmp.cleanup());
const texts = (r: { lines: readonly { text: string }[] }) => r.lines.map((l) => l.text);

describe('readNewLines', () => {
  it('reads only what was appended since the remembered position', async () => {
    const f = join(tmp.dir, 'a.log');
    writeFileSync(f, 'one\ntwo\n');
    const r1 = await readNewLines(f, null);
    expect(texts(r1)).toEqual(['one', 'two']);
    expect(r1.first).toBe(true);
    const r2 = await readNewLines(f, r1.position);
    expect(texts(r2)).toEqual([]);
    appendFileSync(f, 'three\r\nfour\n');
    const r3 = await readNewLines(f, r2.position);
    expect(texts(r3)).toEqual(['three', 'four']);
    expect(r3.first).toBe(false);
  });

  it('reads a half-written last line now, and again once it is complete', async () => {
    const f = join(tmp.dir, 'partial.log');
    writeFileSync(f, 'done\nSegmentation fa');
    const r1 = await readNewLines(f, null);
    expect(texts(r1)).toEqual(['done', 'Segmentation fa']);
    appendFileSync(f, 'ult\n');
    const r2 = await readNewLines(f, r1.position);
    expect(texts(r2)).toEqual(['Segmentation fault']);
  });

  it('follows a rotation: the new file is read from its start', async () => {
    const f = join(tmp.dir, 'rot.log');
    writeFileSync(f, 'old 1\nold 2\n');
    const r1 = await readNewLines(f, null);
    renameSync(f, `${f}.1`);
    writeFileSync(f, 'new 1\n');
    const r2 = await readNewLines(f, r1.position);
    expect(r2.rotated).toBe(true);
    expect(texts(r2)).toEqual(['new 1']);
  });

  it('follows a truncation (copytruncate): read from the start again', async () => {
    const f = join(tmp.dir, 'trunc.log');
    writeFileSync(f, 'a long line that was there before\n');
    const r1 = await readNewLines(f, null);
    truncateSync(f, 0);
    appendFileSync(f, 'after\n');
    const r2 = await readNewLines(f, r1.position);
    expect(r2.truncated).toBe(true);
    expect(texts(r2)).toEqual(['after']);
  });

  it('takes a new file that got the old inode number for a new file: read from its start', async () => {
    // A filesystem gives a freed inode number to the next file it creates, so a log rotated by
    // deletion can come back with the old number. Rewriting the file in place is that case as
    // the reader sees it: the same device and inode, other first bytes, a size past the offset.
    const f = join(tmp.dir, 'reused.log');
    writeFileSync(f, 'six\n');
    const r1 = await readNewLines(f, null);
    writeFileSync(f, 'eight\nnine\n');
    const r2 = await readNewLines(f, r1.position);
    expect(r2.position).toMatchObject({ ino: r1.position?.ino, dev: r1.position?.dev });
    expect(r2.rotated).toBe(true);
    expect(r2.truncated).toBe(false);
    expect(texts(r2)).toEqual(['eight', 'nine']);
    // The head grows with a file that was short when first read, and still matches it.
    appendFileSync(f, `${'x'.repeat(300)}\n`);
    const r3 = await readNewLines(f, r2.position);
    expect(r3.rotated).toBe(false);
    expect(r3.position?.head?.bytes).toBe(256);
    appendFileSync(f, 'ten\n');
    expect(texts(await readNewLines(f, r3.position))).toEqual(['ten']);
  });

  it('after a new file of a full head took the old inode number, goes on in the new file (its own head kept)', async () => {
    const f = join(tmp.dir, 'reused-full.log');
    const lines = (tag: string) => Array.from({ length: 30 }, (_, i) => `${tag} line ${i}`).join('\n');
    writeFileSync(f, `${lines('old')}\n`);
    const r1 = await readNewLines(f, null);
    expect(r1.position?.head?.bytes).toBe(256);
    writeFileSync(f, `${lines('new')}\n${lines('more')}\n`);
    const r2 = await readNewLines(f, r1.position);
    expect(r2.rotated).toBe(true);
    expect(texts(r2)[0]).toBe('new line 0');
    expect(r2.position?.head?.sha256).not.toBe(r1.position?.head?.sha256);
    appendFileSync(f, 'next\n');
    const r3 = await readNewLines(f, r2.position);
    expect(r3.rotated).toBe(false);
    expect(texts(r3)).toEqual(['next']);
    expect(r3.position?.head).toEqual(r2.position?.head);
  });

  it('still reads from a position stored before positions had a head (the inode alone)', async () => {
    const f = join(tmp.dir, 'old-position.log');
    writeFileSync(f, 'one\n');
    const end = await endPosition(f);
    expect(end?.head).toEqual({ bytes: 4, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    appendFileSync(f, 'two\n');
    const { head: _head, ...old } = end ?? { dev: 0, ino: 0, offset: 0 };
    const r = await readNewLines(f, old);
    expect(texts(r)).toEqual(['two']);
    expect(r.rotated).toBe(false);
    expect(r.position?.head?.bytes).toBe(8);
  });

  it('copes with a file that is missing, then appears', async () => {
    const f = join(tmp.dir, 'later.log');
    const r1 = await readNewLines(f, null);
    expect(r1).toMatchObject({ lines: [], position: null });
    writeFileSync(f, 'hello\n');
    expect(texts(await readNewLines(f, r1.position))).toEqual(['hello']);
    rmSync(f);
    expect(await readNewLines(f, { dev: 1, ino: 2, offset: 6 })).toMatchObject({ lines: [], position: null });
  });

  it('reads only the tail of a file seen for the first time, and only the last bytes of a flood', async () => {
    const f = join(tmp.dir, 'big.log');
    const old = Array.from({ length: 5000 }, (_, i) => `old line ${i}`).join('\n');
    writeFileSync(f, `${old}\nrecent\n`);
    const r1 = await readNewLines(f, null, { tailBytes: 100 });
    expect(texts(r1).at(-1)).toBe('recent');
    expect(texts(r1).length).toBeLessThan(10);
    expect(texts(r1)[0]).toMatch(/^old line \d+$/); // a whole line, not the end of one
    appendFileSync(f, `${old}\nnewest\n`);
    const r2 = await readNewLines(f, r1.position, { maxBytes: 200 });
    expect(texts(r2).at(-1)).toBe('newest');
    expect(texts(r2).length).toBeLessThan(20);
    expect(r2.position?.offset).toBe((await endPosition(f))?.offset);
  });

  it('dates each line by its own timestamp, else by the file modification time', async () => {
    const f = join(tmp.dir, 'dated.log');
    writeFileSync(f, '{"ts":1700000000.5,"msg":"request completed"}\nno date here\n');
    utimesSync(f, 1700000100, 1700000100);
    const r = await readNewLines(f, null);
    expect(r.lines.map((l) => l.at)).toEqual([1700000000.5, 1700000100]);
  });
});

describe('lineTime', () => {
  it('reads JSON ts (seconds or milliseconds), ISO-8601, and Python http.server dates', () => {
    expect(lineTime('{"ts":1795310201.267,"level":"info","msg":"request completed"}')).toBe(1795310201.267);
    expect(lineTime('{"ts":1795310201267}')).toBe(1795310201.267);
    expect(lineTime('2025-11-22T10:15:01Z Segmentation fault')).toBe(Date.parse('2025-11-22T10:15:01Z') / 1000);
    expect(lineTime('127.0.0.1 - - [22/Nov/2025 10:15:01] "POST /v1/chat/completions HTTP/1.1" 200 -')).toBe(
      new Date(2025, 10, 22, 10, 15, 1).getTime() / 1000,
    );
    expect(lineTime('Segmentation fault (core dumped)')).toBeNull();
  });
});

describe('rotation (issue 18.5)', () => {
  it('reads the lines written between the last read and a rotation from the rotated file, before the new one', async () => {
    const { mkdtempSync, appendFileSync: append, renameSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join: j } = await import('node:path');
    const dir = mkdtempSync(j(tmpdir(), 'vigil-rotate-'));
    try {
      const log = j(dir, 'inference.log');
      append(log, 'one\n');
      const first = await readNewLines(log, null);
      append(log, 'two: Segmentation fault\nthree (no newline yet)');
      renameSync(log, `${log}.1`);
      append(log, 'four\n');
      const r = await readNewLines(log, first.position);
      expect(r.rotated).toBe(true);
      expect(r.rotatedTo).toBe(`${log}.1`);
      expect(r.lines.map((l) => l.text)).toEqual(['two: Segmentation fault', 'three (no newline yet)', 'four']);
      // A dated name works too, and a rotated file that is gone leaves only the new one.
      append(log, 'five\n');
      renameSync(log, `${log}-20250101`);
      append(log, 'six\n');
      const dated = await readNewLines(log, r.position);
      expect(dated.lines.map((l) => l.text)).toEqual(['five', 'six']);
      rmSync(`${log}-20250101`);
      append(log, 'seven\n');
      renameSync(log, `${log}.2`);
      rmSync(`${log}.2`);
      append(log, 'eight\n');
      expect((await readNewLines(log, dated.position)).lines.map((l) => l.text)).toEqual(['eight']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
