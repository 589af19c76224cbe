/**
 * The account's devices (signal-cli's updateDevice and removeDevice; listDevices and linking are
 * in linking.ts). Device 1 is this daemon, the primary; the others are the devices linked to it,
 * by their ids in listDevices, which never change. Removing the primary is refused, as signal-cli
 * refuses it.
 */
import { invalidParams, userError } from '../errors.js';
import { optInt, type Params, reqString } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

function deviceId(p: Params): number {
  const id = optInt(p, 'deviceId');
  if (id === undefined) throw invalidParams('deviceId is required');
  if (id < 1) throw invalidParams(`deviceId must be a device id from listDevices (1 or more), got ${id}`);
  return id;
}

async function updateDevice(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const id = deviceId(p);
  const name = reqString(p, 'deviceName');
  const { store, extras, me } = ctx;
  let found = true;
  await store.write(() =>
    extras.transaction(() => {
      if (id === 1) extras.setSetting(me.number, 'deviceName', name);
      else found = store.renameDevice(me.number, id, name);
    }),
  );
  if (!found) throw userError(`Device ${id} is not linked to this account`);
  return {};
}

async function removeDevice(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const id = deviceId(p);
  if (id === 1) throw userError('Cannot remove the primary device: this daemon is device 1');
  let found = false;
  await ctx.store.write(() => {
    found = ctx.store.removeDevice(ctx.me.number, id);
  });
  if (!found) throw userError(`Device ${id} is not linked to this account`);
  return {};
}

export const deviceMethods: LocalMethods = { updateDevice, removeDevice };
