import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { formatHostPort, type HostPort } from '@vigil/shared-types';
import { rpc, spawnDaemon } from '../../signal-daemon/test/helpers.js';
import { TcpClient, tmpDir } from './helpers.js';

const BIN = fileURLToPath(new URL('../bin/tcp-relay.js', import.meta.url));
const A = '+15550000011';
const B = '+15550000012';
const PASSWD = '/etc/passwd';

/** The relay as a process on `host`; resolves with its port once it logged "listening". */
function spawnRelay(host: string, target: HostPort, env: NodeJS.ProcessEnv = {}, args: string[] = []) {
  const child = spawn(process.execPath, [BIN, '--listen', `${host}:0`, '--target', formatHostPort(target), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const port = new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`relay did not start:\n${out}`)), 15_000);
    const take = (d: Buffer) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line) {
        clearTimeout(t);
        resolve(Number(/:(\d+)$/.exec(JSON.parse(line).listen)![1]));
      }
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    child.on('exit', (code) => reject(new Error(`relay exited with ${code}:\n${out}`)));
  });
  return { child, port, output: () => out };
}

const stop = (c: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (c.exitCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  });

/**
 * A VM guest on the relay's address (127.0.0.5 here: a loopback address other than the daemon's)
 * asks daemon A, through the relay, to send host files to B. Every part is a real process: the
 * two daemons on one local network, the relay, and B's own TCP client that reads what B receives.
 */
describe('a guest that names host files through the relay', () => {
  const tmp = tmpDir('vigil-relay-files-');
  const procs: ChildProcess[] = [];
  let a: Awaited<ReturnType<typeof spawnDaemon>>;
  let b: Awaited<ReturnType<typeof spawnDaemon>>;

  beforeAll(async () => {
    // Held messages off: each of B's TCP clients here sees only what is sent while it listens.
    const common = ['--localnet', join(tmp.dir, 'localnet.sqlite'), '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0'];
    common.push('--hold', 'off');
    a = await spawnDaemon(['--account', A, '--data-dir', join(tmp.dir, 'a'), ...common]);
    procs.push(a.child);
    b = await spawnDaemon(['--account', B, '--data-dir', join(tmp.dir, 'b'), ...common]);
    procs.push(b.child);
  }, 30_000);
  afterAll(async () => {
    await Promise.all(procs.map(stop));
    tmp.cleanup();
  });

  it('is refused with -32602 naming the parameter, however it is written; nothing reaches the recipient; a data: URI goes through', async () => {
    const relay = spawnRelay('127.0.0.5', a.tcp!);
    procs.push(relay.child);
    const port = await relay.port;
    const inbox = await TcpClient.connect(b.tcp!); // B's receive notifications
    const guest = await TcpClient.connect({ host: '127.0.0.5', port });

    const plain = await guest.call('send', { recipient: [B], message: 'leak', attachments: [PASSWD] }, 'plain');
    expect(plain.error).toEqual({
      code: -32602,
      message: 'attachments: file paths are not accepted through the relay; send the file as a data: URI',
      data: null,
    });
    // JSON escapes, a batch, and one request split across two writes.
    guest.write(
      `{"jsonrpc":"2.0","method":"send","params":{"recipient":["${B}"],"\\u0061ttachment":"\\/etc\\/passwd"},"id":"esc"}\r\n`,
    );
    expect(await guest.next()).toMatchObject({ id: 'esc', error: { code: -32602 } });
    guest.write(
      `[{"jsonrpc":"2.0","method":"version","id":"v"},{"jsonrpc":"2.0","method":"send","params":{"recipient":["${B}"],"attachments":["data:text/plain,ok","${PASSWD}"]},"id":"batch"}]\n`,
    );
    expect(await guest.next()).toEqual([
      expect.objectContaining({ id: 'v', error: expect.objectContaining({ code: -32600 }) }),
      expect.objectContaining({ id: 'batch', error: expect.objectContaining({ code: -32602 }) }),
    ]);
    const split = `{"jsonrpc":"2.0","method":"send","params":{"recipient":["${B}"],"attachments":["${PASSWD}"]},"id":"split"}\n`;
    const cut = split.indexOf('attach') + 3;
    guest.write(split.slice(0, cut));
    await new Promise((r) => setTimeout(r, 50));
    guest.write(split.slice(cut));
    expect(await guest.next()).toMatchObject({ id: 'split', error: { code: -32602 } });

    // A data: URI goes through, and it is the first (and only) thing B receives.
    const ok = await guest.call(
      'send',
      { recipient: [B], message: 'marker', attachments: ['data:text/plain;filename=hi.txt;base64,aGk='] },
      'ok',
    );
    expect(ok.result.results[0].type).toBe('SUCCESS');
    const got = await inbox.next();
    expect(got).toMatchObject({
      method: 'receive',
      params: { envelope: { sourceNumber: A, dataMessage: { message: 'marker', attachments: [{ size: 2 }] } } },
    });
    expect(await inbox.next(500).catch(() => 'nothing')).toBe('nothing');
    expect(relay.output()).toContain('"msg":"file path refused"');
    guest.close();
    inbox.close();
    await stop(relay.child);
  }, 30_000);

  it('goes through when the operator allows file parameters (TCP_RELAY_ALLOW_FILE_PARAMS=1)', async () => {
    const file = join(tmp.dir, 'shared.txt');
    writeFileSync(file, 'a file the operator means to share\n');
    const relay = spawnRelay('127.0.0.5', a.tcp!, { TCP_RELAY_ALLOW_FILE_PARAMS: '1' });
    procs.push(relay.child);
    const inbox = await TcpClient.connect(b.tcp!);
    const guest = await TcpClient.connect({ host: '127.0.0.5', port: await relay.port });
    const sent = await guest.call('send', { recipient: [B], message: 'with a file', attachments: [file] }, 1);
    expect(sent.result.results[0].type).toBe('SUCCESS');
    const got = await inbox.next();
    expect(got.params.envelope.dataMessage).toMatchObject({
      message: 'with a file',
      attachments: [{ filename: 'shared.txt', size: readFileSync(file).length }],
    });
    // Methods are still filtered.
    expect((await guest.call('startLink', undefined, 2)).error.code).toBe(-32601);
    guest.close();
    inbox.close();
    await stop(relay.child);
  }, 30_000);

  it('cannot upload a sticker pack, set an avatar or post a story from a host path; nothing is stored; a data: URI avatar goes through', async () => {
    const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
    const pack = join(tmp.dir, 'pack');
    mkdirSync(pack);
    writeFileSync(join(pack, 'a.png'), PNG);
    writeFileSync(
      join(pack, 'manifest.json'),
      JSON.stringify({ title: 't', author: 'a', stickers: [{ file: 'a.png' }] }),
    );
    const relay = spawnRelay('127.0.0.5', a.tcp!);
    procs.push(relay.child);
    const guest = await TcpClient.connect({ host: '127.0.0.5', port: await relay.port });
    const groupId = (await rpc(a.http!, 'updateGroup', { name: 'g', members: [B] })).result.groupId;
    const refusals: [string, Record<string, unknown>, string][] = [
      ['uploadStickerPack', { path: pack }, 'path'],
      ['uploadStickerPack', { path: join(pack, 'manifest.json') }, 'path'],
      ['updateProfile', { avatar: join(pack, 'a.png') }, 'avatar'],
      ['updateGroup', { 'group-id': groupId, avatar: join(pack, 'a.png') }, 'avatar'],
      ['sendStory', { attachment: join(pack, 'a.png') }, 'attachment'],
    ];
    for (const [method, params, key] of refusals) {
      const r = await guest.call(method, params, method);
      expect(r.error).toEqual({
        code: -32602,
        message: `${key}: file paths are not accepted through the relay; send the file as a data: URI`,
        data: null,
      });
    }
    // The account's PIN, devices and number are not the guest's to change.
    for (const method of ['setPin', 'removePin', 'removeDevice', 'startChangeNumber', 'finishChangeNumber']) {
      expect((await guest.call(method, { pin: '1234', deviceId: 2 }, method)).error.code).toBe(-32601);
    }
    expect((await rpc(a.http!, 'listStickerPacks')).result).toEqual([]);
    expect((await rpc(a.http!, 'getAvatar', { profile: A })).error.message).toBe('Could not find avatar');
    expect((await rpc(a.http!, 'getAvatar', { groupId })).error.message).toBe('Could not find avatar');
    const ok = await guest.call('updateProfile', { avatar: `data:image/png;base64,${PNG.toString('base64')}` }, 'ok');
    expect(ok.result).toEqual({});
    expect(Buffer.from((await rpc(a.http!, 'getAvatar', { profile: A })).result.data, 'base64')).toEqual(PNG);
    guest.close();
    await stop(relay.child);
  }, 30_000);
});
