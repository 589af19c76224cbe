/**
 * What a remote end or another user can put in vigil's way: control characters in text that is
 * printed (terminalSafe), web origins (judgeOrigin, the one rule of every listener), symbolic links
 * in the directories vigil writes to (refuseSymlinkedDir, in every atomic write and log append).
 */
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { canonicalOrigin, judgeOrigin, parseAllowedOrigins, terminalSafe } from '../src/index.js';
import {
  appendFileNoFollow,
  refuseSymlinkedDir,
  SymlinkedDirError,
  writeFileAtomic,
  writeFileAtomicWith,
} from '../src/node/index.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'vigil-untrusted-'));

describe('terminalSafe', () => {
  it('escapes ESC sequences, other C0/C1 controls, DEL and bidi overrides; keeps text and tabs', () => {
    const hostile = 'ok\x1b]0;pwned\x07\x1b[2J\x1b[1A\r\nnext\x00\x7f\x9b31m\u202eabc\tend';
    const safe = terminalSafe(hostile);
    expect(safe).toBe('ok\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1A\\r\\nnext\\x00\\x7f\\x9b31m\\u202eabc\tend');
    // Nothing a terminal interprets is left.
    expect([...safe].some((c) => c !== '\t' && (c < ' ' || (c >= '\x7f' && c <= '\x9f') || c === '\u202e'))).toBe(
      false,
    );
    expect(terminalSafe('plain text, ünïcödé, 表情 🙂')).toBe('plain text, ünïcödé, 表情 🙂');
  });
});

describe('origins', () => {
  const allowed = parseAllowedOrigins(['http://localhost:3000', 'HTTPS://App.Example']);

  it('canonicalises origins and refuses what is not one', () => {
    expect(canonicalOrigin('HTTP://LocalHost:3000')).toBe('http://localhost:3000');
    expect(canonicalOrigin('https://a.example:443')).toBe('https://a.example');
    for (const bad of ['null', 'file://x', 'http://a.example/path', 'http://u:p@a.example', '%E0', '']) {
      expect(canonicalOrigin(bad)).toBeNull();
    }
    expect(() => parseAllowedOrigins(['http://ok.example', 'not an origin'])).toThrow(/invalid origin "not an origin"/);
  });

  it('passes requests without Origin, allows the listed ones, refuses every other (null and garbage too)', () => {
    expect(judgeOrigin(undefined, allowed)).toEqual({ kind: 'none' });
    expect(judgeOrigin('http://localhost:3000', allowed)).toEqual({ kind: 'allowed', origin: 'http://localhost:3000' });
    expect(judgeOrigin('https://app.example', allowed)).toEqual({ kind: 'allowed', origin: 'https://app.example' });
    for (const o of ['http://localhost:3001', 'null', 'http://evil.example', '\u0000', 'https://app.example/x']) {
      expect(judgeOrigin(o, allowed).kind).toBe('refused');
    }
    expect(judgeOrigin('http://evil.example', new Set()).kind).toBe('refused');
  });
});

describe('symbolic links in the directories vigil writes to', () => {
  /** A directory of "another user" and a link to it where vigil's file would go. */
  function linked(): { victim: string; link: string } {
    const root = tmp();
    const victim = join(root, 'victim');
    mkdirSync(victim);
    const link = join(root, 'textfile');
    symlinkSync(victim, link);
    return { victim, link };
  }

  it('refuses an atomic write (both kinds) whose directory is a symlink, writing nothing through it', async () => {
    const { victim, link } = linked();
    expect(() => writeFileAtomic(join(link, 'vigil.prom'), 'x')).toThrow(SymlinkedDirError);
    expect(() => writeFileAtomic(join(link, 'vigil.prom'), 'x')).toThrow(/is a symbolic link/);
    await expect(writeFileAtomicWith(join(link, 'model.gguf'), async () => {})).rejects.toThrow(SymlinkedDirError);
    expect(readdirSync(victim)).toEqual([]);
  });

  it('replaces a symlink at the file itself instead of writing through it', () => {
    const { victim } = linked();
    const dir = tmp();
    const target = join(victim, 'secret');
    writeFileSync(target, 'keep');
    symlinkSync(target, join(dir, 'state.json'));
    writeFileAtomic(join(dir, 'state.json'), 'new');
    expect(readFileSync(target, 'utf8')).toBe('keep');
    expect(lstatSync(join(dir, 'state.json')).isSymbolicLink()).toBe(false);
  });

  it('appends to a log only in a real directory and never through a symlinked file', () => {
    const { victim, link } = linked();
    expect(() => appendFileNoFollow(join(link, 'health.log'), 'line\n')).toThrow(SymlinkedDirError);
    const dir = tmp();
    const target = join(victim, 'authorized_keys');
    writeFileSync(target, 'keep\n');
    symlinkSync(target, join(dir, 'guardian.log'));
    expect(() => appendFileNoFollow(join(dir, 'guardian.log'), 'line\n')).toThrow(/ELOOP|symbolic/);
    expect(readFileSync(target, 'utf8')).toBe('keep\n');
    expect(readdirSync(victim)).toEqual(['authorized_keys']);
    // A real directory and file: appended, created with the mode asked.
    appendFileNoFollow(join(dir, 'real.log'), 'a\n', 0o640);
    appendFileNoFollow(join(dir, 'real.log'), 'b\n', 0o640);
    expect(readFileSync(join(dir, 'real.log'), 'utf8')).toBe('a\nb\n');
    expect(lstatSync(join(dir, 'real.log')).mode & 0o777).toBe(0o640);
  });

  it('lets a missing directory be created, and a real one be written', () => {
    const dir = tmp();
    expect(() => refuseSymlinkedDir(join(dir, 'new', 'file'))).not.toThrow();
    writeFileAtomic(join(dir, 'new', 'file'), 'x');
    expect(existsSync(join(dir, 'new', 'file'))).toBe(true);
    chmodSync(dir, 0o700);
  });
});
