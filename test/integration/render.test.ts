/**
 * The render path end to end: a real server on loopback, real ffprobe and real ffmpeg in
 * worker threads, generated fixtures. Proves every format's container, the options' effect on
 * the output, the status table for bad input, coalescing onto exactly one ffmpeg spawn with
 * byte-identical bodies, and that a render nobody wants any more is killed.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheKey } from '../../src/http/cacheKey.js';
import { sign } from '../../src/http/signature.js';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, isAlive, startHarness, waitFor } from './harness.js';

const ffprobe = resolveFfprobe({ env: process.env }).path;
const ffmpeg = resolveFfmpeg({ env: process.env }).path;

function probeBuffer(body: Buffer, ext: string) {
  const file = join(
    tmpdir(),
    `ap-out-${process.pid}-${Math.random().toString(36).slice(2)}.${ext}`,
  );
  writeFileSync(file, body);
  const out = execFileSync(ffprobe, [
    '-v',
    'error',
    '-show_entries',
    'format=duration:stream=channels,sample_rate,codec_name',
    '-of',
    'json',
    file,
  ]).toString();
  return JSON.parse(out) as {
    format: { duration: string };
    streams: Array<{ channels: number; sample_rate: string; codec_name: string }>;
  };
}

/** Duration by decoding, which works for every container, streamed headers or not. */
function decodedSeconds(body: Buffer): number {
  const pcm = execFileSync(
    ffmpeg,
    ['-v', 'error', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', '8000', 'pipe:1'],
    { input: body, maxBuffer: 64 * 1024 * 1024 },
  );
  return pcm.length / 16_000;
}

let h: Harness;
let longSource: string;

beforeAll(async () => {
  h = await startHarness();
  // 40 s of stereo tone: long enough that 20 joiners land while it renders.
  longSource = 'long.wav';
  const target = join(h.fixtures.dir, longSource);
  try {
    execFileSync(ffmpeg, [
      '-nostdin',
      '-loglevel',
      'error',
      '-n',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=330:sample_rate=44100:duration=40',
      '-ac',
      '2',
      target,
    ]);
  } catch {
    // already there from an earlier run (-n refuses to overwrite)
  }
});

afterAll(async () => {
  await h.close();
});

const MAGIC: Record<string, (b: Buffer) => boolean> = {
  mp3: (b) => b.subarray(0, 3).toString() === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0),
  opus: (b) => b.subarray(0, 4).toString() === 'OggS' && b.includes(Buffer.from('OpusHead')),
  ogg: (b) => b.subarray(0, 4).toString() === 'OggS' && b.includes(Buffer.from('vorbis')),
  aac: (b) => b[0] === 0xff && (b[1]! & 0xf6) === 0xf0,
  m4a: (b) => b.subarray(4, 8).toString() === 'ftyp' && b.includes(Buffer.from('moof')),
  flac: (b) => b.subarray(0, 4).toString() === 'fLaC',
  wav: (b) => b.subarray(0, 4).toString() === 'RIFF' && b.subarray(8, 12).toString() === 'WAVE',
};
const TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  ogg: 'audio/ogg',
  aac: 'audio/aac',
  m4a: 'audio/mp4',
  flac: 'audio/flac',
  wav: 'audio/wav',
};

describe('formats', () => {
  for (const format of Object.keys(MAGIC)) {
    // A PCM WAV's length is a function of the probe: its MISS is sized like a HIT (ranges too,
    // test/integration/rangeWhileRendering.test.ts); every other format streams chunked.
    const sized = format === 'wav';
    it(`${format}: 200 ${sized ? 'sized' : 'chunked'} MISS with the right container and headers`, async () => {
      const path = `/insecure/f:${format}/plain/local://stereo.wav`;
      const r = await get(h.url, path);
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      if (sized) {
        expect(r.headers['transfer-encoding']).toBeUndefined();
        expect(r.headers['content-length']).toBe(String(r.body.length));
        expect(r.headers['accept-ranges']).toBe('bytes');
      } else {
        expect(r.headers['transfer-encoding']).toBe('chunked');
        expect(r.headers['content-length']).toBeUndefined();
      }
      expect(r.headers['content-type']).toBe(TYPES[format]);
      expect(r.headers['cache-control']).toBe('public, max-age=31536000, immutable, no-transform');
      expect(['MISS', 'COALESCED']).toContain(r.headers['x-audio-proxy']);
      const tag = `"${cacheKey(`f:${format}`, 'local://stereo.wav')}"`;
      // An mp3 answered from its render carries the weak form (docs/ranges.md, the ETag contract).
      expect(r.headers.etag).toBe(tag);
      expect(MAGIC[format]!(r.body)).toBe(true);
      expect(decodedSeconds(r.body)).toBeCloseTo(3, 1);
    });
  }
});

describe('options change the output', () => {
  it('t:0.5:1 trims to one second, ch:1 makes it mono, sr:22050 resamples', async () => {
    const r = await get(h.url, '/insecure/f:flac/t:0.5:1/ch:1/sr:22050/plain/local://stereo.wav');
    expect(r.status).toBe(200);
    const p = probeBuffer(r.body, 'flac');
    expect(decodedSeconds(r.body)).toBeCloseTo(1, 1);
    expect(p.streams[0]!.channels).toBe(1);
    expect(p.streams[0]!.sample_rate).toBe('22050');
  });

  it('dl sets Content-Disposition', async () => {
    const r = await get(h.url, '/insecure/f:mp3/dl:song.mp3/plain/local://stereo.wav');
    expect(r.headers['content-disposition']).toContain('attachment; filename="song.mp3"');
  });
});

describe('peaks', () => {
  it('f:peaks JSON: audiowaveform v2 with pts pixels per channel, from the worker thread', async () => {
    const r = await get(h.url, '/insecure/f:peaks/pts:100/plain/local://stereo.wav');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toContain('application/json');
    const peaks = JSON.parse(r.body.toString());
    expect(peaks).toMatchObject({
      version: 2,
      channels: 1,
      sample_rate: 44100,
      bits: 16,
      length: 100,
    });
    expect(peaks.samples_per_pixel).toBe(Math.ceil((3 * 44100) / 100));
    expect(peaks.data).toHaveLength(100 * 2);
    // a 1/8-amplitude tone: every pixel's max is about 4096 and its min about -4096
    expect(Math.max(...peaks.data)).toBeGreaterThan(3500);
    expect(Math.min(...peaks.data)).toBeLessThan(-3500);
  });

  it('f:peaks dat: the 24-byte little-endian header, then int16 pairs', async () => {
    const r = await get(
      h.url,
      '/insecure/f:peaks/pk_fmt:dat/ch:2/pts:50/t:0:1/plain/local://stereo.wav',
    );
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    const b = r.body;
    expect(b.readInt32LE(0)).toBe(2);
    expect(b.readInt32LE(20)).toBe(2); // channels
    expect(b.readUInt32LE(16)).toBe(50); // length
    expect(b.length).toBe(24 + 50 * 2 * 2 * 2);
  });
});

describe('the status table for bad input', () => {
  it('401 for a bad signature, 422 for bad options, 404 for a missing source, 410 when expired', async () => {
    expect((await get(h.url, '/nope/f:mp3/plain/local://stereo.wav')).status).toBe(401);
    const bad = await get(h.url, '/insecure/f:mp3/br:9999999/plain/local://stereo.wav');
    expect(bad.status).toBe(422);
    expect(JSON.parse(bad.body.toString()).error).toBe('invalid_options');
    const missing = await get(h.url, '/insecure/f:mp3/plain/local://missing.wav');
    expect(missing.status).toBe(404);
    expect(missing.body.toString()).toBe('{"error":"not_found","message":"Source not found"}');
    expect((await get(h.url, '/insecure/f:mp3/exp:1/plain/local://stereo.wav')).status).toBe(410);
    expect((await get(h.url, '/insecure/f:mp3/plain/local://../etc/passwd')).status).toBe(404);
  });

  it('a signed path with no source (a signed `/`, no `plain`/`enc`) is "Source not found"', async () => {
    // The router matched `/:sig/*rest`; only an unmatched path is the router's "No such resource".
    const key = Buffer.alloc(32, 7);
    const salt = Buffer.from('salt');
    h.config.set({ key, salt });
    try {
      const sourceNotFound = '{"error":"not_found","message":"Source not found"}';
      for (const rest of ['/', '/f:mp3', '/f:mp3/t:0:1', '/info']) {
        const res = await get(h.url, `/${sign(rest, key, salt)}${rest}`);
        expect(res.status, rest).toBe(404);
        expect(res.body.toString(), rest).toBe(sourceNotFound);
      }
      expect((await get(h.url, '/insecure/')).body.toString()).toBe(sourceNotFound);
      // The router's own misses keep their message.
      const root = await get(h.url, '/');
      expect(root.status).toBe(404);
      expect(JSON.parse(root.body.toString()).message).toBe('No such resource');
    } finally {
      h.config.set({ key: undefined, salt: undefined });
    }
  });

  it('a signed URL verifies with the key; a tampered one does not', async () => {
    const key = Buffer.alloc(32, 7);
    const salt = Buffer.from('salt');
    h.config.set({ key, salt });
    try {
      const rest = '/f:mp3/t:0:1/plain/local://stereo.wav';
      const sig = sign(rest, key, salt);
      expect((await get(h.url, `/${sig}${rest}`)).status).toBe(200);
      expect((await get(h.url, `/${sig}/f:mp3/t:0:2/plain/local://stereo.wav`)).status).toBe(401);
    } finally {
      h.config.set({ key: undefined, salt: undefined });
    }
  });

  it('415 for a video source and for an undecodable one', async () => {
    const video = await get(
      h.url,
      `/insecure/f:mp3/plain/local://${h.fixtures.videoMp4.split('/').pop()}`,
    );
    expect(video.status).toBe(415);
    expect(JSON.parse(video.body.toString()).error).toBe('video_source');
    const garbage = await get(
      h.url,
      `/insecure/f:mp3/plain/local://${h.fixtures.garbage.split('/').pop()}`,
    );
    expect(garbage.status).toBe(415);
    expect(JSON.parse(garbage.body.toString()).error).toBe('undecodable_source');
  });

  it('413 when the source exceeds AP_MAX_SRC_BYTES', async () => {
    h.config.set({ maxSrcBytes: 10 });
    try {
      expect((await get(h.url, '/insecure/f:mp3/plain/local://stereo.wav')).status).toBe(413);
    } finally {
      h.config.set({ maxSrcBytes: 2_000_000_000 });
    }
  });

  it('304 for a matching If-None-Match, HEAD without spawning anything', async () => {
    const path = '/insecure/f:opus/t:0:1/plain/local://stereo.wav';
    const etag = `"${cacheKey('f:opus/t:0:1', 'local://stereo.wav')}"`;
    const before = (await h.spawns()).length;
    const nm = await get(h.url, path, { headers: { 'if-none-match': `W/"x", ${etag}` } });
    expect(nm.status).toBe(304);
    const head = await get(h.url, path, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers['x-audio-proxy']).toBe('MISS');
    expect(head.body.length).toBe(0);
    expect((await h.spawns()).length).toBe(before);
  });
});

describe('coalescing', () => {
  it('20 requests joining at random moments share one ffmpeg and get identical bytes', async () => {
    const path = `/insecure/f:opus/cb:coalesce-${Date.now()}/plain/local://${longSource}`;
    const before = (await h.spawns()).length;
    const delays = Array.from({ length: 20 }, (_, i) =>
      i === 0 ? 0 : Math.floor(Math.random() * 250),
    );
    const responses = await Promise.all(
      delays.map(async (d) => {
        await new Promise((r) => setTimeout(r, d));
        return get(h.url, path);
      }),
    );
    const spawned = (await h.spawns()).length - before;
    expect(spawned).toBe(1);
    const first = responses[0]!.body;
    expect(first.length).toBeGreaterThan(10_000);
    for (const r of responses) {
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      expect(r.body.equals(first)).toBe(true);
    }
    const statuses = responses.map((r) => r.headers['x-audio-proxy']);
    expect(statuses.filter((s) => s === 'MISS')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'COALESCED')).toHaveLength(19);
  });
});

describe('/health, /ready and /metrics', () => {
  it('health says which ffmpeg; ready reports the queue; metrics only on its own listener', async () => {
    const health = await get(h.url, '/health');
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body.toString())).toMatchObject({
      status: 'ok',
      ffmpeg: { source: 'env' },
    });
    const ready = await get(h.url, '/ready');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body.toString())).toEqual({
      status: 'ready',
      queued: 0,
      threshold: 16,
    });
    expect((await get(h.url, '/metrics')).status).toBe(404);
    const metrics = await get(h.metricsUrl, '/metrics');
    expect(metrics.status).toBe(200);
    const text = metrics.body.toString();
    expect(text).toContain('audio_proxy_render_slots_capacity 2');
    expect(text).toContain('# TYPE audio_proxy_renders_total counter');
    expect(text).toMatch(/audio_proxy_cache_lookups_total\{format="opus",outcome="coalesced"\} 19/);
    // the standard process and runtime metrics, under their usual names
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^process_resident_memory_bytes \d/m);
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    expect(text).toContain('# TYPE nodejs_gc_duration_seconds histogram');
  });

  it('leaves nothing running: no slot held, no coordinator, no ffmpeg alive', async () => {
    await waitFor(() => h.proxy.renders.live === 0, 5_000);
    const stats = h.proxy.actors.semaphore.getSnapshot().context;
    expect(stats).toBeDefined();
    for (const pid of await h.spawns()) expect(isAlive(pid)).toBe(false);
    expect(h.proxy.pools.render.queueSize).toBe(0);
  });
});

describe('AP_FFMPEG_NICE', () => {
  it('every ffmpeg the proxy starts runs at the configured niceness', async () => {
    // The target records the niceness it runs at (after a pause, so the proxy's setpriority right
    // after the spawn has happened), then execs the real ffmpeg: the render itself is real.
    const dir = mkdtempSync(join(tmpdir(), 'ap-nice-'));
    const record = join(dir, 'nice.txt');
    const target = join(dir, 'nice-then-ffmpeg');
    writeFileSync(
      target,
      `#!/bin/sh\nsleep 0.2\ncut -d' ' -f19 /proc/$$/stat >> '${record}'\nexec '${ffmpeg}' "$@"\n`,
    );
    chmodSync(target, 0o755);
    const niced = await startHarness({ AP_FFMPEG_NICE: '13' }, { ffmpegTarget: target });
    try {
      const r = await get(niced.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      expect(decodedSeconds(r.body)).toBeCloseTo(1, 1);
      expect(readFileSync(record, 'utf8').trim().split('\n')).toEqual(['13']);
    } finally {
      await niced.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
