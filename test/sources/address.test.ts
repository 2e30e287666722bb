/**
 * `address.ts`: which addresses an `https://` source may connect to, and the one DNS answer
 * every connection of a resolution uses.
 */
import { describe, expect, it } from 'vitest';
import { isNonPublicAddress, pinAddress, pinnedLookup } from '../../src/sources/address.js';

describe('isNonPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254', // cloud metadata
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '64:ff9b::10.0.0.1',
    '::127.0.0.1',
    'not an address',
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each([
    '93.184.216.34',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:93.184.216.34',
  ])('%s is public', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });
});

describe('pinAddress', () => {
  it('an IP literal is its own answer; non-public refused unless allowed', async () => {
    expect(await pinAddress('127.0.0.1', false)).toEqual({ ok: false, reason: 'non_public' });
    expect(await pinAddress('127.0.0.1', true)).toEqual({
      ok: true,
      pinned: { address: '127.0.0.1', family: 4 },
    });
    expect(await pinAddress('localhost', false)).toEqual({ ok: false, reason: 'non_public' });
  });

  it('a name that does not resolve is unresolvable', async () => {
    expect(await pinAddress('no-such-host.invalid', true)).toEqual({
      ok: false,
      reason: 'unresolvable',
    });
  });

  it('the lookup always answers the pinned address, single or all', () => {
    const lookup = pinnedLookup({ address: '203.0.113.7', family: 4 });
    const calls: unknown[][] = [];
    (lookup as unknown as Function)('evil.example', {}, (...a: unknown[]) => calls.push(a));
    (lookup as unknown as Function)('evil.example', { all: true }, (...a: unknown[]) =>
      calls.push(a),
    );
    expect(calls).toEqual([
      [null, '203.0.113.7', 4],
      [null, [{ address: '203.0.113.7', family: 4 }]],
    ]);
  });
});
