/**
 * The stages before any lookup, each on its own loopback exchange (no proxy): signature (404
 * route for a path that is not `/{signature}/…`, 401 for a wrong or insecure-when-refused
 * signature, the verified rest otherwise), options (404 without a source marker, 422 naming the
 * segment), expiry (410 immutable once past, nothing before), and the 304 of a matching
 * If-None-Match (with ETag, Cache-Control and the CORS headers).
 */
import { describe, expect, it } from 'vitest';
import { ANSWERED } from '../../../src/http/exchange.js';
import { sign } from '../../../src/http/signature.js';
import { expiryStage } from '../../../src/http/stages/expiry.js';
import { notModifiedStage } from '../../../src/http/stages/notModified.js';
import { optionsStage, type ParsedRoute } from '../../../src/http/stages/options.js';
import { signatureStage } from '../../../src/http/stages/signature.js';
import { describeVariant, type RenderRoute } from '../../../src/http/stages/variant.js';
import { contextOf, exchange, NOT_ANSWERED } from './harness.js';

const KEY = '00112233445566778899aabbccddeeff'.repeat(2);
const SALT = 'ffeeddccbbaa99887766554433221100';
const NOW_S = 1_900_000_000;

function route(rest: string): RenderRoute {
  const x = { res: { writeHead() {}, end() {} } } as never;
  const parsed = optionsStage(x, rest) as ParsedRoute;
  if (parsed.endpoint !== 'render') throw new Error('not a render route');
  return parsed;
}

describe('signature stage', () => {
  it('answers the router 404 for a path that is not signed, 401 for a bad signature', async () => {
    const ctx = contextOf({ AP_KEY: KEY, AP_SALT: SALT });
    const none = await exchange((x) => signatureStage(x, ctx, '/'), {});
    expect(none.status).toBe(404);
    expect(JSON.parse(none.body)).toEqual({ error: 'not_found', message: 'No such resource' });
    const bad = await exchange((x) => signatureStage(x, ctx, '/AAAA/f:mp3/plain/local://a.wav'));
    expect(bad.status).toBe(401);
    expect(bad.result).toBe(ANSWERED);
    expect(bad.headers['cache-control']).toBe('max-age=60');
  });

  it('hands on the rest of a well-signed path, and of an insecure one only when allowed', async () => {
    const ctx = contextOf({ AP_KEY: KEY, AP_SALT: SALT, AP_ALLOW_INSECURE: '0' });
    const rest = '/f:mp3/plain/local://a.wav';
    const signature = sign(rest, Buffer.from(KEY, 'hex'), Buffer.from(SALT, 'hex'));
    const good = await exchange((x) => signatureStage(x, ctx, `/${signature}${rest}`));
    expect(good.status).toBe(NOT_ANSWERED);
    expect(good.result).toBe(rest);
    const insecure = await exchange((x) => signatureStage(x, ctx, `/insecure${rest}`));
    expect(insecure.status).toBe(401);
    const allowed = contextOf();
    const ok = await exchange((x) => signatureStage(x, allowed, `/insecure${rest}`));
    expect(ok.result).toBe(rest);
  });
});

describe('options stage', () => {
  it('parses a render and an info route', async () => {
    const render = await exchange((x) => optionsStage(x, '/f:mp3/plain/local://a.wav'));
    expect(render.status).toBe(NOT_ANSWERED);
    expect(render.result).toMatchObject({ endpoint: 'render', source: 'plain/local://a.wav' });
    const info = await exchange((x) => optionsStage(x, '/info/plain/local://a.wav'));
    expect(info.result).toMatchObject({ endpoint: 'info' });
  });

  it('answers 404 without a source marker and 422 naming a bad segment', async () => {
    const missing = await exchange((x) => optionsStage(x, '/f:mp3'));
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).message).toBe('Source not found');
    const bad = await exchange((x) => optionsStage(x, '/f:nope/plain/local://a.wav'));
    expect(bad.status).toBe(422);
    expect(JSON.parse(bad.body).error).toBe('invalid_options');
    expect(JSON.parse(bad.body).message).toContain('f:nope');
  });
});

describe('expiry stage', () => {
  it('answers 410 (immutable) once exp has passed, and nothing before or without one', async () => {
    const past = await exchange((x) => expiryStage(x, NOW_S - 1, NOW_S));
    expect(past.status).toBe(410);
    expect(past.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    for (const exp of [undefined, NOW_S + 60]) {
      const open = await exchange((x) => expiryStage(x, exp, NOW_S));
      expect(open.status).toBe(NOT_ANSWERED);
      expect(open.result).toBeUndefined();
    }
  });
});

describe('conditional request stage', () => {
  const variant = describeVariant(route('/f:mp3/plain/local://a.wav'), 'local://a.wav', NOW_S);

  it('answers 304 with the ETag, Cache-Control and CORS headers when the ETag matches', async () => {
    const r = await exchange((x) => notModifiedStage(x, variant), {
      headers: { 'if-none-match': `"other", ${variant.etag}` },
      cors: { 'access-control-allow-origin': '*' },
    });
    expect(r.status).toBe(304);
    expect(r.headers.etag).toBe(variant.etag);
    expect(r.headers['cache-control']).toBe(variant.cacheControl);
    expect(r.headers['access-control-allow-origin']).toBe('*');
  });

  it('hands on without a matching If-None-Match', async () => {
    for (const headers of [{}, { 'if-none-match': '"other"' }] as Record<string, string>[]) {
      const r = await exchange((x) => notModifiedStage(x, variant), { headers });
      expect(r.status).toBe(NOT_ANSWERED);
    }
  });

  it('describes the variant: key, ETag of the key, type, clamped Cache-Control, disposition', () => {
    const expiring = route(`/f:mp3/exp:${NOW_S + 30}/dl:song/plain/local://a.wav`);
    const d = describeVariant(expiring, 'local://a.wav', NOW_S);
    expect(d.etag).toBe(`"${d.key}"`);
    expect(d.headers['content-type']).toBe('audio/mpeg');
    expect(d.cacheControl).toMatch(/max-age=30\b/);
    expect(d.headers['content-disposition']).toContain('song');
  });
});
