/**
 * Contract of the message methods on the local network (send, sendReceipt, sendTyping,
 * sendReaction, remoteDelete, getAttachment, sendMessageRequestResponse): two real daemons on
 * one network file; each documented parameter is sent in both spellings and what the other side
 * receives is asserted, envelope by envelope, as signal-cli emits it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import type { DaemonHandle } from '../src/index.js';
import { SPELLINGS, spell } from './contract.js';
import { rpc, SseClient, startDaemon, tmpDir } from './helpers.js';

const A = '+15550001001';
const B = '+15550001002';
const C = '+15550001003';
type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

describe('message methods between two daemons, in both spellings', () => {
  const tmp = tmpDir();
  let a: Daemon;
  let b: Daemon;
  let c: Daemon;
  let sseA: SseClient;
  let sseB: SseClient;
  let groupId: string;

  /** The next envelope B (or A) receives. */
  const next = async (sse: SseClient) => {
    const seen = sse.events.length;
    await sse.waitFor(seen + 1);
    return JSON.parse(sse.events[seen]!.data).envelope;
  };
  const call = async (d: Daemon, method: string, params: Record<string, unknown>, how: 'camel' | 'dashed') =>
    rpc(d.http!, method, spell(method, params, how));

  beforeAll(async () => {
    a = await startDaemon(tmp.dir, A, { profileName: 'Alice', maxRequestBytes: 64 * 1024 });
    b = await startDaemon(tmp.dir, B, { profileName: 'Bob' });
    c = await startDaemon(tmp.dir, C);
    sseA = await SseClient.open(a.http!);
    sseB = await SseClient.open(b.http!);
    groupId = (await rpc(a.http!, 'updateGroup', { name: 'g', members: [B, C] })).result.groupId;
    await next(sseB);
  });

  afterAll(async () => {
    sseA.close();
    sseB.close();
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  it.each(SPELLINGS)('send honours styles, mentions, quote, preview and view-once (%s)', async (how) => {
    const message = 'Hi Bob, see https://example.org';
    const sent = await call(
      a,
      'send',
      {
        recipient: B,
        message,
        textStyle: ['0:2:BOLD', '3:3:ITALIC'],
        mention: '3:3:+15550001002',
        quoteTimestamp: 1_700_000_000_000,
        quoteAuthor: B,
        quoteMessage: 'earlier text',
        quoteMention: '0:7:+15550001001',
        quoteTextStyle: '0:7:MONOSPACE',
        previewUrl: 'https://example.org',
        previewTitle: 'Example',
        previewDescription: 'a page',
        viewOnce: true,
      },
      how,
    );
    expect(sent.result.results).toEqual([expect.objectContaining({ type: 'SUCCESS' })]);
    const env = await next(sseB);
    expect(env.sourceName).toBe('Alice');
    expect(env).not.toHaveProperty('syncMessage');
    expect(env.dataMessage).toEqual({
      timestamp: sent.result.timestamp,
      message,
      expiresInSeconds: 0,
      viewOnce: true,
      quote: {
        id: 1_700_000_000_000,
        author: B,
        authorNumber: B,
        authorUuid: expect.any(String),
        text: 'earlier text',
        mentions: [{ name: 'Alice', number: A, uuid: expect.any(String), start: 0, length: 7 }],
        attachments: [],
        textStyles: [{ style: 'MONOSPACE', start: 0, length: 7 }],
      },
      mentions: [{ name: 'Bob', number: B, uuid: expect.any(String), start: 3, length: 3 }],
      previews: [{ url: 'https://example.org', title: 'Example', description: 'a page' }],
      textStyles: [
        { style: 'BOLD', start: 0, length: 2 },
        { style: 'ITALIC', start: 3, length: 3 },
      ],
    });
  });

  it.each(SPELLINGS)('send with editTimestamp is an edit of an earlier message (%s)', async (how) => {
    const first = await rpc(a.http!, 'send', { recipient: B, message: 'tpyo' });
    await next(sseB);
    const edit = await call(a, 'send', { recipient: B, message: 'typo', editTimestamp: first.result.timestamp }, how);
    const env = await next(sseB);
    expect(env).not.toHaveProperty('dataMessage');
    expect(env.editMessage).toEqual({
      targetSentTimestamp: first.result.timestamp,
      dataMessage: { timestamp: edit.result.timestamp, message: 'typo', expiresInSeconds: 0, viewOnce: false },
    });
    // Only a message this account sent can be edited.
    const bad = await call(a, 'send', { recipient: B, message: 'x', editTimestamp: 12345 }, how);
    expect(bad.error).toMatchObject({ code: -1, message: expect.stringContaining('not found') });
  });

  it.each(SPELLINGS)('note to self arrives as syncMessage.sentMessage (%s)', async (how) => {
    const sent = await call(a, 'send', { noteToSelf: true, message: 'memo', textStyle: '0:4:BOLD' }, how);
    const env = await next(sseA);
    expect(env).not.toHaveProperty('dataMessage');
    expect(env.syncMessage).toEqual({
      sentMessage: {
        destination: A,
        destinationNumber: A,
        destinationUuid: expect.any(String),
        timestamp: sent.result.timestamp,
        message: 'memo',
        expiresInSeconds: 0,
        viewOnce: false,
        textStyles: [{ style: 'BOLD', start: 0, length: 4 }],
      },
    });
  });

  it.each(SPELLINGS)(
    'an attachment by path gets its type from its content; getAttachment returns it (%s)',
    async (how) => {
      const file = join(tmp.dir, `picture-${how}.dat`);
      writeFileSync(file, PNG);
      await call(a, 'send', { recipient: B, attachment: file, message: 'pic' }, how);
      const env = await next(sseB);
      const [att] = env.dataMessage.attachments;
      expect(att).toMatchObject({ contentType: 'image/png', filename: `picture-${how}.dat`, size: PNG.length });
      expect(Object.keys(att)).toEqual(expect.arrayContaining(['id', 'contentType', 'filename', 'size']));
      for (const params of [{ id: att.id }, { id: att.id, recipient: A }]) {
        const got = await call(b, 'getAttachment', params, how);
        expect(Buffer.from(got.result.data, 'base64')).toEqual(PNG);
      }
      // Found only as what B received from A, not from someone else or in another group.
      expect((await call(b, 'getAttachment', { id: att.id, recipient: C }, how)).error.code).toBe(-1);
      expect((await call(b, 'getAttachment', { id: att.id, groupId }, how)).error.code).toBe(-1);
      expect((await call(b, 'getAttachment', { id: 'ffffffffffffffffffffffff' }, how)).error).toMatchObject({
        code: -1,
        message: 'Attachment not found: ffffffffffffffffffffffff',
      });
      expect((await call(b, 'getAttachment', { id: '../../etc/passwd' }, how)).error.code).toBe(-32602);
      // The sender cannot fetch it as if received.
      expect((await call(a, 'getAttachment', { id: att.id }, how)).error.code).toBe(-1);
    },
  );

  it.each(SPELLINGS)('getAttachment finds a group attachment with its groupId (%s)', async (how) => {
    const data = Buffer.from('GIF89a-group').toString('base64');
    await call(a, 'send', { groupId, attachment: `data:image/gif;filename=g.gif;base64,${data}` }, how);
    const env = await next(sseB);
    const [att] = env.dataMessage.attachments;
    expect(env.dataMessage.groupInfo).toMatchObject({ groupId, type: 'DELIVER' });
    const got = await call(b, 'getAttachment', { id: att.id, groupId }, how);
    expect(got.result.data).toBe(data);
  });

  it.each(SPELLINGS)('sendTyping: STARTED, STOPPED with stop, and groupId for a group (%s)', async (how) => {
    expect((await call(a, 'sendTyping', { recipient: B }, how)).result).toEqual({});
    expect((await next(sseB)).typingMessage).toEqual({ action: 'STARTED', timestamp: expect.any(Number) });
    await call(a, 'sendTyping', { recipient: B, stop: true }, how);
    const stopped = await next(sseB);
    expect(stopped.typingMessage).toEqual({ action: 'STOPPED', timestamp: stopped.timestamp });
    expect(stopped).not.toHaveProperty('dataMessage');
    await call(a, 'sendTyping', { groupId }, how);
    expect((await next(sseB)).typingMessage).toEqual({ action: 'STARTED', timestamp: expect.any(Number), groupId });
  });

  it.each(SPELLINGS)('sendReaction to a recipient and a group, and its removal (%s)', async (how) => {
    const msg = await rpc(b.http!, 'send', { recipient: A, message: 'react to me' });
    await next(sseA);
    const r = await call(
      a,
      'sendReaction',
      { recipient: B, emoji: '👍', targetAuthor: B, targetTimestamp: msg.result.timestamp },
      how,
    );
    expect(r.result.results[0].type).toBe('SUCCESS');
    const reaction = {
      emoji: '👍',
      targetAuthor: B,
      targetAuthorNumber: B,
      targetAuthorUuid: expect.any(String),
      targetSentTimestamp: msg.result.timestamp,
      isRemove: false,
    };
    expect((await next(sseB)).dataMessage).toEqual({
      timestamp: r.result.timestamp,
      message: null,
      expiresInSeconds: 0,
      viewOnce: false,
      reaction,
    });
    await call(
      a,
      'sendReaction',
      { recipient: B, emoji: '👍', targetAuthor: B, targetTimestamp: msg.result.timestamp, remove: true },
      how,
    );
    expect((await next(sseB)).dataMessage.reaction).toEqual({ ...reaction, isRemove: true });

    const inGroup = await rpc(a.http!, 'send', { groupId, message: 'group msg' });
    await next(sseB);
    await call(
      b,
      'sendReaction',
      { groupId, emoji: '🎉', targetAuthor: A, targetTimestamp: inGroup.result.timestamp },
      how,
    );
    const env = await next(sseA);
    expect(env.dataMessage.groupInfo).toMatchObject({ groupId, type: 'DELIVER' });
    expect(env.dataMessage.reaction).toMatchObject({
      emoji: '🎉',
      targetAuthor: A,
      targetSentTimestamp: inGroup.result.timestamp,
    });
  });

  it.each(SPELLINGS)(
    'a reaction to a message this account never saw is sent with its target fields, as signal-cli (%s)',
    async (how) => {
      const r = await call(a, 'sendReaction', { recipient: B, emoji: '👍', targetAuthor: C, targetTimestamp: 42 }, how);
      expect(r.result.results).toEqual([expect.objectContaining({ type: 'SUCCESS' })]);
      expect((await next(sseB)).dataMessage.reaction).toEqual({
        emoji: '👍',
        targetAuthor: C,
        targetAuthorNumber: C,
        targetAuthorUuid: expect.stringMatching(/^[0-9a-f-]{36}$/),
        targetSentTimestamp: 42,
        isRemove: false,
      });
      const before = sseB.events.length;
      expect(
        (await call(a, 'sendReaction', { recipient: B, targetAuthor: B, targetTimestamp: 42 }, how)).error.code,
      ).toBe(-32602);
      await rpc(a.http!, 'send', { recipient: B, message: 'marker' });
      expect((await next(sseB)).dataMessage.message).toBe('marker');
      expect(sseB.events.length).toBe(before + 1);
    },
  );

  it.each(SPELLINGS)('remoteDelete of an own message; of another one is -1 (%s)', async (how) => {
    const sent = await rpc(a.http!, 'send', { recipient: B, message: 'oops' });
    await next(sseB);
    const del = await call(a, 'remoteDelete', { recipient: B, targetTimestamp: sent.result.timestamp }, how);
    expect((await next(sseB)).dataMessage).toEqual({
      timestamp: del.result.timestamp,
      message: null,
      expiresInSeconds: 0,
      viewOnce: false,
      remoteDelete: { timestamp: sent.result.timestamp },
    });
    expect(
      (await call(b, 'remoteDelete', { recipient: A, targetTimestamp: sent.result.timestamp }, how)).error.code,
    ).toBe(-1);
  });

  it.each(SPELLINGS)('sendReceipt with target-timestamp(s) (%s)', async (how) => {
    const sent = await rpc(a.http!, 'send', { recipient: B, message: 'read me' });
    await next(sseB);
    await call(b, 'sendReceipt', { recipient: A, targetTimestamp: sent.result.timestamp, type: 'viewed' }, how);
    expect((await next(sseA)).receiptMessage).toEqual({
      when: expect.any(Number),
      isDelivery: false,
      isRead: false,
      isViewed: true,
      timestamps: [sent.result.timestamp],
    });
  });

  it.each(SPELLINGS)(
    'sendMessageRequestResponse accept shares the profile; delete removes the contact (%s)',
    async (how) => {
      const contact = async () => (await rpc(b.http!, 'listContacts', { recipient: C })).result[0];
      await rpc(c.http!, 'send', { recipient: B, message: 'hello, stranger' });
      await next(sseB);
      expect((await call(b, 'sendMessageRequestResponse', { recipient: C, type: 'accept' }, how)).result).toEqual({});
      expect(await contact()).toMatchObject({ number: C, profileSharing: true });
      await call(b, 'sendMessageRequestResponse', { recipient: C, type: 'delete' }, how);
      expect(await contact()).toBeUndefined();
      expect((await call(b, 'sendMessageRequestResponse', { recipient: C, type: 'maybe' }, how)).error.code).toBe(
        -32602,
      );
    },
  );

  it('bad input: wrong types, oversize attachments; a failed send stores no attachment', async () => {
    const count = () => {
      const db = new Database(join(tmp.dir, 'localnet.sqlite'), { readonly: true });
      try {
        return (db.prepare('SELECT count(*) FROM attachments').pluck().get() as number) ?? 0;
      } finally {
        db.close();
      }
    };
    const before = count();
    expect((await rpc(a.http!, 'send', { recipient: 5, message: 'x' })).error.code).toBe(-32602);
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'x', 'view-once': 'yes' })).error).toMatchObject({
      code: -32602,
      // Named as the client spelled it.
      message: expect.stringContaining('view-once'),
    });
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'ab', textStyle: '0:9:BOLD' })).error.code).toBe(
      -32602,
    );
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'ab', textStyle: '0:1:LOUD' })).error.code).toBe(
      -32602,
    );
    const big = join(tmp.dir, 'big.bin');
    writeFileSync(big, Buffer.alloc(65 * 1024));
    const small = `data:text/plain;base64,${Buffer.from('hi').toString('base64')}`;
    expect((await rpc(a.http!, 'send', { recipient: B, attachments: [small, big] })).error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('larger than'),
    });
    // A valid attachment in a send that fails (C's group membership) is not stored either.
    const other = (await rpc(c.http!, 'updateGroup', { name: 'c only' })).result.groupId;
    expect((await rpc(a.http!, 'send', { groupId: other, attachment: small })).error.code).toBe(-1);
    expect(count()).toBe(before);
  });
});
