/**
 * Linking devices: startLink and finishLink (the new device's side), addDevice and listDevices
 * (the primary's side). The link requests live in the network file, so the two sides may be
 * daemons in different processes.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { RpcErrorCode } from '@vigil/shared-types';
import { invalidParams, RpcFailure, userError } from '../errors.js';
import { optString, type Params, reqString } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

/** finishLink looks at the link request at least this often (and whenever the network file changes). */
const LINK_POLL_MS = 100;

function startLink(ctx: LocalContext): { deviceLinkUri: string } {
  const uuid = randomUUID();
  const pubKey = randomBytes(33).toString('base64url');
  ctx.store.createLink(uuid, pubKey, ctx.me.number);
  return { deviceLinkUri: `sgnl://linkdevice?uuid=${uuid}&pub_key=${pubKey}` };
}

function parseLinkUri(uri: string): { uuid: string; pubKey: string } {
  const m = /^sgnl:\/\/linkdevice\?uuid=([0-9a-f-]{36})&pub_key=([A-Za-z0-9_%+/=-]+)$/.exec(uri);
  if (!m) throw invalidParams('deviceLinkUri must be sgnl://linkdevice?uuid=…&pub_key=…');
  return { uuid: m[1]!, pubKey: decodeURIComponent(m[2]!) };
}

/** Waits, bounded by --link-timeout, until a primary accepts the link with addDevice. */
async function finishLink(ctx: LocalContext, p: Params): Promise<Record<string, unknown>> {
  const uri = reqString(p, 'deviceLinkUri');
  const { uuid, pubKey } = parseLinkUri(uri);
  const link = ctx.store.link(uuid);
  if (!link || link.pubKey !== pubKey) throw userError('Unknown device link URI: start one with startLink');
  const deviceName = optString(p, 'deviceName');
  if (deviceName) ctx.store.nameLink(uuid, deviceName);
  const deadline = Date.now() + ctx.linkTimeoutMs;
  for (;;) {
    const now = ctx.store.link(uuid);
    if (now?.primaryNumber) return { deviceLinkUri: uri, number: now.primaryNumber };
    if (ctx.closed()) throw new RpcFailure(RpcErrorCode.IO_ERROR, 'Link aborted: the daemon is shutting down');
    const left = deadline - Date.now();
    if (left <= 0) {
      throw userError(
        `Link request timed out: no primary device accepted it within ${Math.round(ctx.linkTimeoutMs / 1000)} s`,
      );
    }
    await ctx.waitForChange(Math.min(LINK_POLL_MS, left));
  }
}

/** The primary's side of linking: accepts a device link URI (signal-cli's addDevice). */
function addDevice(ctx: LocalContext, p: Params): Record<string, never> {
  const { uuid, pubKey } = parseLinkUri(reqString(p, 'uri'));
  const link = ctx.store.link(uuid);
  if (!link || link.pubKey !== pubKey) throw userError('Unknown device link URI');
  if (Date.now() - link.createdAt > ctx.linkTimeoutMs * 2) throw userError('Device link URI has expired');
  if (!ctx.store.acceptLink(uuid, ctx.me.number) && link.primaryNumber !== ctx.me.number) {
    throw userError('Device link URI was already used');
  }
  return {};
}

/** This device's name: set with updateAccount or updateDevice, else the name the account registered with. */
export const ownDeviceName = (ctx: LocalContext) =>
  ctx.extras.setting(ctx.me.number, 'deviceName') ?? ctx.me.profileName;

function listDevices(ctx: LocalContext): unknown[] {
  return [
    { id: 1, name: ownDeviceName(ctx), createdTimestamp: 0, lastSeenTimestamp: Date.now() },
    ...ctx.store.devices(ctx.me.number).map((d) => ({
      id: d.id,
      name: d.deviceName ?? d.requester,
      createdTimestamp: d.acceptedAt,
      lastSeenTimestamp: d.acceptedAt,
    })),
  ];
}

export const linkingMethods: LocalMethods = { startLink, finishLink, addDevice, listDevices };
