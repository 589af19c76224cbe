/** The state file: validated when read, written only when it changed, its lock. */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { StateBusyError, StateFileError } from '../src/errors.js';
import { INITIAL_STATE } from '../src/machine.js';
import { freshState, parseState, StateFile } from '../src/state-file.js';
import { tmpDir } from './helpers.js';

const tmp = tmpDir();
afterAll(() => tmp.cleanup());

const why = (text: string): string => {
  try {
    parseState('/s.json', text);
  } catch (err) {
    expect(err).toBeInstanceOf(StateFileError);
    expect((err as StateFileError).exitCode).toBe(2);
    return (err as Error).message;
  }
  throw new Error('expected the state to be refused');
};

describe('parseState', () => {
  it('fills what a state file lacks with the initial values, and drops the plan under way', () => {
    const s = parseState(
      '/s.json',
      JSON.stringify({ version: 1, machine: { consecutive: 1, plan: ['chat'], restarts: [5] }, updatedAt: 7 }),
    );
    expect(s).toEqual({
      version: 1,
      machine: { ...INITIAL_STATE, consecutive: 1, restarts: [5] },
      logs: {},
      counters: {},
      ownProbes: [],
      lastSuccessAt: null,
      updatedAt: 7,
    });
  });

  it('reads log positions with and without the digest of the file head', () => {
    const head = { bytes: 4, sha256: 'a'.repeat(64) };
    const logs = { primary: { dev: 1, ino: 2, offset: 3 }, 'access:primary': { dev: 1, ino: 5, offset: 9, head } };
    expect(parseState('/s.json', JSON.stringify({ version: 1, logs })).logs).toEqual(logs);
    expect(
      why(JSON.stringify({ version: 1, logs: { primary: { dev: 1, ino: 2, offset: 3, head: { bytes: 4 } } } })),
    ).toMatch(/\(logs\.primary\.head\.sha256\)/);
  });

  it('keeps the probes of ours that are well formed and drops the others', () => {
    const s = parseState('/s.json', JSON.stringify({ version: 1, ownProbes: [[1, 2, 'primary'], [1, 'x'], 3] }));
    expect(s.ownProbes).toEqual([[1, 2, 'primary']]);
  });

  it('refuses what is not JSON, not its own, or has fields of the wrong type, naming them', () => {
    expect(why('{')).toMatch(/^state file \/s\.json is not valid JSON \(/);
    expect(why('{"hello":"world"}')).toBe(
      'state file /s.json is not a guardian state file of version 1; fix it, or remove it to start afresh (its alerting state is then lost)',
    );
    expect(why('[]')).toMatch(/is not a guardian state file of version 1/);
    expect(
      why(JSON.stringify({ version: 1, machine: { consecutive: -1, alerting: { reason: 'x', since: 1 } } })),
    ).toMatch(
      /^state file \/s\.json has fields of the wrong type \(machine\.consecutive, machine\.alerting\.reason\); /,
    );
  });
});

describe('StateFile', () => {
  it('writes a changed state atomically, 0600, and an unchanged one not at all', () => {
    const path = join(tmp.dir, 'a', 'state.json');
    const f = new StateFile(path);
    const data = f.read();
    expect(data.machine).toEqual(freshState().machine);
    f.save(data);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const written = readFileSync(path, 'utf8');
    data.updatedAt = 1; // not a change
    f.save(data);
    expect(readFileSync(path, 'utf8')).toBe(written);
    data.lastSuccessAt = 5;
    f.save(data);
    expect(JSON.parse(readFileSync(path, 'utf8')).lastSuccessAt).toBe(5);
    expect(readdirSync(join(tmp.dir, 'a'))).toEqual(['state.json']);
  });

  it('waits for a live holder of the lock, then says who holds it; takes over a dead holder’s', async () => {
    const path = join(tmp.dir, 'b', 'state.json');
    const f = new StateFile(path);
    (await f.lock(0, 60_000))();
    // Another live process (this one's parent) holds it.
    writeFileSync(`${path}.lock`, `${process.ppid}\n`);
    const busy = await f.lock(50, 60_000).catch((err: unknown) => err);
    expect(busy).toBeInstanceOf(StateBusyError);
    expect((busy as StateBusyError).message).toBe(
      `another guardian (pid ${process.ppid}) is updating ${path}.lock; try again`,
    );
    expect((busy as StateBusyError).code).toBe('VIGIL_ERR_GUARDIAN_STATE_BUSY');
    writeFileSync(`${path}.lock`, '999999999\n');
    const release = await f.lock(0, 60_000);
    expect(readFileSync(`${path}.lock`, 'utf8').trim()).toBe(String(process.pid));
    release();
  });
});
