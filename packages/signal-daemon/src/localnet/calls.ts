/**
 * Voice and video calls (signal-cli 0.14.2's startCall, acceptCall, hangupCall, rejectCall,
 * listCalls, subscribeCallEvents, unsubscribeCallEvents). The embedded network carries no audio
 * or video, so no call ever starts or arrives: the call methods check their params and then
 * answer -1 (signal-cli's user error) saying so; listCalls answers no calls; subscribeCallEvents
 * gives a subscription id, as signal-cli does, on which no event ever comes.
 */
import { invalidParams, userError } from '../errors.js';
import { numbers, optInt, type Params } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

export const NO_CALLS = 'Calls are not supported by the embedded network: it carries no audio or video';

function callId(p: Params): number {
  const id = optInt(p, 'callId');
  if (id === undefined) throw invalidParams('callId is required');
  return id;
}

function startCall(_ctx: LocalContext, p: Params): never {
  const to = numbers(p, 'recipient');
  if (to.length !== 1) throw invalidParams('recipient must be exactly one phone number');
  throw userError(NO_CALLS);
}

/** Each call id names no call: there are none. */
const noSuchCall = (_ctx: LocalContext, p: Params): never => {
  throw userError(`${NO_CALLS} (no call ${callId(p)})`);
};

/** The call-event subscriptions of each daemon's network (ids count up from 0, as signal-cli's). */
const subscriptions = new WeakMap<LocalContext, { next: number; ids: Set<number> }>();
const subsOf = (ctx: LocalContext) => {
  let s = subscriptions.get(ctx);
  if (!s) {
    s = { next: 0, ids: new Set() };
    subscriptions.set(ctx, s);
  }
  return s;
};

function subscribeCallEvents(ctx: LocalContext): number {
  const s = subsOf(ctx);
  const id = s.next++;
  s.ids.add(id);
  return id;
}

function unsubscribeCallEvents(ctx: LocalContext, p: Params): Record<string, never> {
  const id = optInt(p, 'subscription');
  if (id === undefined) throw userError('Missing subscription parameter with subscription id');
  if (!subsOf(ctx).ids.delete(id)) throw userError('Unknown subscription id');
  return {};
}

export const callMethods: LocalMethods = {
  startCall,
  acceptCall: noSuchCall,
  hangupCall: noSuchCall,
  rejectCall: noSuchCall,
  listCalls: () => [],
  subscribeCallEvents,
  unsubscribeCallEvents,
};
