/**
 * Identity keys on the local network. Each daemon keeps its account's identity secret in its data
 * directory (`identity.key`, 0600) and publishes the public key in the network file. A fresh data
 * directory is a re-registration: a new key, which every account that talked to this one sees as
 * a changed identity. As on Signal, the first key seen is trusted (TOFU); a changed key is
 * untrusted until `trust`, and a send to it fails with IDENTITY_FAILURE (-4 when nobody got it).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IdentityEntry } from '@vigil/shared-types';
import { writeFileAtomic } from '@vigil/shared-types/node';
import type { Records } from './records.js';

/** Reads (or creates) this account's identity secret; returns the public key (base64). */
export function loadIdentity(dataDir: string): string {
  const file = join(dataDir, 'identity.key');
  let secret: Buffer;
  if (existsSync(file)) secret = readFileSync(file);
  else {
    secret = randomBytes(32);
    writeFileAtomic(file, secret);
  }
  return Buffer.concat([Buffer.from([5]), createHash('sha256').update(secret).digest()]).toString('base64');
}

const digits = (bytes: Buffer, n: number) =>
  Array.from({ length: n }, (_, i) =>
    (bytes.readUInt32BE((i * 4) % (bytes.length - 3)) % 100000).toString().padStart(5, '0'),
  ).join('');

/** The 60-digit safety number of two accounts (the same on both sides). */
export function safetyNumber(a: { number: string; key: string }, b: { number: string; key: string }): string {
  const half = (x: { number: string; key: string }) =>
    digits(createHash('sha512').update(x.number).update(x.key).digest(), 6);
  return [half(a), half(b)].sort().join('');
}

export function fingerprint(key: string): string {
  return Buffer.from(key, 'base64')
    .toString('hex')
    .replace(/(..)(?!$)/g, '$1 ');
}

export function identityEntry(
  records: Records,
  me: { number: string; key: string },
  other: { number: string; uuid: string },
): IdentityEntry | undefined {
  const key = records.identity(other.number);
  const t = records.trust(me.number, other.number);
  if (!key || !t) return undefined;
  const sn = safetyNumber(me, { number: other.number, key });
  return {
    number: other.number,
    uuid: other.uuid,
    fingerprint: fingerprint(key),
    safetyNumber: sn,
    scannableSafetyNumber: Buffer.from(sn).toString('base64'),
    trustLevel: t.identityKey === key ? (t.level as IdentityEntry['trustLevel']) : 'UNTRUSTED',
    addedTimestamp: t.addedAt,
  };
}
