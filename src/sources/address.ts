/**
 * Where an `https://` source may connect: its host is resolved once, the address judged, and
 * every connection for that source (the HEAD and the GET) made to that one address.
 *
 * ## Invariants
 * - **One resolution per source resolution.** `pinAddress` asks DNS once; `pinnedLookup` hands
 *   the same address to every socket, so a name that re-resolves (DNS rebinding) cannot move the
 *   read to an address that was never judged.
 * - **Non-public is refused unless allowed** (`AP_SOURCE_ALLOW_PRIVATE`): loopback, private
 *   (RFC 1918, ULA), link-local, CGNAT, benchmarking, multicast, reserved, unspecified and
 *   broadcast, in IPv4 and IPv6, and IPv4 carried in IPv6 (mapped, compatible, NAT64) judged as
 *   the IPv4 address it carries.
 *
 * ## Races
 * None beyond DNS's own: the answer is taken once and kept for the source's lifetime.
 *
 * ## Events
 * None.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

export interface PinnedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

const NON_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
] as const) {
  NON_PUBLIC.addSubnet(net, bits, 'ipv6');
}

/** The 16 bytes of an IPv6 literal (no zone id). */
function v6Bytes(address: string): number[] {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: number[] = [];
  if (dotted) {
    tail = dotted[1]!.split('.').map(Number);
    text = `${text.slice(0, -dotted[1]!.length)}0:0`;
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (s: string | undefined) => (s ? s.split(':').filter((g) => g !== '') : []);
  const left = parse(head);
  const right = parse(rest);
  const groups =
    rest === undefined
      ? left
      : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  const bytes = groups.flatMap((g) => {
    const n = Number.parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (dotted) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 one carries (mapped `::ffff:`, compatible `::`, NAT64 `64:ff9b::`). */
function embeddedV4(address: string): string | undefined {
  const b = v6Bytes(address);
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = b.slice(12, 16).join('.');
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4;
  if (zero(0, 12) && !zero(12, 16) && v4 !== '0.0.0.1') return v4;
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return v4;
  return undefined;
}

/** Whether `address` (an IP literal) is anything but a public unicast address. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return address === '255.255.255.255' || NON_PUBLIC.check(address, 'ipv4');
  if (family !== 6) return true; // not an address at all: never public
  const inner = embeddedV4(address);
  if (inner !== undefined) return isNonPublicAddress(inner);
  return NON_PUBLIC.check(address, 'ipv6');
}

export type PinOutcome =
  | { readonly ok: true; readonly pinned: PinnedAddress }
  | { readonly ok: false; readonly reason: 'unresolvable' | 'non_public' };

/** Resolves `host` once (an IP literal is its own answer) and judges the address. */
export async function pinAddress(host: string, allowNonPublic: boolean): Promise<PinOutcome> {
  let pinned: PinnedAddress;
  const literal = isIP(host);
  if (literal !== 0) {
    pinned = { address: host, family: literal as 4 | 6 };
  } else {
    try {
      const answer = await lookup(host, { verbatim: true });
      pinned = { address: answer.address, family: answer.family as 4 | 6 };
    } catch {
      return { ok: false, reason: 'unresolvable' };
    }
  }
  if (!allowNonPublic && isNonPublicAddress(pinned.address)) {
    return { ok: false, reason: 'non_public' };
  }
  return { ok: true, pinned };
}

/** A socket `lookup` that always answers the pinned address (for http(s).request). */
export function pinnedLookup(pinned: PinnedAddress): LookupFunction {
  return ((_host: string, options: { all?: boolean }, callback: Function) => {
    if (options?.all) callback(null, [{ address: pinned.address, family: pinned.family }]);
    else callback(null, pinned.address, pinned.family);
  }) as unknown as LookupFunction;
}
