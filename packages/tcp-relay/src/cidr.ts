import { isIP } from 'node:net';
import { CidrError } from './errors.js';

/** An address range: IPv4 or IPv6 network and prefix length. */
export interface Cidr {
  readonly text: string;
  readonly family: 4 | 6;
  readonly bits: bigint;
  readonly prefix: number;
}

function v4bits(addr: string): bigint {
  return addr.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
}

function v6bits(addr: string): bigint {
  let a = addr;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    const b = v4bits(v4[1]!);
    a = `${a.slice(0, v4.index)}${(b >> 16n).toString(16)}:${(b & 0xffffn).toString(16)}`;
  }
  const [head, tail] = a.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g || '0', 16)), 0n);
}

/** Parses `ADDR/PREFIX` (or a bare address: a single host). Throws with a clear message. */
export function parseCidr(text: string): Cidr {
  const [addr, len, extra] = text.trim().split('/');
  const family = isIP(addr ?? '');
  if (!addr || family === 0 || extra !== undefined)
    throw new CidrError(`invalid CIDR "${text}": expected ADDRESS/PREFIX`);
  const max = family === 4 ? 32 : 128;
  const prefix = len === undefined ? max : Number(len);
  if (!/^\d+$/.test(len ?? String(max)) || prefix > max) {
    throw new CidrError(`invalid CIDR "${text}": prefix must be 0 to ${max}`);
  }
  const bits = family === 4 ? v4bits(addr) : v6bits(addr);
  return { text: text.trim(), family: family as 4 | 6, bits: mask(bits, prefix, max), prefix };
}

function mask(bits: bigint, prefix: number, max: number): bigint {
  const m = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(max - prefix);
  return bits & m;
}

/** True when the address (as a socket reports it; IPv4-mapped IPv6 too) lies in one of the ranges. */
export function allowed(address: string | undefined, ranges: readonly Cidr[]): boolean {
  if (!address) return false;
  let addr = address;
  let family = isIP(addr);
  if (family === 6 && /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(addr)) {
    addr = addr.slice(7);
    family = 4;
  }
  if (family === 0) return false;
  const bits = family === 4 ? v4bits(addr) : v6bits(addr);
  const max = family === 4 ? 32 : 128;
  return ranges.some((r) => r.family === family && mask(bits, r.prefix, max) === r.bits);
}

/** The default allowlist: the link's network (/24, or /64 for IPv6) and loopback. */
export function defaultAllow(listenHost: string): Cidr[] {
  const ranges = [parseCidr('127.0.0.0/8'), parseCidr('::1/128')];
  const family = isIP(listenHost);
  if (family === 4) ranges.push(parseCidr(`${listenHost}/24`));
  if (family === 6) ranges.push(parseCidr(`${listenHost}/64`));
  return ranges;
}
