// Proves the expiry rules with an injected clock: the 410 verdict is `now > exp` (the expiring
// second is still served, no leeway), and a success response's max-age is clamped to the URL's
// remaining life without touching the rest of Cache-Control; without exp every clamp is identity.
import { describe, expect, it } from 'vitest';
import { IMMUTABLE_CACHE_CONTROL } from '../../src/core/variantHeaders.js';
import { clampCacheControl, clampTtlS, isExpired, remainingS } from '../../src/http/expiry.js';

const EXP = 2_000_000_000;

describe('isExpired', () => {
  it.each([
    [EXP - 1, false],
    [EXP, false],
    [EXP + 0.999, false],
    [EXP + 1, true],
    [EXP + 86_400, true],
  ])('now=%d → %s', (now, expired) => {
    expect(isExpired(EXP, now)).toBe(expired);
  });

  it('no exp never expires', () => {
    expect(isExpired(undefined, Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});

describe('remainingS', () => {
  it('counts down to zero and never below', () => {
    expect(remainingS(EXP, EXP - 100)).toBe(100);
    expect(remainingS(EXP, EXP)).toBe(0);
    expect(remainingS(EXP, EXP + 5)).toBe(0);
    expect(remainingS(undefined, EXP)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('clampCacheControl', () => {
  it.each([
    [IMMUTABLE_CACHE_CONTROL, EXP - 100, 'public, max-age=100, immutable, no-transform'],
    [IMMUTABLE_CACHE_CONTROL, EXP, 'public, max-age=0, immutable, no-transform'],
    [IMMUTABLE_CACHE_CONTROL, EXP - 40_000_000, IMMUTABLE_CACHE_CONTROL],
    ['public, max-age=60', EXP - 100, 'public, max-age=60'],
    ['public, max-age=3600', EXP - 100, 'public, max-age=100'],
    ['no-store', EXP - 100, 'no-store'],
    ['s-maxage=500, max-age=500', EXP - 100, 's-maxage=500, max-age=100'],
    ['x-max-age=500, max-age=500', EXP - 100, 'x-max-age=500, max-age=100'],
  ])('%j at exp-%d', (header, now, expected) => {
    expect(clampCacheControl(header, EXP, now)).toBe(expected);
  });

  it('is the identity without exp', () => {
    expect(clampCacheControl(IMMUTABLE_CACHE_CONTROL, undefined, EXP)).toBe(
      IMMUTABLE_CACHE_CONTROL,
    );
  });
});

describe('clampTtlS', () => {
  it('clamps a presign TTL to the URL, 0 included', () => {
    expect(clampTtlS(300, EXP, EXP - 100)).toBe(100);
    expect(clampTtlS(300, EXP, EXP)).toBe(0);
    expect(clampTtlS(300, EXP, EXP - 1000)).toBe(300);
    expect(clampTtlS(300, undefined, EXP)).toBe(300);
  });
});
