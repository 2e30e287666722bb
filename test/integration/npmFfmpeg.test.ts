/**
 * The fresh-machine fallback: the ffmpeg and ffprobe binaries shipped inside npm packages (a 2018
 * and a 2023 static build). A newcomer without a system ffmpeg gets these, so the render path,
 * the probe gate and /info must work with them; what that ffmpeg lacks (`deesser`, so
 * `enhance:voice`) is listed at boot, on /health, and answered 501 `unsupported_option` before
 * any probe or slot. The whole demo (the real CLI) prints only URLs that answer 200 with audio,
 * and an option matrix (every format with every option) answers each request with audio or the
 * documented error, never a 500.
 */
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORMATS } from '../../src/core/variant.js';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { type BinProcess, startBin } from '../binProcess.js';
import { freePort } from '../ports.js';
import { get, type Harness, type RawResponse, startHarness, waitFor } from './harness.js';

const require = createRequire(import.meta.url);
const npmFfmpeg = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const npmFfprobe = (require('@ffprobe-installer/ffprobe') as { path: string }).path;

/** What the npm 2018 build lacks, as /health and the boot log name it. */
const MISSING = { 'enhance:voice': ['filter deesser'] };
const DEESSER_MESSAGE =
  'enhance:voice needs the ffmpeg filter "deesser", which this server\'s ffmpeg does not have';
/** How many matrix requests are in flight at once (the proxy renders 2, the rest queue). */
const MATRIX_CONCURRENCY = 4;

/** The first bytes of each audio format: proof the body is that audio, not an error page. */
const MAGIC: Record<string, (b: Buffer) => boolean> = {
  'audio/mpeg': (b) => b.subarray(0, 3).toString() === 'ID3' || (b[0] === 0xff && b[1]! >= 0xe0),
  'audio/ogg': (b) => b.subarray(0, 4).toString() === 'OggS',
  'audio/aac': (b) => b[0] === 0xff && (b[1]! & 0xf6) === 0xf0,
  'audio/mp4': (b) => b.subarray(4, 8).toString() === 'ftyp',
  'audio/flac': (b) => b.subarray(0, 4).toString() === 'fLaC',
  'audio/wav': (b) => b.subarray(0, 4).toString() === 'RIFF',
  'application/json': (b) => typeof JSON.parse(b.toString()) === 'object',
  'application/vnd.apple.mpegurl': (b) => b.subarray(0, 7).toString() === '#EXTM3U',
};

/** A 200 carrying a complete body of the type it says, or a row of the error table; never a 500. */
function expectAudioOrDocumented(path: string, r: RawResponse): void {
  expect(r.status, `${path}: ${r.body}`).not.toBe(500);
  const type = String(r.headers['content-type']);
  if (r.status === 200) {
    expect(r.complete, path).toBe(true);
    expect(r.body.length, path).toBeGreaterThan(0);
    expect(MAGIC[type]?.(r.body), `${path}: ${type}`).toBe(true);
    return;
  }
  const body = JSON.parse(r.body.toString()) as { error: string; message: string };
  const row = ERROR_TABLE.find((e) => e.error === body.error && e.status === r.status);
  expect(row, `${path}: ${r.status} ${r.body}`).toBeDefined();
  expect(r.headers['cache-control'], path).toBe(row!.cacheControl);
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ AP_FFPROBE_PATH: npmFfprobe }, { ffmpegTarget: npmFfmpeg });
});
afterAll(async () => {
  await h.close();
});

describe('npm-shipped ffmpeg and ffprobe', () => {
  it('renders mp3 and opus and answers /info', async () => {
    const mp3 = await get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
    expect(mp3.status).toBe(200);
    expect(mp3.complete).toBe(true);
    expect(mp3.body.length).toBeGreaterThan(1_000);
    const opus = await get(h.url, '/insecure/f:opus/plain/local://stereo.wav');
    expect(opus.status).toBe(200);
    expect(opus.body.subarray(0, 4).toString()).toBe('OggS');
    const info = await get(h.url, '/insecure/info/plain/local://stereo.wav');
    expect(info.status).toBe(200);
    expect(JSON.parse(info.body.toString())).toMatchObject({ format: 'wav', channels: 2 });
    expect((await h.spawns()).length).toBe(2);
  });

  it('lists what it lacks once at boot, on /health, and refuses it before any probe or slot', async () => {
    expect(await h.listings()).toHaveLength(4);
    const health = await get(h.url, '/health');
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body.toString())).toMatchObject({
      status: 'ok',
      ffmpeg: { version: 'N-47683-g0e8eb07980-static', missing: MISSING },
    });
    const spawned = (await h.spawns()).length;
    const probed = h.proxy.probes.cache.size;
    for (const method of ['GET', 'HEAD']) {
      const r = await get(h.url, '/insecure/f:mp3/enhance:voice/plain/local://stereo.wav', {
        method,
      });
      expect(r.status).toBe(501);
      expect(r.headers['cache-control']).toBe('max-age=60');
      if (method === 'GET') {
        expect(JSON.parse(r.body.toString())).toEqual({
          error: 'unsupported_option',
          message: DEESSER_MESSAGE,
        });
      }
    }
    // Refused before the source: even one that does not exist is not looked at.
    const absent = await get(h.url, '/insecure/f:mp3/enhance:voice/plain/local://absent.wav');
    expect(absent.status).toBe(501);
    expect((await h.spawns()).length).toBe(spawned);
    expect(h.proxy.probes.cache.size).toBe(probed);
    expect(await h.listings()).toHaveLength(4); // read once, at boot
  });

  it('answers every format with every option with audio or the documented error, never a 500', async () => {
    const quality: Record<string, string> = { aac: 'q:1.5', m4a: 'q:1.5', ogg: 'q:5' };
    const variants = (format: string) => [
      '',
      'enhance:voice',
      'enhance:voice/norm:ebu',
      'norm:ebu',
      'norm:ebu:-23:-2:7',
      'fade:0.5',
      'fade:0.5:0.5/t:0:2',
      't:1',
      't:0.5:1',
      't:10', // past the end: silence, not an empty body
      'sr:22050',
      'sr:8000',
      'ch:1',
      'ch:2',
      'bd:16',
      'bd:24',
      'bd:32f',
      quality[format] ?? 'q:2',
      'br:64',
      'br:320',
      'gain:-6',
      'norm:ebu/fade:0.2:0.2/t:0.5:1.5/sr:22050/ch:1/gain:2',
    ];
    // f:hls answers a playlist and refuses the per-segment filters: its parts are checked below.
    const formats = FORMATS.filter((f) => f !== 'hls');
    const paths = formats.flatMap((f) =>
      variants(f).map((v) => `/insecure/f:${f}${v ? `/${v}` : ''}/plain/local://stereo.wav`),
    );
    const answers = new Map<string, RawResponse>();
    let next = 0;
    await Promise.all(
      Array.from({ length: MATRIX_CONCURRENCY }, async () => {
        while (next < paths.length) {
          const path = paths[next++]!;
          answers.set(path, await get(h.url, path));
        }
      }),
    );
    const statuses = new Map<number, number>();
    for (const [path, r] of answers) {
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      expect(r.status, `${path}: ${r.body}`).not.toBe(500);
      expectAudioOrDocumented(path, r);
      expect(r.status === 501, path).toBe(path.includes('enhance:voice'));
      if (r.status === 501) {
        expect(JSON.parse(r.body.toString()).message, path).toBe(DEESSER_MESSAGE);
      }
    }
    // Non-vacuous: most render, both kinds of refusal occur, nothing else does.
    expect(answers.size).toBe(paths.length);
    expect(statuses.get(200)!).toBeGreaterThan(paths.length / 2);
    expect(statuses.get(501)).toBe(formats.length * 2);
    expect(statuses.get(422)).toBeGreaterThan(0);
    expect([...statuses.keys()].sort()).toEqual([200, 422, 501]);
    // f:hls on this ffmpeg: the playlist, its init part and a segment, for every segment codec.
    for (const codec of ['flac', 'aac', 'opus']) {
      const base = `/insecure/f:hls/hls_c:${codec}/hls_len:1`;
      const source = '/plain/local://stereo.wav';
      expectAudioOrDocumented(base, await get(h.url, `${base}${source}`));
      for (const part of ['init', '1']) {
        const path = `${base}/hls_seg:${part}${source}`;
        const r = await get(h.url, path);
        expect(r.status, `${path}: ${r.body}`).not.toBe(500);
        if (part !== 'init') expectAudioOrDocumented(path, r);
      }
    }
  }, 180_000);
});

describe('the demo on the npm fallback (the real CLI)', () => {
  let demo: BinProcess;
  let base: string;

  beforeAll(async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    demo = startBin(['demo', '--port', String(port)], {
      PATH: process.env.PATH ?? '',
      AP_FFMPEG_PATH: npmFfmpeg,
      AP_FFPROBE_PATH: npmFfprobe,
      AP_METRICS_PORT: String(metricsPort),
    });
    base = `http://127.0.0.1:${port}`;
    await waitFor(() => demo.output().includes('Ctrl-C to stop.'), 90_000, 50);
  }, 120_000);

  afterAll(async () => {
    demo?.child.kill('SIGTERM');
    await demo?.exited;
  });

  it('says what this ffmpeg cannot do and prints only URLs that answer 200 with audio', async () => {
    const out = demo.output();
    expect(out).toContain(
      'this ffmpeg cannot do enhance:voice (filter deesser): such URLs answer 501 and are not listed',
    );
    expect(out).toContain('unsupported here, answered 501 unsupported_option: enhance:voice');
    const urls = [...out.matchAll(/curl -o out '([^']+)'/g)].map((m) => m[1]!);
    expect(urls).toHaveLength(4);
    expect(urls.some((u) => u.includes('enhance:voice'))).toBe(false);
    expect(urls.some((u) => u.includes('/norm:ebu/'))).toBe(true); // the stand-in
    for (const url of urls) {
      const r = await get(base, url.slice(base.length));
      expect(r.status, url).toBe(200);
      if (url.includes('/info/')) {
        expect(JSON.parse(r.body.toString()), url).toMatchObject({ format: 'flac' });
      } else {
        expectAudioOrDocumented(url, r);
      }
    }
    const health = JSON.parse((await get(base, '/health')).body.toString());
    expect(health.ffmpeg).toMatchObject({ path: npmFfmpeg, source: 'env', missing: MISSING });
  });
});
