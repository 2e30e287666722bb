// Proves the one failure → HTTP mapping against the contract's error table, row by row: status,
// the body's exact bytes, the JSON content type, the Cache-Control per class, Retry-After (integer
// >= 1) on 429 and Content-Range on 416; that every source refusal is byte-identical; that
// ERROR_TABLE and errorResponse agree in both directions; and that unknown failures throw.
import { describe, expect, it } from 'vitest';
import type { Failure } from '../../src/core/failure.js';
import { ERROR_TABLE, errorResponse } from '../../src/http/errors.js';

// The contract's table, transcribed independently of the module under test.
const CONTRACT: [Failure, number, string, string, string][] = [
  [
    { type: 'invalid_signature' },
    401,
    'invalid_signature',
    'Invalid or missing signature',
    'max-age=60',
  ],
  [{ type: 'not_found' }, 404, 'not_found', 'Source not found', 'max-age=10'],
  [{ type: 'not_found', scope: 'route' }, 404, 'not_found', 'No such resource', 'max-age=10'],
  [{ type: 'expired' }, 410, 'expired', 'URL has expired', 'public, max-age=31536000, immutable'],
  [
    { type: 'source_too_large' },
    413,
    'source_too_large',
    'Source exceeds AP_MAX_SRC_BYTES',
    'max-age=10',
  ],
  [
    { type: 'source_too_long' },
    413,
    'source_too_long',
    'Source exceeds AP_MAX_DURATION_S',
    'max-age=10',
  ],
  [
    { type: 'undecodable_source' },
    415,
    'undecodable_source',
    'Source format is not decodable',
    'max-age=10',
  ],
  [
    { type: 'video_source' },
    415,
    'video_source',
    'Source contains video; this proxy serves audio only',
    'max-age=10',
  ],
  [
    { type: 'range_not_satisfiable', size: 1234 },
    416,
    'range_not_satisfiable',
    'Range not satisfiable',
    'no-store',
  ],
  [
    { type: 'invalid_options', message: 'unknown option "xyz:1"' },
    422,
    'invalid_options',
    'unknown option "xyz:1"',
    'max-age=60',
  ],
  [{ type: 'queue_full', retryAfterS: 3 }, 429, 'queue_full', 'Render queue is full', 'no-store'],
  [{ type: 'render_failed' }, 500, 'render_failed', 'Render failed', 'no-store'],
  [{ type: 'probe_failed' }, 500, 'probe_failed', 'Probe failed', 'no-store'],
  [
    {
      type: 'unsupported_option',
      message:
        'enhance:voice needs the ffmpeg filter "deesser", which this server\'s ffmpeg does not have',
    },
    501,
    'unsupported_option',
    'enhance:voice needs the ffmpeg filter "deesser", which this server\'s ffmpeg does not have',
    'max-age=60',
  ],
  [
    { type: 'not_configured' },
    500,
    'not_configured',
    'Storage backend is not configured',
    'no-store',
  ],
  [
    { type: 'upstream_unavailable' },
    502,
    'upstream_unavailable',
    'Storage backend is unavailable',
    'no-store',
  ],
  [
    { type: 'shutting_down', retryAfterS: 1 },
    503,
    'shutting_down',
    'Server is shutting down',
    'no-store',
  ],
  [
    { type: 'render_timeout' },
    504,
    'render_timeout',
    'Render exceeded AP_RENDER_TIMEOUT',
    'no-store',
  ],
  [{ type: 'probe_timeout' }, 504, 'probe_timeout', 'Probe exceeded AP_PROBE_TIMEOUT', 'no-store'],
];

describe('errorResponse', () => {
  it.each(CONTRACT)('%j → %d %s', (failure, status, error, message, cacheControl) => {
    const r = errorResponse(failure);
    expect(r.status).toBe(status);
    expect(r.body).toBe(JSON.stringify({ error, message }));
    expect(JSON.parse(r.body)).toEqual({ error, message });
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['cache-control']).toBe(cacheControl);
  });

  it('the source 404 is byte for byte the contract body', () => {
    expect(errorResponse({ type: 'not_found' }).body).toBe(
      '{"error":"not_found","message":"Source not found"}',
    );
    expect(errorResponse({ type: 'not_found', scope: 'source' })).toEqual(
      errorResponse({ type: 'not_found' }),
    );
  });

  it('416 carries Content-Range: bytes */size', () => {
    expect(
      errorResponse({ type: 'range_not_satisfiable', size: 1234 }).headers['content-range'],
    ).toBe('bytes */1234');
    expect(errorResponse({ type: 'range_not_satisfiable', size: 0 }).headers['content-range']).toBe(
      'bytes */0',
    );
    expect(() => errorResponse({ type: 'range_not_satisfiable', size: -1 })).toThrow(RangeError);
  });

  it.each([
    [3, '3'],
    [0, '1'],
    [0.2, '1'],
    [2.1, '3'],
    [-5, '1'],
  ])('429 Retry-After for %d s is %s', (retryAfterS, header) => {
    expect(errorResponse({ type: 'queue_full', retryAfterS }).headers['retry-after']).toBe(header);
  });

  it('429 needs a finite estimate, 422 and 501 need a message', () => {
    expect(() =>
      errorResponse({ type: 'queue_full', retryAfterS: Number.POSITIVE_INFINITY }),
    ).toThrow(TypeError);
    expect(() => errorResponse({ type: 'invalid_options', message: '' })).toThrow(TypeError);
    expect(() => errorResponse({ type: 'unsupported_option', message: '' })).toThrow(TypeError);
  });

  it('only 416, 429 and 503 carry an extra header', () => {
    for (const [failure] of CONTRACT) {
      const extra = Object.keys(errorResponse(failure).headers).filter(
        (h) => h !== 'content-type' && h !== 'cache-control',
      );
      const expected =
        failure.type === 'queue_full' || failure.type === 'shutting_down'
          ? ['retry-after']
          : failure.type === 'range_not_satisfiable'
            ? ['content-range']
            : [];
      expect(extra).toEqual(expected);
    }
  });

  it('throws on a failure outside the taxonomy', () => {
    expect(() => errorResponse({ type: 'teapot' } as unknown as Failure)).toThrow(TypeError);
  });
});

describe('ERROR_TABLE', () => {
  it('has exactly the contract rows, and each renders as its row says', () => {
    expect(ERROR_TABLE).toHaveLength(CONTRACT.length);
    for (const [failure, status, error, message, cacheControl] of CONTRACT) {
      const scope = failure.type === 'not_found' ? (failure.scope ?? 'source') : undefined;
      const row = ERROR_TABLE.find((r) => r.type === failure.type && r.scope === scope);
      expect(row, JSON.stringify(failure)).toBeDefined();
      expect(row).toMatchObject({ status, error, cacheControl });
      if (failure.type !== 'invalid_options' && failure.type !== 'unsupported_option') {
        expect(row!.message).toBe(message);
      }
    }
  });

  it('every row is reachable through errorResponse with its own status and cache control', () => {
    for (const row of ERROR_TABLE) {
      const failure = { type: row.type, scope: row.scope, size: 1, retryAfterS: 1, message: 'm' };
      const r = errorResponse(failure as unknown as Failure);
      expect(r.status).toBe(row.status);
      expect(r.headers['cache-control']).toBe(row.cacheControl);
      expect(JSON.parse(r.body).error).toBe(row.error);
      if (row.extraHeader !== undefined) expect(r.headers[row.extraHeader]).toBeDefined();
    }
  });
});
