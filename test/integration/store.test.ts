/**
 * The variant store through the real server (real ffmpeg, a real file store in a temp directory,
 * s3rver for redirect mode). Proves: the second request for a variant is a HIT with identical
 * bytes for every format and for peaks, with no new ffmpeg spawn; Range gives 206/416 on a HIT
 * and HEAD mirrors it; a HIT survives deletion of its source; a render whose client left still
 * lands in the store; redirect mode answers a 302 whose Location fetches the variant; and
 * stopping the server mid-render leaves no partial object (file and S3). A bounded file store
 * evicts its least recently used variant (a MISS again, same ETag and bytes) and /metrics
 * counts it; a variant over the bound reaches its client whole, is not kept, and is counted
 * as such, not as a write failure.
 *
 * Written against the store seams (`proxy.store`): every test skips itself while the proxy does
 * not expose a store yet, and runs unchanged once it does.
 */
import { execFileSync } from 'node:child_process';
import { copyFile, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileVariantStore } from '../../src/store/file.js';
import type { VariantStore } from '../../src/store/types.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { type S3rverHandle, startS3rver } from '../store/s3rver.js';
import { expectSameButInfoFrame, get, type Harness, startHarness, waitFor } from './harness.js';

function storeOf(h: Harness): VariantStore | undefined {
  return (h.proxy as unknown as { store?: VariantStore }).store;
}

/** Whether the first harness exposed a store; later suites skip their own server when not. */
let wired: boolean | undefined;

const keyOf = (etag: string | string[] | undefined) =>
  String(etag).replace(/^W\//, '').replaceAll('"', '');

/** A 40 s stereo tone next to the fixtures (a render long enough to interrupt). */
async function longSource(dir: string): Promise<string> {
  const name = 'store-long.wav';
  const target = join(dir, name);
  if (await stat(target).catch(() => null)) return name;
  const tmp = `${target}.${process.pid}.part.wav`;
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
    ...['-i', 'sine=frequency=220:sample_rate=44100:duration=40', '-ac', '2', tmp],
  ]);
  await rename(tmp, target);
  return name;
}

/** Renders `path` once (MISS) and waits until the tee committed it. */
async function renderAndStore(h: Harness, path: string) {
  const first = await get(h.url, path);
  expect(first.status).toBe(200);
  expect(first.headers['x-audio-proxy']).toBe('MISS');
  const key = keyOf(first.headers.etag);
  await waitFor(async () => (await storeOf(h)!.head(key)) !== undefined, 15_000);
  return { first, key };
}

/** Renders `path`, then proves the second request is a byte-identical HIT with no new spawn. */
async function secondIsHit(h: Harness, path: string) {
  const { first } = await renderAndStore(h, path);
  const spawned = (await h.spawns()).length;
  const second = await get(h.url, path);
  expect(second.status).toBe(200);
  expect(second.headers['x-audio-proxy']).toBe('HIT');
  expect(second.headers['content-length']).toBe(String(first.body.length));
  expect(second.headers['accept-ranges']).toBe('bytes');
  expect(second.headers['content-type']).toBe(first.headers['content-type']);
  expect(second.headers['cache-control']).toBe(first.headers['cache-control']);
  if (first.headers['content-type'] === 'audio/mpeg') {
    // An mp3's info frame is completed at commit; the ETag is the key all the same.
    expect(first.headers.etag).toBe(second.headers.etag);
    expectSameButInfoFrame(first.body, second.body);
  } else {
    expect(second.headers.etag).toBe(first.headers.etag);
    expect(second.body.equals(first.body)).toBe(true);
  }
  expect((await h.spawns()).length).toBe(spawned);
}

describe('file store, proxy mode', () => {
  let h: Harness;
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-store-'));
    h = await startHarness({ AP_VARIANT_STORE: `file://${root}`, AP_SERVE_MODE: 'proxy' });
    wired = storeOf(h) !== undefined;
  });
  afterAll(async () => {
    await h.close();
    await rm(root, { recursive: true, force: true });
  });

  for (const format of ['mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav']) {
    it(`f:${format}: the second request is a HIT with identical bytes and no new render`, async (ctx) => {
      if (!storeOf(h)) ctx.skip();
      await secondIsHit(h, `/insecure/f:${format}/t:0:2/plain/local://stereo.wav`);
    });
  }

  it('Range on a HIT: 206 with Content-Range, 416 past the end; HEAD mirrors GET', async (ctx) => {
    if (!storeOf(h)) ctx.skip();
    const path = '/insecure/f:mp3/t:0:1/cb:range/plain/local://stereo.wav';
    const { first } = await renderAndStore(h, path);
    const size = first.body.length;
    const part = await get(h.url, path, { headers: { range: 'bytes=10-19' } });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 10-19/${size}`);
    expect(part.body.equals(first.body.subarray(10, 20))).toBe(true);
    const suffix = await get(h.url, path, { headers: { range: 'bytes=-5' } });
    expect(suffix.body.equals(first.body.subarray(-5))).toBe(true);
    const none = await get(h.url, path, { headers: { range: `bytes=${size}-` } });
    expect(none.status).toBe(416);
    expect(none.headers['content-range']).toBe(`bytes */${size}`);
    const multi = await get(h.url, path, { headers: { range: 'bytes=0-1,4-5' } });
    expect(multi.status).toBe(200);
    const head = await get(h.url, path, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers['x-audio-proxy']).toBe('HIT');
    expect(head.headers['content-length']).toBe(String(size));
    expect(head.body.length).toBe(0);
  });

  it('a HIT survives deletion of its source', async (ctx) => {
    if (!storeOf(h)) ctx.skip();
    await copyFile(join(h.fixtures.dir, 'stereo.wav'), join(h.fixtures.dir, 'doomed.wav'));
    const path = '/insecure/f:mp3/t:0:1/plain/local://doomed.wav';
    const { first } = await renderAndStore(h, path);
    await rm(join(h.fixtures.dir, 'doomed.wav'));
    const again = await get(h.url, path);
    expect(again.headers['x-audio-proxy']).toBe('HIT');
    expectSameButInfoFrame(first.body, again.body);
  });

  it('a render whose only client left still completes into the store', async (ctx) => {
    if (!storeOf(h)) ctx.skip();
    const long = await longSource(h.fixtures.dir);
    const path = `/insecure/f:opus/cb:left/plain/local://${long}`;
    const ac = new AbortController();
    let etag: string | undefined;
    await get(h.url, path, {
      signal: ac.signal,
      onFirstByte: () => ac.abort(),
    }).catch(() => null);
    const probe = await get(h.url, path, { method: 'HEAD' });
    etag = String(probe.headers.etag);
    await waitFor(async () => (await storeOf(h)!.head(keyOf(etag))) !== undefined, 20_000);
    const hit = await get(h.url, path);
    expect(hit.headers['x-audio-proxy']).toBe('HIT');
    expect(hit.complete).toBe(true);
  });
});

// Peaks get their own server: a peaks failure must not take the audio tests' slots with it.
describe('file store, proxy mode: peaks', () => {
  let h: Harness | undefined;
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-peaks-'));
    if (wired === false) return;
    h = await startHarness({ AP_VARIANT_STORE: `file://${root}`, AP_SERVE_MODE: 'proxy' });
  });
  afterAll(async () => {
    await h?.close();
    await rm(root, { recursive: true, force: true });
  });

  for (const options of ['f:peaks', 'f:peaks/pk_fmt:dat']) {
    it(`${options}: the second request is a HIT with identical bytes and no new render`, async (ctx) => {
      if (!h || !storeOf(h)) return ctx.skip();
      await secondIsHit(h, `/insecure/${options}/t:0:2/plain/local://stereo.wav`);
    });
  }
});

describe('file store with a bound (AP_VARIANT_STORE_MAX_BYTES)', () => {
  let h: Harness;
  let root: string;
  const MAX = 1024 * 1024;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-bounded-'));
    // No hot cache: an evicted variant must come from disk or not at all.
    h = await startHarness({
      AP_VARIANT_STORE: `file://${root}`,
      AP_VARIANT_STORE_MAX_BYTES: String(MAX),
      AP_SERVE_MODE: 'proxy',
      AP_HIT_CACHE_BYTES: '0',
    });
  });
  afterAll(async () => {
    await h.close();
    await rm(root, { recursive: true, force: true });
  });

  /** Renders and stores `path`, and waits until the store's index has recorded the commit (a
   *  moment after the rename makes it visible), so the recency the test sets up is the store's. */
  const renderAndIndex = async (path: string) => {
    const stored = await renderAndStore(h, path);
    const store = storeOf(h) as FileVariantStore;
    await waitFor(async () => store.heldKeys().includes(stored.key), 5_000);
    return stored;
  };

  const metric = async (name: string) => {
    const { body } = await h.proxy.metrics.expose();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(body);
    return m ? Number(m[1]) : undefined;
  };

  it('evicts the least recently used variant, which is a MISS again; /metrics counts it', async (ctx) => {
    if (!storeOf(h)) ctx.skip();
    // Three 2 s stereo wavs (~353 kB each): two fit in 1 MiB, the third evicts the older one.
    const path = (cb: string) => `/insecure/f:wav/t:0:2/cb:${cb}/plain/local://stereo.wav`;
    const a = await renderAndIndex(path('a'));
    const b = await renderAndIndex(path('b'));
    expect((await get(h.url, path('a'))).headers['x-audio-proxy']).toBe('HIT'); // a is now recent
    const c = await renderAndIndex(path('c'));
    expect(await storeOf(h)!.head(b.key)).toBeUndefined();
    expect(await storeOf(h)!.head(a.key)).toBeDefined();
    expect(await storeOf(h)!.head(c.key)).toBeDefined();
    expect(await metric('audio_proxy_variant_store_evictions_total')).toBe(1);
    const held = await metric('audio_proxy_variant_store_bytes');
    expect(held).toBeLessThanOrEqual(MAX);
    expect(held).toBeGreaterThan(2 * a.first.body.length);
    expect(await metric('audio_proxy_variant_store_max_bytes')).toBe(MAX);
    expect(await metric('audio_proxy_variant_store_variants')).toBe(2);
    const again = await get(h.url, path('b'));
    expect(again.headers['x-audio-proxy']).not.toBe('HIT');
    expect(again.headers.etag).toBe(b.first.headers.etag);
    expect(again.body.equals(b.first.body)).toBe(true);
  });

  it('a variant larger than the bound reaches its client whole and is not kept, nor a write failure', async (ctx) => {
    if (!storeOf(h)) ctx.skip();
    const long = await longSource(h.fixtures.dir); // 40 s stereo wav: ~7 MB
    const path = `/insecure/f:wav/cb:huge/plain/local://${long}`;
    const res = await get(h.url, path);
    expect(res.status).toBe(200);
    expect(res.body.length).toBeGreaterThan(MAX);
    expect(res.body.length).toBe(Number(res.headers['content-length'] ?? res.body.length));
    await waitFor(
      async () => (await metric('audio_proxy_variant_store_oversize_total')) === 1,
      15_000,
    );
    expect(await storeOf(h)!.head(keyOf(res.headers.etag))).toBeUndefined();
    expect(await metric('audio_proxy_variant_store_write_failures_total')).toBe(0);
    expect(await new FileVariantStore({ root }).staging()).toEqual([]);
    expect((await get(h.url, path)).headers['x-audio-proxy']).not.toBe('HIT');
  });
});

describe('stopping the server mid-render leaves no partial object', () => {
  let s3: S3rverHandle;
  beforeAll(async () => {
    s3 = await startS3rver(['itest-stop']);
  });
  afterAll(async () => {
    await s3.close();
  });

  for (const kind of ['file', 's3'] as const) {
    it(`${kind} store`, async (ctx) => {
      if (wired === false) ctx.skip();
      const root = await mkdtemp(join(tmpdir(), 'ap-itest-stop-'));
      const env =
        kind === 'file'
          ? { AP_VARIANT_STORE: `file://${root}`, AP_SERVE_MODE: 'proxy' }
          : s3.env({ AP_VARIANT_STORE: 's3://itest-stop', AP_SERVE_MODE: 'proxy' });
      const h = await startHarness(env);
      try {
        const store = storeOf(h);
        if (!store) ctx.skip();
        const long = await longSource(h.fixtures.dir);
        const path = `/insecure/f:wav/cb:stop/plain/local://${long}`;
        let etag = '';
        let closing: Promise<void> | undefined;
        await get(h.url, path, {
          onFirstByte: () => {
            // No drain: the render is cut mid-way (with the default drain it would finish whole).
            closing = h.proxy.close({ drainMs: 0 });
          },
        })
          .then((r) => {
            etag = String(r.headers.etag);
          })
          .catch(() => null);
        await closing;
        const key = keyOf(etag);
        expect(key).toMatch(/^[0-9a-f]{64}$/);
        expect(await store!.head(key)).toBeUndefined();
        if (kind === 'file') {
          const disk = new FileVariantStore({ root });
          expect(await disk.head(key)).toBeUndefined();
          expect(await disk.staging()).toEqual([]);
        }
      } finally {
        await h.close().catch(() => {});
        await rm(root, { recursive: true, force: true });
      }
    });
  }
});

describe('s3 store, redirect mode', () => {
  let s3: S3rverHandle;
  let h: Harness | undefined;
  beforeAll(async () => {
    s3 = await startS3rver(['itest-variants']);
    if (wired === false) return;
    h = await startHarness(
      s3.env({ AP_VARIANT_STORE: 's3://itest-variants', AP_SERVE_MODE: 'redirect' }),
    );
  });
  afterAll(async () => {
    await h?.close();
    await s3.close();
  });

  it('the second request is a 302 whose Location fetches the variant', async (ctx) => {
    if (!h || !storeOf(h)) return ctx.skip();
    const path = '/insecure/f:mp3/t:0:1/plain/local://stereo.wav';
    const { first } = await renderAndStore(h, path);
    const second = await get(h.url, path);
    expect(second.status).toBe(302);
    expect(second.headers['cache-control']).toBe('no-store');
    expect(second.headers['x-audio-proxy']).toBe('HIT');
    const fetched = await fetch(String(second.headers.location));
    expect(fetched.status).toBe(200);
    expectSameButInfoFrame(first.body, Buffer.from(await fetched.arrayBuffer()));
  });

  it('peaks are stored and redirected too', async (ctx) => {
    if (!h || !storeOf(h)) return ctx.skip();
    const path = '/insecure/f:peaks/pts:100/plain/local://stereo.wav';
    const { first } = await renderAndStore(h, path);
    const second = await get(h.url, path);
    expect(second.status).toBe(302);
    const fetched = await fetch(String(second.headers.location));
    expect(Buffer.from(await fetched.arrayBuffer()).equals(first.body)).toBe(true);
  });
});
