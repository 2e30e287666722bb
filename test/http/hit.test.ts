/**
 * HIT serving on a real HTTP server over real stores (a temporary file store, bare and behind
 * the hot cache, and s3rver): proxy mode answers 200 with length and `Accept-Ranges`, one range
 * as 206, unsatisfiable ranges as 416 and everything else as the whole body; HEAD mirrors GET
 * without reading; an entry that vanished after the lookup is a `miss` with nothing written; a
 * short body tears the connection down; redirect mode answers a 302 whose Location fetches the
 * bytes, with its lifetime clamped by `exp`, and falls back to proxying when it cannot presign.
 */
import { randomBytes } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { mkdtemp, rm, truncate } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HitOutcome, lookupVariant, serveHit } from '../../src/http/hit.js';
import { FileVariantStore } from '../../src/store/file.js';
import { HotVariantCache } from '../../src/store/hotCache.js';
import { S3VariantStore } from '../../src/store/s3.js';
import { createS3Client } from '../../src/store/s3client.js';
import type { VariantStore } from '../../src/store/types.js';
import { type RawResponse, get as rawGet } from '../integration/harness.js';
import { chunksOf, META } from '../store/helpers.js';
import { type S3rverHandle, startS3rver } from '../store/s3rver.js';

const NOW_S = 1_900_000_000;
const ETAG = '"etag-of-the-url"';

interface Scenario {
  store: VariantStore;
  key: string;
  serveMode?: 'proxy' | 'redirect';
  presignTtlS?: number;
  exp?: number;
  corsHeaders?: Record<string, string>;
  betweenLookupAndServe?: () => Promise<void>;
}

let scenario: Scenario;
let lastOutcome: Promise<HitOutcome | 'no-entry'> = Promise.resolve('no-entry');
let server: Server;
let base: string;
let s3: S3rverHandle;
let root: string;
let disk: FileVariantStore;
let bucketStore: S3VariantStore;
const data = randomBytes(100_000);

async function handle(req: IncomingMessage, res: import('node:http').ServerResponse) {
  const s = scenario;
  const head = await lookupVariant(s.store, s.key);
  if (head === undefined) {
    res.writeHead(404);
    res.end();
    return 'no-entry' as const;
  }
  await s.betweenLookupAndServe?.();
  const outcome = await serveHit(req, res, {
    store: s.store,
    key: s.key,
    head,
    etag: ETAG,
    corsHeaders: s.corsHeaders ?? {},
    serveMode: s.serveMode ?? 'proxy',
    presignTtlS: s.presignTtlS ?? 300,
    nowS: NOW_S,
    format: 'mp3',
    ...(s.exp !== undefined ? { exp: s.exp } : {}),
  });
  if (outcome === 'miss') {
    // What the handler does next: render. Proves nothing had been written.
    res.writeHead(200, { 'x-audio-proxy': 'MISS' });
    res.end('rendered instead');
  }
  return outcome;
}

/** The harness's raw GET/HEAD (bytes, headers, whether the body ended cleanly) against `base`. */
function fetchRaw(
  path: string,
  opts: { method?: string; headers?: Record<string, string>; target?: string } = {},
): Promise<RawResponse> {
  return rawGet(opts.target ?? base, path, {
    ...(opts.method ? { method: opts.method } : {}),
    ...(opts.headers ? { headers: opts.headers } : {}),
  });
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ap-hit-'));
  disk = new FileVariantStore({ root });
  await disk.sweepStaging();
  await disk.put('v1', chunksOf(data), {
    ...META,
    contentDisposition: 'attachment; filename="v1.mp3"',
  });
  s3 = await startS3rver(['hits']);
  const config = s3.config({ AP_VARIANT_STORE: 's3://hits' });
  bucketStore = new S3VariantStore({ client: createS3Client(config.variantS3), bucket: 'hits' });
  await bucketStore.put('v1', chunksOf(data), META);
  server = createServer((req, res) => {
    lastOutcome = handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await bucketStore.close();
  await s3.close();
  await rm(root, { recursive: true, force: true });
});

describe.each([
  ['the file store', () => disk],
  ['the hot cache over it', () => new HotVariantCache(disk, { maxBytes: 1_000_000 })],
  ['the s3 store (proxy mode)', () => bucketStore],
])('proxy mode over %s', (_name, makeStore) => {
  it('200 with Content-Length, Accept-Ranges and the stored headers, twice', async () => {
    scenario = { store: makeStore(), key: 'v1' };
    for (let i = 0; i < 2; i++) {
      const r = await fetchRaw('/x');
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      expect(r.body.equals(data)).toBe(true);
      expect(r.headers['content-length']).toBe(String(data.length));
      expect(r.headers['accept-ranges']).toBe('bytes');
      expect(r.headers['content-type']).toBe('audio/mpeg');
      expect(r.headers['cache-control']).toBe(META.cacheControl);
      expect(r.headers.etag).toBe(ETAG);
      expect(r.headers['x-audio-proxy']).toBe('HIT');
      expect(r.headers['transfer-encoding']).toBeUndefined();
      expect(await lastOutcome).toBe('served');
    }
  });

  it('206 for one range: closed, open-ended, suffix, and an end clamped to the last byte', async () => {
    scenario = { store: makeStore(), key: 'v1' };
    const n = data.length;
    const cases: Array<[string, number, number]> = [
      ['bytes=0-9', 0, 9],
      ['bytes=99990-', n - 10, n - 1],
      ['bytes=-25', n - 25, n - 1],
      ['bytes=50-999999', 50, n - 1],
    ];
    for (const [range, start, end] of cases) {
      const r = await fetchRaw('/x', { headers: { range } });
      expect(r.status, range).toBe(206);
      expect(r.headers['content-range']).toBe(`bytes ${start}-${end}/${n}`);
      expect(r.headers['content-length']).toBe(String(end - start + 1));
      expect(r.body.equals(data.subarray(start, end + 1))).toBe(true);
    }
  });

  it('416 with bytes */size for a first byte past the end and for -0', async () => {
    scenario = { store: makeStore(), key: 'v1' };
    for (const range of [`bytes=${data.length}-`, 'bytes=-0']) {
      const r = await fetchRaw('/x', { headers: { range } });
      expect(r.status).toBe(416);
      expect(r.headers['content-range']).toBe(`bytes */${data.length}`);
      expect(r.headers['cache-control']).toBe('no-store');
      expect(JSON.parse(r.body.toString())).toEqual({
        error: 'range_not_satisfiable',
        message: 'Range not satisfiable',
      });
    }
  });

  it('multi-range, other units, malformed specs and last < first get the whole body', async () => {
    scenario = { store: makeStore(), key: 'v1' };
    for (const range of ['bytes=0-1,5-6', 'items=0-5', 'bytes=abc', 'bytes=9-3']) {
      const r = await fetchRaw('/x', { headers: { range } });
      expect(r.status, range).toBe(200);
      expect(r.body.equals(data)).toBe(true);
    }
  });

  it('HEAD mirrors GET, ranges included, without a body', async () => {
    scenario = { store: makeStore(), key: 'v1' };
    const get = await fetchRaw('/x');
    const head = await fetchRaw('/x', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    const { date: _a, ...getHeaders } = get.headers;
    const { date: _b, ...headHeaders } = head.headers;
    expect(headHeaders).toEqual(getHeaders);
    const ranged = await fetchRaw('/x', { method: 'HEAD', headers: { range: 'bytes=0-9' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers['content-length']).toBe('10');
  });
});

describe('proxy mode details', () => {
  it('replays the stored disposition and adds CORS headers to every answer', async () => {
    const cors = { 'access-control-allow-origin': '*', 'access-control-expose-headers': 'etag' };
    scenario = { store: disk, key: 'v1', corsHeaders: cors };
    const ok = await fetchRaw('/x');
    expect(ok.headers['content-disposition']).toBe('attachment; filename="v1.mp3"');
    expect(ok.headers['access-control-allow-origin']).toBe('*');
    const bad = await fetchRaw('/x', { headers: { range: 'bytes=-0' } });
    expect(bad.headers['access-control-allow-origin']).toBe('*');
  });

  it('clamps the stored cache policy to the URL expiry when the caller does not', async () => {
    scenario = { store: disk, key: 'v1', exp: NOW_S + 42 };
    const r = await fetchRaw('/x');
    expect(r.headers['cache-control']).toBe('public, max-age=42, immutable, no-transform');
  });

  it('an entry that vanished after the lookup is a miss: nothing written, the caller renders', async () => {
    await disk.put('gone1', chunksOf(data), META);
    scenario = { store: disk, key: 'gone1', betweenLookupAndServe: () => disk.delete('gone1') };
    const r = await fetchRaw('/x');
    expect(await lastOutcome).toBe('miss');
    expect(r.headers['x-audio-proxy']).toBe('MISS');
    expect(r.body.toString()).toBe('rendered instead');
  });

  it('a HEAD never reads the body, so it never falls back to a render', async () => {
    await disk.put('gone2', chunksOf(data), META);
    scenario = { store: disk, key: 'gone2', betweenLookupAndServe: () => disk.delete('gone2') };
    const r = await fetchRaw('/x', { method: 'HEAD' });
    expect(r.status).toBe(200);
    expect(r.headers['x-audio-proxy']).toBe('HIT');
    expect(await lastOutcome).toBe('served');
  });

  it('a body shorter than the declared length tears the connection down', async () => {
    for (const wrap of [false, true]) {
      await disk.put('short1', chunksOf(data), META);
      const store = wrap ? new HotVariantCache(disk, { maxBytes: 1_000_000 }) : disk;
      scenario = {
        store,
        key: 'short1',
        betweenLookupAndServe: () => truncate(disk.paths('short1').data, 1_000),
      };
      const r = await fetchRaw('/x');
      expect(r.headers['content-length']).toBe(String(data.length));
      expect(r.complete, `hot cache: ${wrap}`).toBe(false);
      expect(r.body.length).toBeLessThan(data.length);
    }
  });

  it('a client leaving mid-body ends the serve; the next request is served whole', async () => {
    const big = randomBytes(8 * 1024 * 1024);
    await disk.put('big1', chunksOf(big), META);
    scenario = { store: disk, key: 'big1' };
    await new Promise<void>((resolve) => {
      const req = request(new URL('/x', base), { agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.end();
    });
    expect(await lastOutcome).toBe('served');
    const again = await fetchRaw('/x');
    expect(again.body.equals(big)).toBe(true);
  });

  it('counts a served GET as a hit, never a HEAD', async () => {
    const seen: unknown[] = [];
    const listener = (m: unknown) => seen.push(m);
    diagnostics.subscribe('audio_proxy.cache.lookup', listener);
    try {
      scenario = { store: disk, key: 'v1' };
      await fetchRaw('/x', { method: 'HEAD' });
      expect(seen).toEqual([]);
      await fetchRaw('/x');
      expect(seen).toEqual([{ status: 'hit', format: 'mp3' }]);
    } finally {
      diagnostics.unsubscribe('audio_proxy.cache.lookup', listener);
    }
  });

  it('lookupVariant treats no store and an unreachable store as a miss', async () => {
    expect(await lookupVariant(undefined, 'v1')).toBeUndefined();
    const dead = s3.config({ AP_VARIANT_STORE: 's3://hits', AP_S3_ENDPOINT: 'http://127.0.0.1:9' });
    const offline = new S3VariantStore({ client: createS3Client(dead.variantS3), bucket: 'hits' });
    expect(await lookupVariant(offline, 'v1')).toBeUndefined();
    await offline.close();
  });
});

describe('redirect mode', () => {
  it('302 no-store to a presigned URL that fetches the variant', async () => {
    scenario = { store: bucketStore, key: 'v1', serveMode: 'redirect', presignTtlS: 300 };
    const r = await fetchRaw('/x');
    expect(r.status).toBe(302);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.headers['x-audio-proxy']).toBe('HIT');
    const location = String(r.headers.location);
    expect(location).toContain('X-Amz-Expires=300');
    const fetched = await fetch(location);
    expect(fetched.status).toBe(200);
    expect(Buffer.from(await fetched.arrayBuffer()).equals(data)).toBe(true);
    const head = await fetchRaw('/x', { method: 'HEAD' });
    expect(head.status).toBe(302);
  });

  it('the URL lifetime is clamped by exp; with 0 s left the variant is proxied', async () => {
    scenario = {
      store: bucketStore,
      key: 'v1',
      serveMode: 'redirect',
      presignTtlS: 300,
      exp: NOW_S + 30,
    };
    const r = await fetchRaw('/x');
    expect(String(r.headers.location)).toContain('X-Amz-Expires=30');
    scenario = { ...scenario, exp: NOW_S };
    const proxied = await fetchRaw('/x');
    expect(proxied.status).toBe(200);
    expect(proxied.headers['cache-control']).toBe('public, max-age=0, immutable, no-transform');
    expect(proxied.body.equals(data)).toBe(true);
  });

  it('a presign failure, or a store that cannot presign, is proxied', async () => {
    scenario = { store: bucketStore, key: 'v1', serveMode: 'redirect', presignTtlS: 10_000_000 };
    const failed = await fetchRaw('/x');
    expect(failed.status).toBe(200);
    expect(failed.body.equals(data)).toBe(true);
    scenario = { store: disk, key: 'v1', serveMode: 'redirect' };
    const file = await fetchRaw('/x');
    expect(file.status).toBe(200);
    expect(file.body.equals(data)).toBe(true);
  });
});
