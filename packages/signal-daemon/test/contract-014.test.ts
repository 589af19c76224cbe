/**
 * Contract of signal-cli 0.14's methods on the local network: three real daemons on one network
 * file; each method is called over HTTP and over TCP, with camelCase and with dashed names, and
 * what the other account receives is asserted as signal-cli emits it (pollCreate, pollVote,
 * pollTerminate, pinMessage, unpinMessage, adminDelete, storyMessage, payment).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DaemonHandle } from '../src/index.js';
import { type Spelling, spell } from './contract.js';
import { rpc, SseClient, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550014001';
const B = '+15550014002';
const C = '+15550014003';
type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

export const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
const PNG_URI = `data:image/png;base64,${PNG.toString('base64')}`;
const UUID = expect.stringMatching(/^[0-9a-f-]{36}$/);

type Mode = readonly [transport: 'http' | 'tcp', spelling: Spelling];
/** Every method is called over both transports, in both spellings. */
const MODES: readonly Mode[] = [
  ['http', 'camel'],
  ['http', 'dashed'],
  ['tcp', 'camel'],
  ['tcp', 'dashed'],
];

describe('signal-cli 0.14 methods between daemons, over HTTP and TCP, in both spellings', () => {
  const tmp = tmpDir();
  const files = join(tmp.dir, 'files');
  let a: Daemon;
  let b: Daemon;
  let c: Daemon;
  let sseA: SseClient;
  let sseB: SseClient;
  let sseC: SseClient;
  let tcpA: TcpClient;
  let tcpB: TcpClient;
  let groupId: string;
  let nextId = 1;

  /** Each stream's envelopes are read in order, each once (one may arrive before it is asked for). */
  const read = new Map<SseClient, number>();
  const next = async (sse: SseClient) => {
    const i = read.get(sse) ?? 0;
    read.set(sse, i + 1);
    await sse.waitFor(i + 1);
    return JSON.parse(sse.events[i]!.data).envelope;
  };
  /** A call over the mode's transport; over TCP, receive notifications in between are skipped. */
  const call = async (d: Daemon, method: string, params: Record<string, unknown>, [transport, how]: Mode) => {
    const spelled = spell(method, params, how);
    if (transport === 'http') return rpc(d.http!, method, spelled);
    const tcp = d === a ? tcpA : tcpB;
    const id = nextId++;
    tcp.write(`${JSON.stringify({ jsonrpc: '2.0', method, params: spelled, id })}\n`);
    for (;;) {
      const line = await tcp.next(20_000);
      if (line.id === id) return line;
    }
  };

  beforeAll(async () => {
    mkdirSync(files);
    const opts = { attachmentDirs: [files], maxRequestBytes: 256 * 1024 };
    a = await startDaemon(tmp.dir, A, { profileName: 'Alice', ...opts });
    b = await startDaemon(tmp.dir, B, { profileName: 'Bob', ...opts });
    c = await startDaemon(tmp.dir, C, { profileName: 'Carol', ...opts });
    [sseA, sseB, sseC] = await Promise.all([SseClient.open(a.http!), SseClient.open(b.http!), SseClient.open(c.http!)]);
    [tcpA, tcpB] = await Promise.all([TcpClient.connect(a.tcp!), TcpClient.connect(b.tcp!)]);
    groupId = (await rpc(a.http!, 'updateGroup', { name: 'g', members: [B, C] })).result.groupId;
    await Promise.all([next(sseB), next(sseC)]);
  });

  afterAll(async () => {
    for (const s of [sseA, sseB, sseC]) s.close();
    tcpA.close();
    tcpB.close();
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  it.each(MODES)(
    'polls: create, vote and terminate reach the other account as signal-cli shows them (%s, %s)',
    async (...mode) => {
      const created = await call(
        a,
        'sendPollCreate',
        { recipient: B, question: 'Lunch?', option: ['Pizza', 'Soup'], noMulti: true },
        mode,
      );
      expect(created.result).toEqual({
        timestamp: expect.any(Number),
        results: [expect.objectContaining({ type: 'SUCCESS' })],
      });
      const poll = await next(sseB);
      expect(poll).toMatchObject({ sourceNumber: A, timestamp: created.result.timestamp });
      expect(poll.dataMessage).toEqual({
        timestamp: created.result.timestamp,
        message: null,
        expiresInSeconds: 0,
        viewOnce: false,
        pollCreate: { question: 'Lunch?', allowMultiple: false, options: ['Pizza', 'Soup'] },
      });
      const pollTimestamp = created.result.timestamp;
      await call(b, 'sendPollVote', { recipient: A, pollAuthor: A, pollTimestamp, option: [1], voteCount: 1 }, mode);
      expect((await next(sseA)).dataMessage.pollVote).toEqual({
        author: A,
        authorNumber: A,
        authorUuid: UUID,
        targetSentTimestamp: pollTimestamp,
        optionIndexes: [1],
        voteCount: 1,
      });
      await call(a, 'sendPollTerminate', { groupId, pollTimestamp }, mode);
      const ended = await next(sseB);
      expect(ended.dataMessage.pollTerminate).toEqual({ targetSentTimestamp: pollTimestamp });
      expect(ended.dataMessage.groupInfo).toMatchObject({ groupId, type: 'DELIVER' });
      await next(sseC);
      // To self: this account's own stream gets it as a sent message (a sync message), as signal-cli.
      const note = await call(a, 'sendPollCreate', { noteToSelf: true, question: 'Note?', option: ['a', 'b'] }, mode);
      const sent = (await next(sseA)).syncMessage.sentMessage;
      expect(sent).toMatchObject({ destinationNumber: A, timestamp: note.result.timestamp });
      expect(sent.pollCreate).toEqual({ question: 'Note?', allowMultiple: true, options: ['a', 'b'] });
    },
  );

  it.each(MODES)('pins and unpins carry their target, as signal-cli (%s, %s)', async (...mode) => {
    const sent = await rpc(b.http!, 'send', { groupId, message: 'pin me' });
    await Promise.all([next(sseA), next(sseC)]);
    const target = { targetAuthor: B, targetTimestamp: sent.result.timestamp };
    await call(a, 'sendPinMessage', { groupId, ...target, pinDuration: 3600 }, mode);
    const pinned = {
      targetAuthor: B,
      targetAuthorNumber: B,
      targetAuthorUuid: UUID,
      targetSentTimestamp: sent.result.timestamp,
    };
    expect((await next(sseB)).dataMessage.pinMessage).toEqual({ ...pinned, pinDurationSeconds: 3600 });
    expect((await next(sseC)).dataMessage.pinMessage).toEqual({ ...pinned, pinDurationSeconds: 3600 });
    await call(a, 'sendUnpinMessage', { recipient: B, ...target }, mode);
    expect((await next(sseB)).dataMessage.unpinMessage).toEqual(pinned);
    // Without a duration, a pin is for ever (-1).
    await call(a, 'sendPinMessage', { recipient: B, ...target }, mode);
    expect((await next(sseB)).dataMessage.pinMessage.pinDurationSeconds).toBe(-1);
  });

  it.each(MODES)(
    'an admin deletes a member’s message for the group; a member who is no admin cannot (%s, %s)',
    async (...mode) => {
      const sent = await rpc(b.http!, 'send', { groupId, message: 'regret' });
      await Promise.all([next(sseA), next(sseC)]);
      const target = { targetAuthor: B, targetTimestamp: sent.result.timestamp };
      const refused = await call(b, 'sendAdminDelete', { groupId, ...target }, mode);
      expect(refused.error).toMatchObject({ code: -1, message: expect.stringContaining('Only group admins') });
      const done = await call(a, 'sendAdminDelete', { groupId, ...target }, mode);
      expect(done.result.results).toHaveLength(2);
      const deleted = {
        targetAuthor: B,
        targetAuthorNumber: B,
        targetAuthorUuid: UUID,
        targetSentTimestamp: sent.result.timestamp,
      };
      // C's next envelope is the admin delete: B's refused one sent nothing.
      expect((await next(sseC)).dataMessage.adminDelete).toEqual(deleted);
      expect((await next(sseB)).dataMessage.adminDelete).toEqual(deleted);
    },
  );

  it.each(MODES)(
    'a story reaches the contacts (or the group) as a storyMessage with its attachment (%s, %s)',
    async (...mode) => {
      await rpc(b.http!, 'send', { recipient: A, message: 'hi' }); // A and B are contacts
      await next(sseA);
      const story = await call(a, 'sendStory', { attachment: PNG_URI }, mode);
      expect(story.result.results).toContainEqual(
        expect.objectContaining({ recipientAddress: { uuid: UUID, number: B }, type: 'SUCCESS' }),
      );
      const env = await next(sseB);
      expect(env.dataMessage).toBeUndefined();
      expect(env.storyMessage).toEqual({
        allowsReplies: true,
        fileAttachment: expect.objectContaining({ contentType: 'image/png', id: expect.any(String), size: PNG.length }),
      });
      const got = await rpc(b.http!, 'getAttachment', { id: env.storyMessage.fileAttachment.id, recipient: A });
      expect(Buffer.from(got.result.data, 'base64')).toEqual(PNG);
      await call(a, 'sendStory', { attachment: PNG_URI, groupId, noReplies: true }, mode);
      const groupStory = { allowsReplies: false, groupId, fileAttachment: expect.any(Object) };
      expect((await next(sseB)).storyMessage).toEqual(groupStory);
      // C gets the group's story (and, if it is one of A's contacts, the first one before it).
      let toC = await next(sseC);
      if (!toC.storyMessage.groupId) toC = await next(sseC);
      expect(toC.storyMessage).toEqual(groupStory);
    },
  );

  it.each(MODES)('a payment notification is delivered as the envelope’s payment field (%s, %s)', async (...mode) => {
    const receipt = Buffer.from('receipt blob').toString('base64');
    await call(a, 'sendPaymentNotification', { recipient: B, receipt, note: 'for lunch' }, mode);
    expect((await next(sseB)).dataMessage.payment).toEqual({ note: 'for lunch', receipt });
  });

  it.each(MODES)(
    'sticker packs: upload from a manifest in the attachment dir, add by URL, list, get (%s, %s)',
    async (...mode) => {
      const dir = join(files, `pack-${mode.join('-')}`);
      mkdirSync(dir);
      const second = Buffer.concat([PNG, Buffer.from([1])]);
      writeFileSync(join(dir, 'a.png'), PNG);
      writeFileSync(join(dir, 'b.png'), second);
      const manifest = {
        title: 'Cats',
        author: 'Alice',
        cover: { file: 'b.png', emoji: '🐱' },
        stickers: [
          { file: 'a.png', emoji: '😺' },
          { file: 'b.png', emoji: '🐱' },
        ],
      };
      writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
      const up = await call(a, 'uploadStickerPack', { path: dir }, mode);
      expect(up.result.url).toMatch(
        /^https:\/\/signal\.art\/addstickers\/#pack_id=[0-9a-f]{32}&pack_key=[0-9a-f]{64}$/,
      );
      const packId = /pack_id=([0-9a-f]+)/.exec(up.result.url)![1];
      expect((await call(b, 'addStickerPack', { uri: up.result.url }, mode)).result).toEqual({});
      const packs = (await call(b, 'listStickerPacks', {}, mode)).result;
      expect(packs).toContainEqual({
        packId,
        url: up.result.url,
        installed: true,
        title: 'Cats',
        author: 'Alice',
        cover: { id: 1, emoji: '🐱', contentType: 'image/png' },
        stickers: [
          { id: 0, emoji: '😺', contentType: 'image/png' },
          { id: 1, emoji: '🐱', contentType: 'image/png' },
        ],
      });
      // A sticker of an installed pack is sent as signal-cli's `sticker` field.
      const sent = await call(b, 'send', { recipient: A, sticker: `${packId}:0` }, mode);
      expect(sent.result.results[0].type).toBe('SUCCESS');
      expect((await next(sseA)).dataMessage).toEqual({
        timestamp: sent.result.timestamp,
        message: null,
        expiresInSeconds: 0,
        viewOnce: false,
        sticker: { packId, stickerId: 0 },
      });
      // C has not installed the pack.
      expect((await rpc(c.http!, 'send', { recipient: A, sticker: `${packId}:0` })).error).toMatchObject({ code: -1 });
      const got = await call(b, 'getSticker', { packId, stickerId: 1 }, mode);
      expect(Buffer.from(got.result.data, 'base64')).toEqual(second);
      expect((await call(b, 'getSticker', { packId, stickerId: 7 }, mode)).error.code).toBe(-1);
      expect(
        (
          await call(
            b,
            'addStickerPack',
            { uri: up.result.url.replace(/pack_key=\w+/, `pack_key=${'0'.repeat(64)}`) },
            mode,
          )
        ).error.code,
      ).toBe(-1);
    },
  );

  it.each(MODES)('avatars: a profile’s and a group’s, to members only (%s, %s)', async (...mode) => {
    await rpc(a.http!, 'updateProfile', { avatar: PNG_URI });
    const profile = await call(b, 'getAvatar', { profile: A }, mode);
    expect(Buffer.from(profile.result.data, 'base64')).toEqual(PNG);
    expect((await call(b, 'getAvatar', { contact: A }, mode)).result).toEqual(profile.result);
    const avatar = join(files, 'group.png');
    writeFileSync(avatar, PNG);
    await call(a, 'updateGroup', { groupId, avatar }, mode);
    await Promise.all([next(sseB), next(sseC)]);
    const group = await call(b, 'getAvatar', { groupId }, mode);
    expect(Buffer.from(group.result.data, 'base64')).toEqual(PNG);
    const other = (await rpc(b.http!, 'updateGroup', { name: 'b only' })).result.groupId;
    expect((await call(a, 'getAvatar', { groupId: other }, mode)).error).toMatchObject({ code: -1 });
    expect((await call(a, 'getAvatar', { profile: C }, mode)).error).toMatchObject({
      code: -1,
      message: 'Could not find avatar',
    });
  });

  it.each(MODES)(
    'devices: a linked device is renamed and removed by its id; the primary stays (%s, %s)',
    async (...mode) => {
      const started = await rpc(c.http!, 'startLink');
      const finishing = rpc(c.http!, 'finishLink', {
        deviceLinkUri: started.result.deviceLinkUri,
        deviceName: 'laptop',
      });
      await new Promise((r) => setTimeout(r, 100));
      await rpc(a.http!, 'addDevice', { uri: started.result.deviceLinkUri });
      await finishing;
      const linked = (await rpc(a.http!, 'listDevices')).result.find((d: { name: string }) => d.name === 'laptop');
      expect(linked.id).toBeGreaterThanOrEqual(2);
      await call(a, 'updateDevice', { deviceId: linked.id, deviceName: 'tablet' }, mode);
      await call(a, 'updateDevice', { deviceId: 1, deviceName: 'desk' }, mode);
      const devices = (await call(a, 'listDevices', {}, mode)).result;
      expect(devices).toContainEqual(expect.objectContaining({ id: linked.id, name: 'tablet' }));
      expect(devices[0]).toMatchObject({ id: 1, name: 'desk' });
      expect((await call(a, 'removeDevice', { deviceId: linked.id }, mode)).result).toEqual({});
      const after = (await rpc(a.http!, 'listDevices')).result;
      expect(after.map((d: { id: number }) => d.id)).not.toContain(linked.id);
      expect((await call(a, 'removeDevice', { deviceId: linked.id }, mode)).error.code).toBe(-1);
      expect((await call(a, 'removeDevice', { deviceId: 1 }, mode)).error.code).toBe(-1);
      expect((await call(b, 'updateDevice', { deviceId: linked.id, deviceName: 'x' }, mode)).error.code).toBe(-1);
    },
  );

  it.each(MODES)(
    'terminateGroup: admins only; the members are told, and no one can send to it again (%s, %s)',
    async (...mode) => {
      const id = (await rpc(a.http!, 'updateGroup', { name: 'short-lived', members: [B] })).result.groupId;
      await next(sseB);
      expect((await call(b, 'terminateGroup', { groupId: id }, mode)).error.code).toBe(-1);
      const ended = await call(a, 'terminateGroup', { groupId: id }, mode);
      expect(ended.result).toEqual({ groupId: id, timestamp: expect.any(Number) });
      expect((await next(sseB)).dataMessage.groupInfo).toMatchObject({ groupId: id, type: 'UPDATE' });
      expect((await rpc(b.http!, 'send', { groupId: id, message: 'anyone?' })).error.code).toBe(-1);
      expect((await rpc(a.http!, 'send', { groupId: id, message: 'anyone?' })).error.code).toBe(-1);
    },
  );

  it.each(MODES)(
    'calls: refused with a clear -1; listCalls empty; call events can be subscribed to (%s, %s)',
    async (...mode) => {
      const started = await call(a, 'startCall', { recipient: B }, mode);
      expect(started.error).toMatchObject({ code: -1, message: expect.stringContaining('Calls are not supported') });
      for (const m of ['acceptCall', 'hangupCall', 'rejectCall']) {
        expect((await call(a, m, { callId: 5 }, mode)).error).toMatchObject({ code: -1 });
      }
      expect((await call(a, 'listCalls', {}, mode)).result).toEqual([]);
      const sub = (await call(a, 'subscribeCallEvents', {}, mode)).result;
      expect(Number.isInteger(sub)).toBe(true);
      expect((await call(a, 'unsubscribeCallEvents', { subscription: sub }, mode)).result).toEqual({});
      expect((await call(a, 'unsubscribeCallEvents', { subscription: sub }, mode)).error.code).toBe(-1);
    },
  );

  it.each(MODES)(
    'account: PIN, settings, contacts; registration refused; rate-limit challenge accepted (%s, %s)',
    async (...mode) => {
      expect((await call(a, 'setPin', { pin: '123456' }, mode)).result).toEqual({});
      expect((await call(a, 'removePin', {}, mode)).result).toEqual({});
      expect(
        (await call(a, 'updateConfiguration', { readReceipts: false, typingIndicators: true }, mode)).result,
      ).toEqual({});
      expect((await call(a, 'updateAccount', { discoverableByNumber: false }, mode)).result).toEqual({});
      expect(
        (await call(a, 'submitRateLimitChallenge', { challenge: 'c', captcha: 'signalcaptcha://x' }, mode)).result,
      ).toEqual({});
      expect((await call(a, 'sendContacts', {}, mode)).result).toEqual({});
      const reg = await call(a, 'register', { voice: false }, mode);
      expect(reg.error).toMatchObject({ code: -1, message: expect.stringContaining('--account') });
      await rpc(b.http!, 'send', { recipient: A, message: 'hello' });
      await next(sseA);
      const listed = async () => (await rpc(a.http!, 'listContacts')).result.map((x: { number: string }) => x.number);
      expect(await listed()).toContain(B);
      expect((await call(a, 'removeContact', { recipient: B, forget: true }, mode)).result).toEqual({});
      expect(await listed()).not.toContain(B);
    },
  );

  it('a story to a group that a member blocked does not reach that member', async () => {
    await rpc(c.http!, 'block', { groupId });
    try {
      await rpc(a.http!, 'sendStory', { attachment: PNG_URI, groupId });
      expect((await next(sseB)).storyMessage.groupId).toBe(groupId);
      await rpc(a.http!, 'send', { recipient: C, message: 'marker' });
      expect((await next(sseC)).dataMessage.message).toBe('marker');
    } finally {
      await rpc(c.http!, 'unblock', { groupId });
    }
  });

  it('/api/v1/check says which signal-cli interface is offered; version keeps signal-cli’s shape', async () => {
    expect((await rpc(a.http!, 'version')).result).toEqual({ version: expect.any(String) });
    const res = await fetch(`http://127.0.0.1:${a.http!.port}/api/v1/check`, {
      headers: { accept: 'application/json' },
    });
    expect(await res.json()).toMatchObject({ signalCliInterface: '0.14.6', backend: { kind: 'local' } });
  });
});
