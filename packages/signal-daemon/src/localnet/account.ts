/** The account itself and the network's accounts: sendSyncRequest, listAccounts. */
import type { LocalMethods } from './methods.js';

export const accountMethods: LocalMethods = {
  // A local account has no other devices to ask: nothing to synchronise.
  sendSyncRequest: () => ({}),
  listAccounts: (ctx) => ctx.store.accounts().map((a) => ({ number: a.number })),
};
