/**
 * Polls (signal-cli 0.13.23+): sendPollCreate, sendPollVote, sendPollTerminate. Each is a data
 * message with signal-cli's envelope field (`pollCreate`, `pollVote`, `pollTerminate`), sent to
 * recipients, groups or this account (noteToSelf) as a message is. Votes and terminations are
 * sent whether or not this account has seen the poll, as signal-cli sends them (the recipients'
 * clients tally them); the network keeps no tally.
 */
import type { SendResult } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { list, optBool, optInt, type Params, reqString, strings } from '../params.js';
import { postToAll, reqNumber, reqTimestamp, targets } from './interactions.js';
import type { LocalContext, LocalMethods } from './methods.js';

/** signal-cli's limits of a poll. */
export const MAX_POLL_OPTIONS = 10;
export const MAX_POLL_OPTION_LENGTH = 100;

async function sendPollCreate(ctx: LocalContext, p: Params): Promise<SendResult> {
  const question = reqString(p, 'question');
  const options = strings(p, 'option');
  if (options.length === 0) throw invalidParams('option is required (two to ten poll options)');
  // As signal-cli: the option count and length are user errors (-1).
  if (options.length < 2) throw userError('Poll needs at least two options');
  if (options.length > MAX_POLL_OPTIONS) throw userError(`Poll cannot have more than ${MAX_POLL_OPTIONS} options`);
  const long = options.find((o) => o.length > MAX_POLL_OPTION_LENGTH);
  if (long !== undefined) {
    throw userError(`Poll option "${long}" exceeds the maximum length of ${MAX_POLL_OPTION_LENGTH} characters`);
  }
  const to = targets(ctx, p, true);
  const pollCreate = { question, allowMultiple: !optBool(p, 'noMulti'), options };
  return postToAll(ctx, to, { pollCreate }, 'poll');
}

async function sendPollVote(ctx: LocalContext, p: Params): Promise<SendResult> {
  const author = reqNumber(p, 'pollAuthor');
  const targetSentTimestamp = reqTimestamp(p, 'pollTimestamp');
  const voteCount = optInt(p, 'voteCount');
  if (voteCount === undefined)
    throw invalidParams('voteCount is required (1 for the first vote, one more for each later one)');
  if (voteCount < 1) throw invalidParams(`voteCount must be 1 or more, got ${voteCount}`);
  const optionIndexes = list(p, 'option') as number[];
  const bad = optionIndexes.find((i) => i < 0 || i >= MAX_POLL_OPTIONS);
  if (bad !== undefined)
    throw invalidParams(`option must be poll option indexes from 0 to ${MAX_POLL_OPTIONS - 1}, got ${bad}`);
  const to = targets(ctx, p, true);
  const pollVote = {
    author,
    authorNumber: author,
    authorUuid: ctx.store.account(author)?.uuid ?? null,
    targetSentTimestamp,
    optionIndexes,
    voteCount,
  };
  return postToAll(ctx, to, { pollVote }, 'poll vote');
}

async function sendPollTerminate(ctx: LocalContext, p: Params): Promise<SendResult> {
  const targetSentTimestamp = reqTimestamp(p, 'pollTimestamp');
  const to = targets(ctx, p, true);
  return postToAll(ctx, to, { pollTerminate: { targetSentTimestamp } }, 'poll terminate');
}

export const pollMethods: LocalMethods = { sendPollCreate, sendPollVote, sendPollTerminate };
