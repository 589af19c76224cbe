/**
 * The one parameter resolver: signal-cli's spellings (camelCase or dashed, singular or plural),
 * types, conflicts and refusals; applied before every method of the embedded network, checked here
 * against two real daemons on one network; the signal-cli backend forwards params verbatim.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { LOCAL_METHODS } from '../src/localnet/backend.js';
import { METHOD_PARAMS } from '../src/methods-params.js';
import { dashed, MAX_DEPTH, resolveParams, spellings } from '../src/params.js';
import { rpc, SseClient, startDaemon, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const C = '+15550000003';

const failsWith = (f: () => unknown, code: number, text: RegExp) => {
  try {
    f();
  } catch (err) {
    expect((err as { rpcCode: number }).rpcCode).toBe(code);
    expect((err as Error).message).toMatch(text);
    return;
  }
  throw new Error('expected a failure');
};

describe('resolveParams', () => {
  it('refuses a value nested deeper than MAX_DEPTH with -32602 naming it, without overflowing the stack', () => {
    let deep: unknown = '+15550000002';
    for (let i = 0; i < 50_000; i++) deep = [deep];
    failsWith(() => resolveParams('send', { recipients: deep, message: 'x' }), -32602, /recipients is nested deeper/);
    let shallow: unknown = 'x';
    for (let i = 0; i < MAX_DEPTH; i++) shallow = [shallow];
    failsWith(() => resolveParams('send', { recipient: shallow }), -32602, /^Invalid params: recipient must be/);
  });

  it('finds a parameter under its camelCase or dashed name, a list under its singular or plural name', () => {
    for (const key of ['groupId', 'group-id', 'groupIds', 'group-ids']) {
      expect(resolveParams('block', { [key]: 'g1' })).toEqual({ groupId: ['g1'] });
      expect(resolveParams('block', { [key]: ['g1', 'g2'] })).toEqual({ groupId: ['g1', 'g2'] });
    }
    expect(resolveParams('send', { recipients: [B], 'note-to-self': true, message: 'm' })).toEqual({
      recipient: [B],
      noteToSelf: true,
      message: 'm',
    });
    expect(resolveParams('sendReceipt', { recipient: B, 'target-timestamps': [5, 6] })).toEqual({
      recipient: [B],
      targetTimestamp: [5, 6],
    });
    // A scalar is one value, under either spelling, never a list.
    expect(resolveParams('updateGroup', { 'group-id': 'g', 'remove-members': [B], admins: C })).toEqual({
      groupId: 'g',
      removeMember: [B],
      admin: [C],
    });
    failsWith(() => resolveParams('updateGroup', { groupId: ['g'] }), -32602, /groupId must be a non-empty string/);
  });

  it('ignores keys the method does not document, as signal-cli does (account on a one-account daemon)', () => {
    expect(resolveParams('listGroups', { account: A, whatever: 1 })).toEqual({});
    expect(resolveParams('version', { account: A })).toEqual({});
  });

  it('refuses wrong types naming the parameter as the client spelled it', () => {
    failsWith(
      () => resolveParams('send', { 'note-to-self': 'yes' }),
      -32602,
      /^Invalid params: note-to-self must be true or false/,
    );
    failsWith(
      () => resolveParams('sendReceipt', { targetTimestamps: [1, -2] }),
      -32602,
      /^Invalid params: targetTimestamps must/,
    );
    failsWith(
      () => resolveParams('send', { recipients: [B, 7] }),
      -32602,
      /^Invalid params: recipients must be .* got 7/,
    );
    failsWith(
      () => resolveParams('send', { message: { x: 1 } }),
      -32602,
      /^Invalid params: message must be a non-empty string/,
    );
    failsWith(() => resolveParams('send', [B]), -32602, /params must be an object/);
  });

  it('refuses one parameter given under two spellings with different values, accepts the same value twice', () => {
    failsWith(
      () => resolveParams('send', { recipient: [B], recipients: [C] }),
      -32602,
      /recipient and recipients are the same parameter/,
    );
    failsWith(() => resolveParams('send', { groupId: 'x', 'group-id': 'y' }), -32602, /group-id and groupId/);
    expect(resolveParams('send', { recipient: B, recipients: B })).toEqual({ recipient: [B] });
  });

  it('refuses a documented parameter the embedded network does not honour, when it is given a value', () => {
    failsWith(
      () => resolveParams('send', { 'story-timestamp': 5 }),
      -32602,
      /^Invalid params: story-timestamp is not supported/,
    );
    failsWith(() => resolveParams('updateGroup', { bans: [B] }), -32602, /^Invalid params: bans is not supported/);
    // An unset value asks for nothing: accepted.
    expect(resolveParams('send', { endSession: false, usernames: [] })).toEqual({ endSession: false, username: [] });
  });

  it('serves the methods added to the embedded network: their params honoured, their refusals named', () => {
    expect(
      resolveParams('send', {
        recipient: B,
        message: 'hi',
        'text-styles': '0:2:BOLD',
        'quote-timestamp': 5,
        viewOnce: true,
      }),
    ).toEqual({ recipient: [B], message: 'hi', textStyle: ['0:2:BOLD'], quoteTimestamp: 5, viewOnce: true });
    expect(
      resolveParams('sendReaction', { recipients: B, emoji: 'x', 'target-author': C, targetTimestamp: 7 }),
    ).toEqual({ recipient: [B], emoji: 'x', targetAuthor: C, targetTimestamp: 7 });
    failsWith(() => resolveParams('sendReaction', { story: true }), -32602, /^Invalid params: story is not supported/);
    failsWith(() => resolveParams('send', { quoteAttachment: 'x' }), -32602, /quoteAttachment is not supported/);
    // A profile name: an empty one clears it; `name` is signal-cli's other name for it.
    expect(resolveParams('updateProfile', { name: '', about: 'a' })).toEqual({ givenName: '', about: 'a' });
    failsWith(() => resolveParams('updateProfile', { mobilecoinAddress: 'x' }), -32602, /mobilecoinAddress is not/);
    expect(resolveParams('updateGroup', { 'set-permission-add-member': 'only-admins', 'reset-link': true })).toEqual({
      setPermissionAddMember: 'only-admins',
      resetLink: true,
    });
    failsWith(() => resolveParams('quitGroup', { delete: 'yes' }), -32602, /delete must be true or false/);
  });

  it('gives every spelling of a method to one parameter only (the resolver looks each key up once)', () => {
    for (const [method, specs] of Object.entries(METHOD_PARAMS)) {
      const owner = new Map<string, string>();
      for (const [name, spec] of Object.entries(specs)) {
        for (const key of spellings(name, spec)) {
          expect(`${method}: ${key} → ${owner.get(key) ?? name}`).toBe(`${method}: ${key} → ${name}`);
          owner.set(key, name);
        }
      }
    }
  });

  it('has an entry for every method of the embedded network', () => {
    expect(LOCAL_METHODS).toEqual(expect.arrayContaining(['send', 'sendReaction', 'getAttachment', 'updateProfile']));
    expect(LOCAL_METHODS.filter((m) => !(m in METHOD_PARAMS))).toEqual([]);
    expect(dashed('setPermissionAddMember')).toBe('set-permission-add-member');
  });
});

describe('signal-cli spellings against two daemons on one embedded network', () => {
  const tmp = tmpDir();
  let a: Awaited<ReturnType<typeof startDaemon>>;
  let b: Awaited<ReturnType<typeof startDaemon>>;
  let c: Awaited<ReturnType<typeof startDaemon>>;
  let sseB: SseClient;

  beforeAll(async () => {
    a = await startDaemon(tmp.dir, A);
    b = await startDaemon(tmp.dir, B);
    c = await startDaemon(tmp.dir, C);
    sseB = await SseClient.open(b.http!);
  });
  afterAll(async () => {
    sseB.close();
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  const received = async (n: number) => JSON.parse((await sseB.waitFor(n))[n - 1]!.data).envelope;

  it('send: recipients (plural) and note-to-self (dashed) reach their recipients', async () => {
    const r = await rpc(a.http!, 'send', { recipients: [B], 'note-to-self': true, message: 'plural', account: A });
    expect(r.result.results.map((x: { recipientAddress: { number: string } }) => x.recipientAddress.number)).toEqual([
      B,
      A,
    ]);
    expect((await received(1)).dataMessage.message).toBe('plural');
  });

  it('updateGroup: member (signal-cli’s own name) adds the member; group-id renames instead of creating', async () => {
    const created = await rpc(a.http!, 'updateGroup', { name: 'first', member: [B] });
    const id = created.result.groupId;
    const renamed = await rpc(a.http!, 'updateGroup', { 'group-id': id, name: 'second', members: C });
    expect(renamed.result.groupId).toBe(id);
    const groups = (await rpc(b.http!, 'listGroups', { 'group-ids': [id] })).result;
    expect(groups).toHaveLength(1);
    expect(groups[0].name).toBe('second');
    expect(groups[0].members.map((m: { number: string }) => m.number).sort()).toEqual([A, B, C]);
    // send with groupIds (plural) reaches the group.
    await rpc(a.http!, 'send', { groupIds: [id], message: 'to the group' });
    const env = await received(4); // the two group updates, then the message
    expect(env.dataMessage).toMatchObject({ message: 'to the group', groupInfo: { groupId: id } });
    // listGroups with another id: none.
    expect((await rpc(b.http!, 'listGroups', { groupId: 'bm9uZQ==' })).result).toEqual([]);
  });

  it('sendReceipt: target-timestamp (dashed) is the timestamp the sender sees in the receipt', async () => {
    const sse = await SseClient.open(a.http!);
    await rpc(b.http!, 'sendReceipt', { recipient: A, 'target-timestamp': 1234, type: 'read' });
    const env = JSON.parse((await sse.waitFor(1))[0]!.data).envelope;
    expect(env.receiptMessage).toMatchObject({ isRead: true, timestamps: [1234] });
    sse.close();
  });

  it('refuses with -32602 naming the parameter: wrong type, two spellings, what is not honoured; nothing is sent', async () => {
    const before = sseB.events.length;
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'x', 'view-once': 'yes' })).error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^Invalid params: view-once must be true or false/),
    });
    expect((await rpc(a.http!, 'send', { recipient: B, recipients: C, message: 'x' })).error.code).toBe(-32602);
    const image = 'data:image/png;base64,AA==';
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'x', 'preview-image': image })).error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^Invalid params: preview-image is not supported/),
    });
    await rpc(a.http!, 'send', { recipient: B, message: 'marker' });
    expect(JSON.parse((await sseB.waitFor(before + 1))[before]!.data).envelope.dataMessage.message).toBe('marker');
  });
});
