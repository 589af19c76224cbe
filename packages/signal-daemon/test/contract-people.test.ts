/**
 * Contract of the local network's methods about people and groups (updateProfile, updateContact,
 * listContacts, getUserStatus, block, updateGroup, joinGroup, quitGroup, listGroups, trust,
 * listIdentities), and of the declared parameters: two real daemons on one network file, each
 * parameter in both spellings; every documented parameter the local network does not offer is
 * -32602 naming it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DaemonHandle } from '../src/index.js';
import { METHOD_PARAMS } from '../src/methods-params.js';
import { dashed, spellings } from '../src/params.js';
import { SPELLINGS, spell } from './contract.js';
import { rpc, SseClient, startDaemon, tmpDir } from './helpers.js';

const A = '+15550002001';
const B = '+15550002002';
const C = '+15550002003';
type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

describe('people and group methods between daemons, in both spellings', () => {
  const tmp = tmpDir();
  let a: Daemon;
  let b: Daemon;
  let c: Daemon;
  const call = async (d: Daemon, method: string, params: Record<string, unknown>, how: 'camel' | 'dashed') =>
    rpc(d.http!, method, spell(method, params, how));
  const contactOf = async (d: Daemon, number: string) =>
    (await rpc(d.http!, 'listContacts', { recipient: number })).result[0];

  beforeAll(async () => {
    a = await startDaemon(tmp.dir, A, { profileName: 'Alice' });
    b = await startDaemon(tmp.dir, B, { profileName: 'Bob' });
    c = await startDaemon(tmp.dir, C);
    await rpc(a.http!, 'send', { recipient: [B, C], message: 'hi' });
    await rpc(b.http!, 'send', { recipient: A, message: 'hi' });
  });

  afterAll(async () => {
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  it.each(SPELLINGS)('updateProfile: seen in listContacts and as sourceName (%s)', async (how) => {
    const avatar = join(tmp.dir, 'avatar.png');
    writeFileSync(avatar, Buffer.from('89504e470d0a1a0a', 'hex'));
    const given = how === 'camel' ? { name: 'Alicia' } : { givenName: 'Alicia' };
    const r = await call(
      a,
      'updateProfile',
      { ...given, familyName: `Smith-${how}`, about: 'busy', aboutEmoji: '🐝', avatar },
      how,
    );
    expect(r.result).toEqual({});
    expect((await contactOf(b, A)).profile).toEqual({
      lastUpdateTimestamp: expect.any(Number),
      givenName: 'Alicia',
      familyName: `Smith-${how}`,
      about: 'busy',
      aboutEmoji: '🐝',
      hasAvatar: true,
      mobileCoinAddress: null,
    });
    const sse = await SseClient.open(b.http!);
    await rpc(a.http!, 'send', { recipient: B, message: 'from the new name' });
    const [ev] = await sse.waitFor(1);
    expect(JSON.parse(ev!.data).envelope.sourceName).toBe(`Alicia Smith-${how}`);
    sse.close();
    await call(a, 'updateProfile', { removeAvatar: true }, how);
    expect((await contactOf(b, A)).profile).toMatchObject({ hasAvatar: false, givenName: 'Alicia' });
  });

  it.each(SPELLINGS)(
    'updateContact sets this account’s own details; listContacts filters by name (%s)',
    async (how) => {
      const r = await call(
        b,
        'updateContact',
        {
          recipient: C,
          givenName: 'Carol',
          familyName: how,
          nickGivenName: 'Caz',
          nickFamilyName: 'C',
          note: 'met at work',
          expiration: 3600,
        },
        how,
      );
      expect(r.result).toEqual({});
      expect(await contactOf(b, C)).toMatchObject({
        number: C,
        name: `Carol ${how}`,
        givenName: 'Carol',
        familyName: how,
        nickName: 'Caz C',
        nickGivenName: 'Caz',
        nickFamilyName: 'C',
        note: 'met at work',
        messageExpirationTime: 3600,
      });
      const byName = await call(b, 'listContacts', { name: 'caro', allRecipients: true, detailed: true }, how);
      expect(byName.result.map((x: { number: string }) => x.number)).toEqual([C]);
      // The timer applies to what B sends C.
      const sse = await SseClient.open(c.http!);
      await rpc(b.http!, 'send', { recipient: C, message: 'timed' });
      const [ev] = await sse.waitFor(1);
      expect(JSON.parse(ev!.data).envelope.dataMessage.expiresInSeconds).toBe(3600);
      sse.close();
    },
  );

  it.each(SPELLINGS)('getUserStatus, block and unblock with recipients and groupIds (%s)', async (how) => {
    const st = await call(a, 'getUserStatus', { recipient: [B, '+15559990000'] }, how);
    expect(st.result.map((s: { isRegistered: boolean }) => s.isRegistered)).toEqual([true, false]);
    const g = (await rpc(a.http!, 'updateGroup', { name: 'blockable', members: [B] })).result.groupId;
    expect((await call(b, 'block', { recipient: C, groupId: g }, how)).result).toEqual({});
    expect((await contactOf(b, C)).isBlocked).toBe(true);
    expect((await rpc(b.http!, 'listGroups', { groupId: g })).result[0].isBlocked).toBe(true);
    await call(b, 'unblock', { recipient: C, groupId: g }, how);
    expect((await contactOf(b, C)).isBlocked).toBe(false);
  });

  it.each(SPELLINGS)('updateGroup: member adds, groupId renames, link, permissions, timer (%s)', async (how) => {
    const created = await call(a, 'updateGroup', { name: `team ${how}`, member: B, description: 'd' }, how);
    const groupId = created.result.groupId;
    const mine = async (d: Daemon) =>
      (await call(d, 'listGroups', { groupId }, how)).result as Record<string, unknown>[];
    expect((await mine(b))[0]).toMatchObject({ id: groupId, name: `team ${how}`, description: 'd' });
    const changed = await call(
      a,
      'updateGroup',
      {
        groupId,
        name: 'renamed',
        member: C,
        admin: B,
        link: 'enabled',
        setPermissionAddMember: 'only-admins',
        setPermissionEditDetails: 'only-admins',
        setPermissionSendMessages: 'every-member',
        expiration: 60,
      },
      how,
    );
    expect(changed.result).toEqual({ groupId, timestamp: expect.any(Number) });
    const [g] = await mine(a);
    expect(g).toMatchObject({
      id: groupId,
      name: 'renamed',
      messageExpirationTime: 60,
      permissionAddMember: 'ONLY_ADMINS',
      permissionEditDetails: 'ONLY_ADMINS',
      permissionSendMessage: 'EVERY_MEMBER',
      groupInviteLink: expect.stringMatching(/^https:\/\/signal\.group\/#/),
    });
    expect((g!.members as { number: string }[]).map((m) => m.number).sort()).toEqual([A, B, C]);
    expect((g!.admins as { number: string }[]).map((m) => m.number).sort()).toEqual([A, B]);
    // Not a new group: each account still has one group by that id.
    expect((await rpc(a.http!, 'listGroups')).result.filter((x: { id: string }) => x.id === groupId)).toHaveLength(1);
    // C is no admin: it may not rename an only-admins group.
    expect((await call(c, 'updateGroup', { groupId, name: 'mine now' }, how)).error.code).toBe(-1);
    await call(a, 'updateGroup', { groupId, removeMember: C, removeAdmin: B, resetLink: true }, how);
    const [after] = await mine(a);
    expect((after!.members as unknown[]).length).toBe(2);
    expect(after!.groupInviteLink).not.toBe(g!.groupInviteLink);
    expect((await call(a, 'updateGroup', { groupId, link: 'enabled-with-approval' }, how)).error).toMatchObject({
      code: -32602,
    });
  });

  it.each(SPELLINGS)('joinGroup by invite link; quitGroup keeps it as left, with delete drops it (%s)', async (how) => {
    const groupId = (await rpc(a.http!, 'updateGroup', { name: 'open', members: [B], link: 'enabled' })).result.groupId;
    const link = (await rpc(a.http!, 'listGroups', { groupId })).result[0].groupInviteLink as string;
    const sse = await SseClient.open(b.http!);
    const joined = await call(c, 'joinGroup', { uri: link }, how);
    expect(joined.result).toEqual({ groupId, timestamp: expect.any(Number) });
    const [ev] = await sse.waitFor(1);
    expect(JSON.parse(ev!.data).envelope).toMatchObject({
      sourceNumber: C,
      dataMessage: { groupInfo: { groupId, type: 'UPDATE' } },
    });
    sse.close();
    expect((await rpc(c.http!, 'listGroups', { groupId })).result[0]).toMatchObject({ isMember: true });
    expect((await call(c, 'joinGroup', { uri: 'https://signal.group/#nope' }, how)).error.code).toBe(-1);

    const quit = await call(c, 'quitGroup', { groupId }, how);
    expect(quit.result.results.length).toBe(2);
    expect((await rpc(c.http!, 'listGroups', { groupId })).result[0]).toMatchObject({ id: groupId, isMember: false });
    expect((await rpc(c.http!, 'send', { groupId, message: 'x' })).error.code).toBe(-1);
    await call(c, 'quitGroup', { groupId, delete: true }, how);
    expect((await rpc(c.http!, 'listGroups', { groupId })).result).toEqual([]);
    const members = (await rpc(a.http!, 'listGroups', { groupId })).result[0].members as { number: string }[];
    expect(members.map((m) => m.number).sort()).toEqual([A, B]);
  });

  it('listIdentities and trust: a changed identity makes send fail with -4 until trusted', async () => {
    const d = 'camel';
    const ids = await rpc(a.http!, 'listIdentities', { number: B });
    expect(ids.result).toEqual([
      {
        number: B,
        uuid: expect.any(String),
        fingerprint: expect.stringMatching(/^[0-9a-f]{2}( [0-9a-f]{2})+$/),
        safetyNumber: expect.stringMatching(/^\d{60}$/),
        scannableSafetyNumber: expect.any(String),
        trustLevel: 'TRUSTED_UNVERIFIED',
        addedTimestamp: expect.any(Number),
      },
    ]);
    // B re-registers: a fresh data directory, so a new identity key.
    await b.close();
    b = await startDaemon(tmp.dir, B, { profileName: 'Bob', dataDir: join(tmp.dir, 'b-again') });
    const refused = await rpc(a.http!, 'send', { recipient: B, message: 'to the new key?' });
    expect(refused.error).toMatchObject({ code: -4, data: { response: { results: [{ type: 'IDENTITY_FAILURE' }] } } });
    const [changed] = (await rpc(a.http!, 'listIdentities', { number: B })).result;
    expect(changed.trustLevel).toBe('UNTRUSTED');
    expect(changed.safetyNumber).not.toBe(ids.result[0].safetyNumber);
    expect((await call(a, 'trust', { recipient: B }, d)).error.code).toBe(-32602);
    const wrong = await rpc(a.http!, 'trust', { recipient: B, 'verified-safety-number': ids.result[0].safetyNumber });
    expect(wrong.error.code).toBe(-1);
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'still no' })).error.code).toBe(-4);
    const ok = await rpc(a.http!, 'trust', { recipient: B, 'verified-safety-number': changed.safetyNumber });
    expect(ok.result).toEqual({});
    expect((await rpc(a.http!, 'listIdentities', { number: B })).result[0].trustLevel).toBe('TRUSTED_VERIFIED');
    expect((await rpc(a.http!, 'send', { recipient: B, message: 'now' })).result.results[0].type).toBe('SUCCESS');
  });

  it('trust-all-known-keys trusts a changed key', async () => {
    await c.close();
    c = await startDaemon(tmp.dir, C, { dataDir: join(tmp.dir, 'c-again') });
    expect((await rpc(a.http!, 'send', { recipient: C, message: 'x' })).error.code).toBe(-4);
    expect((await rpc(a.http!, 'trust', { recipient: C, 'trust-all-known-keys': true })).result).toEqual({});
    expect((await rpc(a.http!, 'send', { recipient: C, message: 'x' })).result.results[0].type).toBe('SUCCESS');
  });

  it('every documented parameter the local network does not offer is -32602 naming it, in both spellings', async () => {
    for (const [method, params] of Object.entries(METHOD_PARAMS)) {
      for (const [name, spec] of Object.entries(params)) {
        if (!spec.refused) continue;
        for (const key of spellings(name, spec)) {
          const r = await rpc(a.http!, method, { [key]: 'x' });
          expect([method, key, r.error?.code]).toEqual([method, key, -32602]);
          // Named as the client spelled it.
          expect(r.error.message).toContain(`${key} is not supported`);
        }
      }
    }
    expect(dashed('mobileCoinAddress')).toBe('mobile-coin-address');
  });

  it('undocumented keys (account on a one-account daemon) are ignored, as signal-cli ignores them', async () => {
    const r = await rpc(a.http!, 'send', { account: A, recipient: B, message: 'with account', somethingElse: 1 });
    expect(r.result.results[0].type).toBe('SUCCESS');
  });
});
