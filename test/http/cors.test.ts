// Proves the CORS contract: nothing at all when AP_ALLOW_ORIGIN is unset; the allow, expose and
// Vary headers when set (Vary merged into an existing value, omitted for `*`); the preflight's 204
// headers with Allow-Headers echoing only token-valid request headers; and the boot validation of
// the configured origin.
import { describe, expect, it } from 'vitest';
import {
  allowedRequestHeaders,
  corsHeaders,
  mergeVary,
  parseAllowOrigin,
  preflightResponse,
} from '../../src/http/cors.js';

const ORIGIN = 'https://app.example.com';
const EXPOSE = 'x-audio-proxy, retry-after, accept-ranges, content-range, etag';

describe('corsHeaders', () => {
  it('adds nothing when unset', () => {
    expect(corsHeaders(undefined)).toEqual({});
    expect(corsHeaders(undefined, 'Accept-Encoding')).toEqual({});
  });

  it('names an exact origin and varies on Origin', () => {
    expect(corsHeaders(ORIGIN)).toEqual({
      'access-control-allow-origin': ORIGIN,
      'access-control-expose-headers': EXPOSE,
      vary: 'Origin',
    });
    expect(corsHeaders(ORIGIN, 'Accept-Encoding').vary).toBe('Accept-Encoding, Origin');
  });

  it('`*` allows everyone and varies on nothing', () => {
    expect(corsHeaders('*', 'Accept-Encoding')).toEqual({
      'access-control-allow-origin': '*',
      'access-control-expose-headers': EXPOSE,
    });
  });
});

describe('mergeVary', () => {
  it.each([
    [undefined, 'Origin'],
    ['', 'Origin'],
    ['Accept-Encoding', 'Accept-Encoding, Origin'],
    ['origin', 'origin'],
    ['Accept-Encoding, ORIGIN', 'Accept-Encoding, ORIGIN'],
    ['*', '*'],
  ])('%j + Origin → %j', (existing, expected) => {
    expect(mergeVary(existing, 'Origin')).toBe(expected);
  });
});

describe('preflightResponse', () => {
  it('is undefined when unset (OPTIONS stays a 404)', () => {
    expect(preflightResponse(undefined, 'x-request-id')).toBeUndefined();
  });

  it('is a 204 naming methods, age and the echoed headers', () => {
    expect(preflightResponse(ORIGIN, 'x-request-id, cache-control')).toEqual({
      status: 204,
      headers: {
        'access-control-allow-origin': ORIGIN,
        'access-control-expose-headers': EXPOSE,
        vary: 'Origin',
        'access-control-allow-methods': 'GET, HEAD',
        'access-control-max-age': '86400',
        'access-control-allow-headers': 'x-request-id, cache-control',
      },
    });
  });

  it('omits Allow-Headers when none were asked for, or none are tokens', () => {
    expect(preflightResponse('*', undefined)?.headers).not.toHaveProperty(
      'access-control-allow-headers',
    );
    expect(preflightResponse('*', ' , ;bad, "q"')?.headers).not.toHaveProperty(
      'access-control-allow-headers',
    );
  });
});

describe('allowedRequestHeaders', () => {
  it.each([
    ['x-request-id,cache-control', 'x-request-id, cache-control'],
    ['  Range ,  X-Custom  ', 'Range, X-Custom'],
    ['a b, ok, "x", bad(1), fine_1', 'ok, fine_1'],
    ['x\u00e9, good', 'good'],
    [['one', 'two, three'], 'one, two, three'],
    ['', undefined],
  ])('%j → %j', (requested, expected) => {
    expect(allowedRequestHeaders(requested)).toBe(expected);
  });
});

describe('parseAllowOrigin', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['  ', undefined],
    ['*', '*'],
    [ORIGIN, ORIGIN],
    ['http://localhost:5173', 'http://localhost:5173'],
    ['https://[::1]:8443', 'https://[::1]:8443'],
  ])('accepts %j as %j', (raw, value) => {
    expect(parseAllowOrigin(raw)).toEqual({ ok: true, value });
  });

  it.each([
    'https://app.example.com/',
    'https://app.example.com/path',
    'https://app.example.com?a=1',
    'app.example.com',
    'https://',
    '*.example.com',
    'HTTPS://app.example.com',
    'https://App.Example.com',
    'https://app.example.com:443',
    'http://app.example.com:80',
    'https://app.example.com:0',
    'https://app.example.com:99999',
    'https://user@app.example.com',
  ])('refuses %j, naming the variable', (raw) => {
    const r = parseAllowOrigin(raw);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain('AP_ALLOW_ORIGIN');
  });
});
