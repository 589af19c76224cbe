/**
 * signal-cli 0.14's whole JSON-RPC method surface on the local network: no method of it answers
 * -32601; bad input to each new method is -32602 naming the parameter, over HTTP and TCP, in both
 * spellings, and leaves the network file as it was (not one row more or less).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import type { DaemonHandle } from '../src/index.js';
import { METHOD_PARAMS } from '../src/methods-params.js';
import { type Spelling, spell } from './contract.js';
import { rpc, SseClient, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550014101';
const B = '+15550014102';

/**
 * Every method of signal-cli 0.14.x's JSON-RPC interface: its commands (Commands.java, less the
 * command-line-only daemon, jsonRpc and link), the dispatcher's subscriptions, and 0.14.8's
 * terminateGroup, and `receive` (manual mode's polling).
 */
export const SIGNAL_CLI_014_METHODS = [
  'acceptCall',
  'addDevice',
  'addStickerPack',
  'block',
  'deleteLocalAccountData',
  'finishChangeNumber',
  'finishLink',
  'getAttachment',
  'getAvatar',
  'getSticker',
  'getUserStatus',
  'hangupCall',
  'joinGroup',
  'listAccounts',
  'listCalls',
  'listContacts',
  'listDevices',
  'listGroups',
  'listIdentities',
  'listStickerPacks',
  'quitGroup',
  'receive',
  'register',
  'rejectCall',
  'remoteDelete',
  'removeContact',
  'removeDevice',
  'removePin',
  'send',
  'sendAdminDelete',
  'sendContacts',
  'sendMessageRequestResponse',
  'sendPaymentNotification',
  'sendPinMessage',
  'sendPollCreate',
  'sendPollTerminate',
  'sendPollVote',
  'sendReaction',
  'sendReceipt',
  'sendStory',
  'sendSyncRequest',
  'sendTyping',
  'sendUnpinMessage',
  'setPin',
  'startCall',
  'startChangeNumber',
  'startLink',
  'submitRateLimitChallenge',
  'terminateGroup',
  'trust',
  'unblock',
  'unregister',
  'updateAccount',
  'updateConfiguration',
  'updateContact',
  'updateDevice',
  'updateGroup',
  'updateProfile',
  'uploadStickerPack',
  'verify',
  'version',
  'subscribeReceive',
  'unsubscribeReceive',
  'subscribeCallEvents',
  'unsubscribeCallEvents',
] as const;

/** [method, params (camelCase), the parameter the error must name]. */
const BAD: readonly (readonly [string, Record<string, unknown>, string])[] = [
  ['sendPollCreate', { recipient: B, option: ['x', 'y'] }, 'question'],
  ['sendPollCreate', { recipient: B, question: 'q', option: [1, 2] }, 'option'],
  ['sendPollCreate', { question: 'q', option: ['x', 'y'] }, 'recipient'],
  ['sendPollVote', { recipient: B, pollAuthor: A, pollTimestamp: 1, option: [0] }, 'voteCount'],
  ['sendPollVote', { recipient: B, pollAuthor: A, pollTimestamp: 'x', voteCount: 1 }, 'pollTimestamp'],
  ['sendPollVote', { recipient: B, pollTimestamp: 1, voteCount: 1 }, 'pollAuthor'],
  ['sendPollVote', { recipient: B, pollAuthor: A, pollTimestamp: 1, option: ['a'], voteCount: 1 }, 'option'],
  ['sendPollTerminate', { recipient: B }, 'pollTimestamp'],
  ['sendPinMessage', { recipient: B, targetTimestamp: 1 }, 'targetAuthor'],
  ['sendPinMessage', { recipient: B, targetAuthor: A, targetTimestamp: 1, pinDuration: '1h' }, 'pinDuration'],
  ['sendPinMessage', { recipient: B, targetAuthor: A, targetTimestamp: 1, story: true }, 'story'],
  ['sendUnpinMessage', { recipient: B, targetAuthor: A }, 'targetTimestamp'],
  ['sendAdminDelete', { targetAuthor: B, targetTimestamp: 1 }, 'groupId'],
  ['sendStory', {}, 'attachment'],
  ['sendStory', { attachment: '/etc/hostname' }, 'attachment'],
  ['sendStory', { attachment: 'data:image/png;base64,AA==', groupId: 5 }, 'groupId'],
  ['sendPaymentNotification', { recipient: B }, 'receipt'],
  ['sendPaymentNotification', { recipient: B, receipt: '%%%' }, 'receipt'],
  ['sendPaymentNotification', { receipt: 'AAAA' }, 'recipient'],
  ['sendReaction', { recipient: B, emoji: '👍', targetAuthor: B }, 'targetTimestamp'],
  ['terminateGroup', {}, 'groupId'],
  ['updateDevice', { deviceId: 2 }, 'deviceName'],
  ['updateDevice', { deviceId: '2', deviceName: 'x' }, 'deviceId'],
  ['removeDevice', {}, 'deviceId'],
  ['addStickerPack', {}, 'uri'],
  ['addStickerPack', { uri: 'https://example.org/' }, 'uri'],
  ['uploadStickerPack', {}, 'path'],
  ['uploadStickerPack', { path: 'pack/manifest.json' }, 'path'],
  ['getSticker', { packId: 'zz', stickerId: 0 }, 'packId'],
  ['getSticker', { packId: 'ab' }, 'stickerId'],
  ['getAvatar', {}, 'profile'],
  ['getAvatar', { profile: A, groupId: 'x' }, 'groupId'],
  ['setPin', {}, 'pin'],
  ['submitRateLimitChallenge', { challenge: 'c' }, 'captcha'],
  ['startCall', {}, 'recipient'],
  ['acceptCall', {}, 'callId'],
  ['hangupCall', { callId: 'x' }, 'callId'],
  ['updateAccount', { username: 'alice.01' }, 'username'],
  ['updateConfiguration', { readReceipts: 'yes' }, 'readReceipts'],
  ['removeContact', {}, 'recipient'],
  ['receive', { maxMessages: 1.5 }, 'maxMessages'],
  ['receive', { timeout: 'soon' }, 'timeout'],
  ['receive', { sendReadReceipts: true }, 'sendReadReceipts'],
  ['updateGroup', { name: 'g', avatar: '/etc/hostname' }, 'attachment'],
  ['send', { recipient: B, sticker: 'cats:1' }, 'sticker'],
];

const norm = (s: string) => s.replace(/-/g, '').toLowerCase();

describe('signal-cli 0.14 method surface on the embedded network', () => {
  const tmp = tmpDir();
  const files = join(tmp.dir, 'files');
  let a: DaemonHandle;
  let b: DaemonHandle;
  let tcp: TcpClient;
  let db: Database.Database;
  let nextId = 1;

  /** Every table's rows, in full: what a failed call must leave as it was. */
  const snapshot = () => {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
      name: string;
    }[];
    // A consumer's last-seen time is the inbox's bookkeeping of who reads, not something a call wrote.
    const rows = (name: string) =>
      (db.prepare(`SELECT * FROM "${name}"`).all() as Record<string, unknown>[]).map((r) =>
        name === 'inbox_consumer' ? { ...r, seen_at: 0 } : r,
      );
    return Object.fromEntries(tables.map(({ name }) => [name, rows(name)]));
  };
  const call = async (method: string, params: Record<string, unknown>, transport: 'http' | 'tcp') => {
    if (transport === 'http') return rpc(a.http!, method, params);
    const id = nextId++;
    tcp.write(`${JSON.stringify({ jsonrpc: '2.0', method, params, id })}\n`);
    for (;;) {
      const line = await tcp.next(20_000);
      if (line.id === id) return line;
    }
  };

  beforeAll(async () => {
    mkdirSync(files);
    a = await startDaemon(tmp.dir, A, { attachmentDirs: [files] });
    b = await startDaemon(tmp.dir, B);
    tcp = await TcpClient.connect(a.tcp!);
    db = new Database(join(tmp.dir, 'localnet.sqlite'), { readonly: true });
  });

  afterAll(async () => {
    tcp.close();
    db.close();
    await Promise.all([a.close(), b.close()]);
    tmp.cleanup();
  });

  it('answers every method of signal-cli 0.14 (none is -32601), each with its params documented', async () => {
    const missing: string[] = [];
    for (const method of SIGNAL_CLI_014_METHODS) {
      // finishLink would wait for a primary: given a URI no one will accept, it is refused at once.
      const params = method === 'finishLink' ? { deviceLinkUri: 'x' } : method === 'receive' ? { timeout: 0 } : {};
      // The receive subscriptions belong to a connection: TCP's (HTTP has the event stream).
      const reply = await call(method, params, method.endsWith('subscribeReceive') ? 'tcp' : 'http');
      if (reply.error?.code === -32601) missing.push(method);
      if (!(method in METHOD_PARAMS)) missing.push(`${method} (params)`);
    }
    expect(missing).toEqual([]);
  });

  it.each([
    ['http', 'camel'],
    ['tcp', 'dashed'],
    ['http', 'dashed'],
    ['tcp', 'camel'],
  ] as const)(
    'refuses bad input to each new method with -32602 naming the parameter, writing nothing (%s, %s)',
    async (transport, how) => {
      const sse = await SseClient.open(b.http!);
      try {
        const before = snapshot();
        const wrong: string[] = [];
        for (const [method, params, name] of BAD) {
          const reply = await call(method, spell(method, params, how as Spelling), transport);
          const ok = reply.error?.code === -32602 && norm(reply.error.message).includes(norm(name));
          if (!ok) wrong.push(`${method} ${JSON.stringify(params)}: ${JSON.stringify(reply.error ?? reply.result)}`);
        }
        expect(wrong).toEqual([]);
        expect(snapshot()).toEqual(before);
        // Nothing reached the other account either.
        await rpc(a.http!, 'send', { recipient: B, message: 'marker' });
        await sse.waitFor(1);
        expect(JSON.parse(sse.events[0]!.data).envelope.dataMessage.message).toBe('marker');
        expect(sse.events).toHaveLength(1);
      } finally {
        sse.close();
        // The stream's consumer is written to the file when the daemon sees it go: not during a later snapshot.
        while (b.inbox.consumerStates().some((c) => c.connections > 0)) await new Promise((r) => setTimeout(r, 20));
      }
    },
  );

  it('refuses a sticker pack whose manifest or files lie outside --attachment-dir, storing nothing', async () => {
    const outside = join(tmp.dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'manifest.json'), JSON.stringify({ stickers: [{ file: 'a.png', emoji: '' }] }));
    writeFileSync(join(outside, 'a.png'), 'x');
    const inside = join(files, 'escape');
    mkdirSync(inside);
    writeFileSync(join(inside, 'manifest.json'), JSON.stringify({ stickers: [{ file: '../../outside/a.png' }] }));
    const before = snapshot();
    const out = await rpc(a.http!, 'uploadStickerPack', { path: outside });
    expect(out.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^Invalid params: path: sticker pack file .*outside the allowed/),
    });
    const escaping = await rpc(a.http!, 'uploadStickerPack', { path: inside });
    expect(escaping.error).toMatchObject({ code: -1, message: expect.stringContaining('inside the pack') });
    const zip = await rpc(a.http!, 'uploadStickerPack', { path: join(files, 'pack.zip') });
    expect(zip.error).toMatchObject({ code: -1, message: expect.stringContaining('zip') });
    expect(snapshot()).toEqual(before);
  });
});
