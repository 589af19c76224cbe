import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import type { DaemonHandle } from '../src/index.js';
import { rpc, SseClient, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const C = '+15550000003';
const NOBODY = '+15559999999';

type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

describe('two daemons on one local network', () => {
  const tmp = tmpDir();
  let a: Daemon;
  let b: Daemon;
  let c: Daemon;

  beforeAll(async () => {
    a = await startDaemon(tmp.dir, A, { profileName: 'Alice' });
    b = await startDaemon(tmp.dir, B, { profileName: 'Bob' });
    c = await startDaemon(tmp.dir, C);
  });

  afterAll(async () => {
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  it('delivers a message from A to B on both SSE and TCP, as a signal-cli envelope', async () => {
    const sse = await SseClient.open(b.http!);
    const tcp = await TcpClient.connect(b.tcp!);
    const reply = await rpc(a.http!, 'send', { recipient: [B], message: 'hello bob' }, 'x1');
    expect(reply).toEqual({
      jsonrpc: '2.0',
      id: 'x1',
      result: {
        timestamp: expect.any(Number),
        results: [{ recipientAddress: { uuid: expect.stringMatching(/^[0-9a-f-]{36}$/), number: B }, type: 'SUCCESS' }],
      },
    });
    const [event] = await sse.waitFor(1);
    expect(event!.event).toBe('receive');
    expect(event!.id).toMatch(/^[0-9a-f]+\.\d+$/);
    const data = JSON.parse(event!.data);
    expect(data).toEqual({
      account: B,
      envelope: expect.objectContaining({
        source: A,
        sourceNumber: A,
        sourceUuid: expect.any(String),
        sourceName: 'Alice',
        sourceDevice: 1,
        timestamp: reply.result.timestamp,
        dataMessage: expect.objectContaining({ timestamp: reply.result.timestamp, message: 'hello bob' }),
      }),
    });
    // The event's JSON is built around the mail's stored JSON: exactly what JSON.stringify writes.
    expect(event!.data).toBe(JSON.stringify(data));
    expect(Object.keys(data)).toEqual(['envelope', 'account']);
    expect(Object.keys(data.envelope).at(-1)).toBe('serverDeliveredTimestamp');
    expect(data.envelope.serverDeliveredTimestamp).toBeGreaterThanOrEqual(data.envelope.serverReceivedTimestamp);
    const note = await tcp.next();
    expect(note).toEqual({ jsonrpc: '2.0', method: 'receive', params: data });
    // The sender's log records the successful send for the health check.
    expect(a.logs).toContainEqual(
      expect.objectContaining({ msg: 'send succeeded', timestamp: reply.result.timestamp }),
    );
    sse.close();
    tcp.close();
  });

  it('reports unregistered recipients per recipient, and fails with -1 when nobody got it', async () => {
    const partial = await rpc(a.http!, 'send', { recipient: [B, NOBODY], message: 'x' });
    expect(partial.result.results.map((r: { type: string }) => r.type)).toEqual(['SUCCESS', 'UNREGISTERED_FAILURE']);
    const none = await rpc(a.http!, 'send', { recipient: NOBODY, message: 'x' });
    expect(none.error).toEqual({
      code: -1,
      message: expect.stringContaining('UNREGISTERED_FAILURE'),
      data: {
        response: {
          timestamp: expect.any(Number),
          results: [{ recipientAddress: { uuid: null, number: NOBODY }, type: 'UNREGISTERED_FAILURE' }],
        },
      },
    });
  });

  it('rejects bad send params with -32602', async () => {
    expect((await rpc(a.http!, 'send', { recipient: ['12345'], message: 'x' })).error.code).toBe(-32602);
    expect((await rpc(a.http!, 'send', { message: 'to nobody' })).error.code).toBe(-32602);
    expect((await rpc(a.http!, 'send', { recipient: [B] })).error.code).toBe(-32602);
    expect((await rpc(a.http!, 'send', [B, 'x'])).error.code).toBe(-32602);
  });

  it('answers getUserStatus per recipient', async () => {
    const r = await rpc(a.http!, 'getUserStatus', { recipient: [B, NOBODY] });
    expect(r.result).toEqual([
      { recipient: B, number: B, uuid: expect.any(String), isRegistered: true, username: null },
      { recipient: NOBODY, number: NOBODY, uuid: null, isRegistered: false, username: null },
    ]);
  });

  it('creates a group, fans a group send out to the members, renames and removes', async () => {
    const sseB = await SseClient.open(b.http!);
    const sseC = await SseClient.open(c.http!);
    const created = await rpc(a.http!, 'updateGroup', { name: 'team', members: [B, C] });
    const groupId = created.result.groupId as string;
    expect(Buffer.from(groupId, 'base64')).toHaveLength(32);
    // Members hear of the new group.
    await sseB.waitFor(1);
    await sseC.waitFor(1);
    expect(JSON.parse(sseB.events[0]!.data).envelope.dataMessage.groupInfo).toMatchObject({ groupId, type: 'UPDATE' });

    const sent = await rpc(a.http!, 'send', { groupId, message: 'to the team' });
    expect(
      sent.result.results.map((r: { recipientAddress: { number: string } }) => r.recipientAddress.number).sort(),
    ).toEqual([B, C]);
    for (const sse of [sseB, sseC]) {
      const [, ev] = await sse.waitFor(2);
      const env = JSON.parse(ev!.data).envelope;
      expect(env.dataMessage).toMatchObject({
        message: 'to the team',
        groupInfo: { groupId, groupName: 'team', type: 'DELIVER' },
      });
    }

    const groups = await rpc(b.http!, 'listGroups');
    expect(groups.result).toEqual([
      expect.objectContaining({
        id: groupId,
        name: 'team',
        isMember: true,
        isBlocked: false,
        members: expect.arrayContaining([
          { number: A, uuid: expect.any(String) },
          { number: B, uuid: expect.any(String) },
          { number: C, uuid: expect.any(String) },
        ]),
        admins: [{ number: A, uuid: expect.any(String) }],
      }),
    ]);

    await rpc(a.http!, 'updateGroup', { groupId, name: 'renamed', removeMembers: [C] });
    expect((await rpc(b.http!, 'listGroups')).result[0]).toMatchObject({ name: 'renamed' });
    expect((await rpc(c.http!, 'listGroups')).result).toEqual([]);
    // C is no longer a member: it can neither send to the group nor change it.
    expect((await rpc(c.http!, 'send', { groupId, message: 'x' })).error.code).toBe(-1);
    expect((await rpc(c.http!, 'updateGroup', { groupId, name: 'x' })).error.code).toBe(-1);
    expect((await rpc(a.http!, 'updateGroup', { groupId: 'AAAA', name: 'x' })).error).toMatchObject({
      code: -1,
      message: 'Invalid group id: AAAA',
    });
    sseB.close();
    sseC.close();
  });

  it('delivers a read receipt back to the original sender', async () => {
    const sseA = await SseClient.open(a.http!);
    const sent = await rpc(a.http!, 'send', { recipient: B, message: 'read me' });
    const r = await rpc(b.http!, 'sendReceipt', {
      recipient: A,
      targetTimestamp: [sent.result.timestamp],
      type: 'read',
    });
    expect(r.result.results[0].type).toBe('SUCCESS');
    const [ev] = await sseA.waitFor(1);
    expect(JSON.parse(ev!.data).envelope).toMatchObject({
      sourceNumber: B,
      receiptMessage: { isDelivery: false, isRead: true, isViewed: false, timestamps: [sent.result.timestamp] },
    });
    sseA.close();
  });

  it('does not deliver messages from a blocked sender, and does again after unblock', async () => {
    const sseB = await SseClient.open(b.http!);
    expect(await rpc(b.http!, 'block', { recipient: [C] })).toMatchObject({ result: {} });
    const contacts = await rpc(b.http!, 'listContacts', { recipient: [C] });
    expect(contacts.result).toEqual([expect.objectContaining({ number: C, isBlocked: true })]);
    // The sender is not told (as on Signal).
    expect((await rpc(c.http!, 'send', { recipient: B, message: 'blocked' })).result.results[0].type).toBe('SUCCESS');
    await rpc(b.http!, 'unblock', { recipient: C });
    await rpc(c.http!, 'send', { recipient: B, message: 'after unblock' });
    await rpc(a.http!, 'send', { recipient: B, message: 'marker' });
    const events = await sseB.waitFor(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(sseB.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual([
      'after unblock',
      'marker',
    ]);
    expect(events).toHaveLength(2);
    sseB.close();
  });

  it('lists contacts with signal-cli fields', async () => {
    const r = await rpc(a.http!, 'listContacts');
    expect(r.result.map((x: { number: string }) => x.number)).toEqual(expect.arrayContaining([B]));
    expect(r.result.find((x: { number: string }) => x.number === B)).toMatchObject({
      number: B,
      uuid: expect.any(String),
      name: 'Bob',
      isBlocked: false,
      profile: expect.objectContaining({ givenName: 'Bob' }),
    });
    const all = await rpc(a.http!, 'listContacts', { allRecipients: true });
    expect(all.result.map((x: { number: string }) => x.number).sort()).toEqual([B, C]);
  });

  it('sends attachments given as data URIs and stores them for the recipient', async () => {
    const sseB = await SseClient.open(b.http!);
    const payload = Buffer.from('attachment bytes \u0000\u00ff');
    await rpc(a.http!, 'send', {
      recipient: B,
      message: 'file',
      attachments: [`data:application/octet-stream;filename=x.bin;base64,${payload.toString('base64')}`],
    });
    const [ev] = await sseB.waitFor(1);
    const att = JSON.parse(ev!.data).envelope.dataMessage.attachments[0];
    expect(att).toMatchObject({ contentType: 'application/octet-stream', filename: 'x.bin', size: payload.length });
    const file = join(b.config.dataDir, 'attachments', att.id);
    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file)).toEqual(payload);
    expect((await rpc(a.http!, 'send', { recipient: B, attachments: ['relative/path'] })).error.code).toBe(-32602);
    sseB.close();
  });

  it('links a device: finishLink returns once a primary accepts with addDevice', async () => {
    const started = await rpc(c.http!, 'startLink');
    const uri = started.result.deviceLinkUri as string;
    expect(uri).toMatch(/^sgnl:\/\/linkdevice\?uuid=[0-9a-f-]{36}&pub_key=[A-Za-z0-9_-]+$/);
    const finishing = rpc(c.http!, 'finishLink', { deviceLinkUri: uri, deviceName: 'laptop' });
    await new Promise((r) => setTimeout(r, 150));
    expect(await rpc(a.http!, 'addDevice', { uri })).toMatchObject({ result: {} });
    expect((await finishing).result).toEqual({ deviceLinkUri: uri, number: A });
    const devices = await rpc(a.http!, 'listDevices');
    expect(devices.result).toContainEqual(expect.objectContaining({ id: 2, name: 'laptop' }));
    expect((await rpc(b.http!, 'addDevice', { uri })).error).toMatchObject({ code: -1 });
  });

  it('answers version, sendSyncRequest, and -32601 for unknown methods', async () => {
    expect((await rpc(a.http!, 'version')).result.version).toMatch(/^\d+\.\d+\.\d+/);
    expect((await rpc(a.http!, 'sendSyncRequest')).result).toEqual({});
    expect((await rpc(a.http!, 'noSuchMethod')).error).toEqual({
      code: -32601,
      message: 'Method not implemented',
      data: null,
    });
  });
});

describe('linking without a primary', () => {
  it('finishLink fails after the bounded wait', async () => {
    const tmp = tmpDir();
    const d = await startDaemon(tmp.dir, A, { linkTimeoutMs: 300 });
    try {
      const uri = (await rpc(d.http!, 'startLink')).result.deviceLinkUri;
      const t0 = Date.now();
      const r = await rpc(d.http!, 'finishLink', { deviceLinkUri: uri });
      expect(r.error).toMatchObject({ code: -1, message: expect.stringContaining('timed out') });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    } finally {
      await d.close();
      tmp.cleanup();
    }
  });
});

describe('mail for a daemon that is not running', () => {
  it('waits in the network and arrives when the daemon starts', async () => {
    const tmp = tmpDir();
    const a = await startDaemon(tmp.dir, A);
    let b = await startDaemon(tmp.dir, B);
    await b.close();
    try {
      const sent = await rpc(a.http!, 'send', { recipient: B, message: 'while you were out' });
      expect(sent.result.results[0].type).toBe('SUCCESS');
      b = await startDaemon(tmp.dir, B);
      // The new stream replays from the start of the inbox.
      const sse = await SseClient.open(b.http!, '0');
      const [ev] = await sse.waitFor(1);
      expect(JSON.parse(ev!.data).envelope.dataMessage.message).toBe('while you were out');
      sse.close();
    } finally {
      await a.close();
      await b.close();
      tmp.cleanup();
    }
  });
});

describe("another process holding the network file's write lock", () => {
  it('a send waits without stopping the daemon, then commits; sends made meanwhile keep their order', async () => {
    const tmp = tmpDir();
    const a = await startDaemon(tmp.dir, A);
    const b = await startDaemon(tmp.dir, B);
    // Another writer of the file (as a daemon in another process would be), holding the lock.
    const other = new Database(join(tmp.dir, 'localnet.sqlite'));
    try {
      const sse = await SseClient.open(b.http!);
      other.exec('BEGIN IMMEDIATE');
      const sends = [1, 2, 3].map((n) => rpc(a.http!, 'send', { recipient: [B], message: `m${n}` }, n));
      // The daemon answers meanwhile: its event loop is not asleep in SQLite's busy handler.
      const t0 = Date.now();
      expect((await rpc(a.http!, 'version')).result.version).toEqual(expect.any(String));
      expect(Date.now() - t0).toBeLessThan(1000);
      let settled = false;
      void Promise.allSettled(sends).then(() => {
        settled = true;
      });
      await new Promise((r) => setTimeout(r, 200));
      expect(settled).toBe(false); // still waiting for the lock
      other.exec('COMMIT');
      const replies = await Promise.all(sends);
      expect(replies.map((r) => r.result.results[0].type)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
      const events = await sse.waitFor(3);
      expect(events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual(['m1', 'm2', 'm3']);
      sse.close();
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await Promise.all([a.close(), b.close()]);
      tmp.cleanup();
    }
  });
});
