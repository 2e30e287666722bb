/**
 * Ranges while rendering, and exact lengths, through the real server (loopback HTTP, real
 * ffmpeg, a real file store). Proves:
 * - an exact-length WAV MISS carries `Content-Length` and `Accept-Ranges` like a HIT, and over
 *   many sources and options (`t:`, `sr`, `ch`, `bd`, `gain`) the announced length = the
 *   delivered length = the stored length, byte for byte the HIT's, and ffprobe reads the WAV's
 *   exact sample count;
 * - a `Range` on a MISS and on a COALESCED join is a 206 byte-identical to the same range of the
 *   later HIT (known total: `a-b/total`; unknown total, mp3: `a-b/*`), open and suffix ranges
 *   included, and never a second render;
 * - a range beyond what is rendered waits, then arrives (ffmpeg run at real time with `-re`);
 * - 416 once the total is known and the range is past it (an exact WAV: before any render);
 * - `If-None-Match` is 304 and HEAD is answered without any render, `Range` or not; CORS
 *   exposes `Content-Range` and `Accept-Ranges`.
 * Takes about 20 s on two cores (two servers; the `-re` renders run at real time).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VariantStore } from '../../src/store/types.js';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import {
  expectSameButInfoFrame,
  get,
  type Harness,
  type RawResponse,
  startHarness,
  waitFor,
} from './harness.js';

function storeOf(h: Harness): VariantStore {
  const store = (h.proxy as unknown as { store?: VariantStore }).store;
  if (!store) throw new Error('the proxy exposes no store');
  return store;
}

const keyOf = (etag: string | string[] | undefined) =>
  String(etag).replace(/^W\//, '').replaceAll('"', '');

let cbSeq = 0;
/** A fresh variant of `options` (a cache buster no other request used): its first GET is a MISS. */
const fresh = (options: string, source: string) =>
  `/insecure/${options}/cb:r${process.pid}x${++cbSeq}/plain/local://${source}`;

/** Waits until the render of `path` is stored, then fetches it as a HIT. */
async function hitOf(h: Harness, path: string, etag: string | string[] | undefined) {
  const key = keyOf(etag);
  await waitFor(async () => (await storeOf(h).head(key)) !== undefined, 20_000);
  const hit = await get(h.url, path);
  expect(hit.headers['x-audio-proxy']).toBe('HIT');
  expect(hit.status).toBe(200);
  return hit.body;
}

/** Generates a tone source next to the fixtures (once). */
async function toneSource(dir: string, name: string, lavfi: string, extra: string[] = []) {
  const target = join(dir, name);
  if (await stat(target).catch(() => null)) return name;
  const tmp = `${target}.${process.pid}.part${name.slice(name.lastIndexOf('.'))}`;
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', lavfi, ...extra, tmp],
  ]);
  await rename(tmp, target);
  return name;
}

function expectRange(r: RawResponse, start: number, end: number, total: number | '*') {
  expect(r.status).toBe(206);
  expect(r.headers['content-range']).toBe(`bytes ${start}-${end}/${total}`);
  expect(r.headers['content-length']).toBe(String(end - start + 1));
  expect(r.headers['accept-ranges']).toBe('bytes');
  expect(r.body.length).toBe(end - start + 1);
  expect(r.complete).toBe(true);
}

describe('exact lengths and ranges on a MISS', () => {
  let h: Harness;
  let root: string;
  let mono48: string;
  let surround: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-range-'));
    h = await startHarness({
      AP_VARIANT_STORE: `file://${root}`,
      AP_SERVE_MODE: 'proxy',
      AP_ALLOW_ORIGIN: '*',
    });
    mono48 = await toneSource(
      h.fixtures.dir,
      'range-mono48.flac',
      'sine=frequency=330:sample_rate=48000:duration=1.7',
    );
    surround = await toneSource(
      h.fixtures.dir,
      'range-6ch.wav',
      'sine=frequency=220:sample_rate=32000:duration=1.3',
      ['-ac', '6'],
    );
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('announced = delivered = stored for exact WAVs over sources and options', async () => {
    const sources = ['stereo.wav', 'mono.mp3', 'tiny.flac', mono48, surround];
    const ffprobe = resolveFfprobe({ env: process.env }).path;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...sources),
        fc.option(
          fc
            .tuple(
              fc.integer({ min: 0, max: 3_500 }),
              fc.option(fc.integer({ min: 1, max: 2_500 })),
            )
            .map(([s, d]) => `t:${s / 1000}${d === null ? '' : `:${d / 1000}`}`),
        ),
        fc.option(fc.constantFrom('sr:8000', 'sr:22050', 'sr:44100', 'sr:96000')),
        fc.option(fc.constantFrom('ch:1', 'ch:2')),
        fc.option(fc.constantFrom('bd:16', 'bd:24', 'bd:32f')),
        fc.option(fc.constantFrom('gain:-3', 'gain:2.5')),
        async (source, trim, sr, ch, bd, gain) => {
          const options = ['f:wav', trim, sr, ch, bd, gain].filter(Boolean).join('/');
          const path = fresh(options, source);
          const miss = await get(h.url, path);
          expect(miss.status, options).toBe(200);
          expect(miss.headers['x-audio-proxy']).toBe('MISS');
          expect(miss.headers['accept-ranges']).toBe('bytes');
          const announced = Number(miss.headers['content-length']);
          expect(miss.body.length, options).toBe(announced);
          expect(miss.complete).toBe(true);
          const hit = await hitOf(h, path, miss.headers.etag);
          expect(hit.equals(miss.body), options).toBe(true);
          // The header's sizes are the file's, and ffprobe counts exactly the frames it says.
          expect(miss.body.readUInt32LE(4)).toBe(announced - 8);
          const dataBytes = miss.body.readUInt32LE(40);
          expect(dataBytes).toBe(announced - 44);
          const blockAlign = miss.body.readUInt16LE(32);
          const file = join(root, `probe-${cbSeq}.wav`);
          await writeFile(file, miss.body);
          const probed = JSON.parse(
            execFileSync(ffprobe, [
              ...['-v', 'error', '-show_entries', 'stream=duration_ts', '-of', 'json', file],
            ]).toString(),
          ) as { streams: { duration_ts?: number }[] };
          await rm(file);
          expect(probed.streams[0]!.duration_ts, options).toBe(dataBytes / blockAlign);
        },
      ),
      { numRuns: 14 },
    );
  }, 120_000);

  it('a flac MISS carries its exact sample count from the first byte, as the stored one does', async () => {
    const ffprobe = resolveFfprobe({ env: process.env }).path;
    const ffmpeg = resolveFfmpeg({ env: process.env }).path;
    // [source, options, source duration s, output rate]
    const cases: [string, string, number, number][] = [
      ['stereo.wav', 'f:flac', 3, 44_100],
      ['stereo.wav', 'f:flac/t:0.25:1.5/sr:22050', 3, 22_050],
      ['mono.mp3', 'f:flac/t:1.5', 2, 44_100],
      ['tiny.flac', 'f:flac/t:0.2:5/bd:16', 1, 48_000],
    ];
    for (const [source, options, seconds, rate] of cases) {
      const path = fresh(options, source);
      const miss = await get(h.url, path);
      expect(miss.status).toBe(200);
      const hit = await hitOf(h, path, miss.headers.etag);
      expect(hit.equals(miss.body), options).toBe(true);
      const trim = /t:([\d.]+)(?::([\d.]+))?/.exec(options);
      const start = trim ? Number(trim[1]) : 0;
      const window = Math.min(trim?.[2] ? Number(trim[2]) : Infinity, seconds - start);
      const expected = Math.round(window * rate);
      const file = join(root, `probe-${cbSeq}.flac`);
      await writeFile(file, hit);
      const probed = JSON.parse(
        execFileSync(ffprobe, [
          ...[
            '-v',
            'error',
            '-show_entries',
            'stream=duration_ts,sample_rate',
            '-of',
            'json',
            file,
          ],
        ]).toString(),
      ) as { streams: { duration_ts?: number; sample_rate: string }[] };
      const decoded = execFileSync(ffmpeg, [
        ...['-v', 'error', '-i', file, '-f', 's16le', '-ac', '1', 'pipe:1'],
      ]);
      await rm(file);
      // The header says the count (mp3 sources: their probed duration is an estimate, and the
      // render is cut or padded to it), and decoding yields exactly that many samples.
      if (source !== 'mono.mp3') expect(probed.streams[0]!.duration_ts, options).toBe(expected);
      expect(Number(probed.streams[0]!.sample_rate)).toBe(rate);
      expect(decoded.length / 2, options).toBe(probed.streams[0]!.duration_ts);
    }
  }, 60_000);

  it('an exact WAV answers a range on its MISS like its HIT, and a 416 before any render', async () => {
    const path = fresh('f:wav/t:0.5:2', 'stereo.wav');
    const total = 44 + Math.round(2 * 44_100) * 4;
    const spawned = (await h.spawns()).length;
    const past = await get(h.url, path, { headers: { range: `bytes=${total}-` } });
    expect(past.status).toBe(416);
    expect(past.headers['content-range']).toBe(`bytes */${total}`);
    expect((await h.spawns()).length).toBe(spawned); // no render for a range past a known end

    const miss = await get(h.url, path, { headers: { range: 'bytes=1000-50999' } });
    expect(miss.headers['x-audio-proxy']).toBe('MISS');
    expectRange(miss, 1000, 50_999, total);
    expect(miss.headers['access-control-expose-headers']).toContain('content-range');
    expect(miss.headers['access-control-expose-headers']).toContain('accept-ranges');
    const hit = await hitOf(h, path, miss.headers.etag);
    expect(miss.body.equals(hit.subarray(1000, 51_000))).toBe(true);
    const hitRange = await get(h.url, path, { headers: { range: 'bytes=1000-50999' } });
    expect(hitRange.headers['content-range']).toBe(miss.headers['content-range']);
  }, 30_000);

  it('an mp3 MISS answers closed, open and suffix ranges with the HIT bytes (total unknown)', async () => {
    const closedPath = fresh('f:mp3/t:0:2/q:2', 'stereo.wav');
    const closed = await get(h.url, closedPath, { headers: { range: 'bytes=500-1499' } });
    expect(closed.headers['x-audio-proxy']).toBe('MISS');
    expectRange(closed, 500, 1499, '*');
    const closedHit = await hitOf(h, closedPath, closed.headers.etag);
    expect(closed.body.equals(closedHit.subarray(500, 1500))).toBe(true);

    const openPath = fresh('f:mp3/t:0:2/q:3', 'stereo.wav');
    const open = await get(h.url, openPath, { headers: { range: 'bytes=700-' } });
    expect(open.status).toBe(206);
    const [, start, end, total] = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(
      String(open.headers['content-range']),
    )!;
    expect(Number(start)).toBe(700);
    const openHit = await hitOf(h, openPath, open.headers.etag);
    if (total !== '*') expect(Number(total)).toBe(openHit.length);
    expect(open.body.equals(openHit.subarray(700, Number(end) + 1))).toBe(true);

    const suffixPath = fresh('f:mp3/t:0:2/q:4', 'stereo.wav');
    const suffix = await get(h.url, suffixPath, { headers: { range: 'bytes=-300' } });
    const suffixHit = await hitOf(h, suffixPath, suffix.headers.etag);
    const n = suffixHit.length;
    expectRange(suffix, n - 300, n - 1, n);
    expect(suffix.body.equals(suffixHit.subarray(n - 300))).toBe(true);

    const pastPath = fresh('f:mp3/t:0:2/q:5', 'stereo.wav');
    const past = await get(h.url, pastPath, { headers: { range: 'bytes=900000-' } });
    expect(past.status).toBe(416);
    const pastHit = await hitOf(
      h,
      pastPath,
      past.headers.etag ?? `"${await keyFromHead(pastPath)}"`,
    );
    expect(past.headers['content-range']).toBe(`bytes */${pastHit.length}`);
  }, 60_000);

  it('HEAD and If-None-Match never render, Range or not', async () => {
    const path = fresh('f:mp3/t:0:1', 'stereo.wav');
    const spawned = (await h.spawns()).length;
    const head = await get(h.url, path, { method: 'HEAD', headers: { range: 'bytes=0-99' } });
    expect(head.status).toBe(200);
    expect(head.headers['x-audio-proxy']).toBe('MISS');
    const etag = String(head.headers.etag);
    const cond = await get(h.url, path, {
      headers: { range: 'bytes=0-99', 'if-none-match': etag },
    });
    expect(cond.status).toBe(304);
    expect((await h.spawns()).length).toBe(spawned);
  });

  /** The ETag a HEAD names for `path` (a 416 carries none), without rendering. */
  async function keyFromHead(path: string): Promise<string> {
    return keyOf((await get(h.url, path, { method: 'HEAD' })).headers.etag);
  }
});

describe('ranges on a render in progress (ffmpeg at real time)', () => {
  let h: Harness;
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-range-re-'));
    // `-re` reads the input at its own pace: a 3 s source renders in 3 s, so "not rendered yet"
    // is a fact of the clock, not of the machine's load.
    h = await startHarness(
      { AP_VARIANT_STORE: `file://${root}`, AP_SERVE_MODE: 'proxy' },
      { ffmpegArgs: ['-re'] },
    );
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('a range already rendered comes at once, one beyond waits and then arrives; one render', async () => {
    const path = fresh('f:wav', 'stereo.wav');
    const total = 44 + 3 * 44_100 * 4;
    const spawned = (await h.spawns()).length;
    const t0 = performance.now();
    let firstHead = 0;
    let firstTail = 0;
    const head = get(h.url, path, {
      headers: { range: 'bytes=0-999' },
      onFirstByte: () => {
        firstHead = performance.now() - t0;
      },
    });
    // Joins the render the first request started (the same key), for its last kilobyte.
    await new Promise((r) => setTimeout(r, 100));
    const tail = get(h.url, path, {
      headers: { range: `bytes=${total - 1000}-${total - 1}` },
      onFirstByte: () => {
        firstTail = performance.now() - t0;
      },
    });
    const [a, b] = await Promise.all([head, tail]);
    expectRange(a, 0, 999, total);
    expectRange(b, total - 1000, total - 1, total);
    // The first kilobyte is rendered at once; the last one only when the render (3 s of audio at
    // real time) reaches it. The gap is the render's clock, whatever the machine's load adds.
    expect(firstTail - firstHead).toBeGreaterThan(1_500);
    expect((await h.spawns()).length).toBe(spawned + 1);
    const hit = await hitOf(h, path, a.headers.etag);
    expect(hit.length).toBe(total);
    expect(a.body.equals(hit.subarray(0, 1000))).toBe(true);
    expect(b.body.equals(hit.subarray(total - 1000))).toBe(true);
  }, 30_000);

  it('COALESCED joins of an mp3 render (total unknown): closed and suffix ranges, one render', async () => {
    // The whole 3 s source: ffmpeg writes in 16 KiB blocks (1 s of this mp3), so the joins get
    // the render's last 2 s to arrive in, not its last one.
    const path = fresh('f:mp3', 'stereo.wav');
    const spawned = (await h.spawns()).length;
    let started!: () => void;
    const firstByte = new Promise<void>((r) => {
      started = r;
    });
    const whole = get(h.url, path, { onFirstByte: () => started() });
    await firstByte;
    const [closed, suffix] = await Promise.all([
      get(h.url, path, { headers: { range: 'bytes=100-599' } }),
      get(h.url, path, { headers: { range: 'bytes=-250' } }),
    ]);
    const miss = await whole;
    expect(miss.status).toBe(200);
    expect(miss.headers['x-audio-proxy']).toBe('MISS');
    expect(closed.headers['x-audio-proxy']).toBe('COALESCED');
    expect(suffix.headers['x-audio-proxy']).toBe('COALESCED');
    expectRange(closed, 100, 599, '*');
    const n = miss.body.length;
    expectRange(suffix, n - 250, n - 1, n);
    expect((await h.spawns()).length).toBe(spawned + 1);
    const hit = await hitOf(h, path, miss.headers.etag);
    // The stored mp3's info frame (bytes 45-252 here) was completed at commit; the streamed
    // answers all carry the same placeholder, and every other byte is the HIT's.
    expectSameButInfoFrame(miss.body, hit);
    expect(closed.body.equals(miss.body.subarray(100, 600))).toBe(true);
    expect(suffix.body.equals(hit.subarray(n - 250))).toBe(true);
  }, 30_000);
});
