import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from '@jest/globals';
import { until } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { UsageError } from '../src/errors.js';
import { lastLines, logFileOf, printLog, readTail } from '../src/logs.js';
import { homePaths } from '../src/paths.js';

describe('vigil logs', () => {
  const home = tmpDir('vigil-logs-');
  afterAll(() => home.cleanup());
  const file = `${home.dir}/a.log`;

  it('maps a service to its log; the health check to state/health.log; an unknown name is a usage error', () => {
    const paths = homePaths('/h');
    expect(logFileOf(paths, 'guardian')).toBe('/h/logs/guardian.log');
    expect(logFileOf(paths, 'inference-server-access')).toBe('/h/logs/inference-server-access.log');
    expect(logFileOf(paths, 'health-check')).toBe('/h/state/health.log');
    expect(() => logFileOf(paths, 'nginx')).toThrow(UsageError);
  });

  it('the whole log, or its last N lines (with or without a final newline), read from the end', () => {
    expect(readTail(`${home.dir}/none.log`)).toBeNull();
    writeFileSync(file, 'one\ntwo\nthree\n');
    expect(readTail(file)?.text).toBe('one\ntwo\nthree\n');
    expect(readTail(file, 2)?.text).toBe('two\nthree\n');
    expect(readTail(file, 10)?.text).toBe('one\ntwo\nthree\n');
    expect(readTail(file, 0)?.text).toBe('');
    writeFileSync(file, 'one\ntwo\nthree');
    expect(readTail(file, 1)?.text).toBe('three');
    // Lines longer than a read chunk.
    const long = `${'x'.repeat(100_000)}\n`;
    writeFileSync(file, `first\n${long}${long}last\n`);
    expect(readTail(file, 2)?.text).toBe(`${long}last\n`);
    expect(lastLines(file, 1)).toEqual(['last']);
  });

  it('-f prints what is appended, and a log replaced or truncated from its start', async () => {
    writeFileSync(file, 'old\n');
    let text = '';
    let stop!: () => void;
    const until_ = new Promise<void>((r) => {
      stop = r;
    });
    const following = printLog(file, { lines: 1, follow: true, write: (t) => (text += t), until: until_, pollMs: 10 });
    await until('the first line', () => text === 'old\n');
    appendFileSync(file, 'new 1\n');
    await until('the appended line', () => text === 'old\nnew 1\n');
    writeFileSync(`${file}.next`, 'rotated\n');
    renameSync(`${file}.next`, file);
    await until('the replaced log', () => text.endsWith('new 1\nrotated\n'));
    writeFileSync(file, '');
    appendFileSync(file, 'x\n');
    await until('the truncated log', () => text.endsWith('rotated\nx\n'));
    stop();
    expect(await following).toBe(true);
  });

  it('false for a log that does not exist (not following)', async () => {
    expect(await printLog(`${home.dir}/none.log`, { write: () => {} })).toBe(false);
  });
});
