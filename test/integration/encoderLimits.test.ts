/**
 * Valid options that ffmpeg's encoders refuse as written, end to end through a real proxy: the
 * bitrates outside libopus'/libvorbis' windows, sample rates no lossy encoder takes, and trims
 * that start past the source's end. Each must be a 200 whose body carries its container's magic
 * and decodes to at least one sample, with the ETag still the URL's own key; then a seeded
 * fast-check sample of extreme `br`/`sr`/`q` per lossy format must hold the same. And an ffmpeg
 * that exits cleanly with no output is not turned into a 5xx.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheKey } from '../../src/http/cacheKey.js';
import { normalizeOptions, parseOptions } from '../../src/http/options.js';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { closeLeavingNothing, get, type Harness, startHarness } from './harness.js';

const ffprobe = resolveFfprobe({ env: process.env }).path;
const ffmpeg = resolveFfmpeg({ env: process.env }).path;
const limit = pLimit(2); // the proxy runs two renders at a time; more would only queue
const CASE_TIMEOUT_MS = 60_000; // concurrent cases queue behind `limit` on a loaded machine
const SOURCE = 'local://tiny.flac'; // 1 s, 48 kHz stereo: `t:5` starts 4 s past its end
const SAMPLES_PER_FORMAT = 4;
const SAMPLE_SEED = 8;

const ascii = (b: Buffer, at: number, text: string) =>
  b.subarray(at, at + text.length).toString('latin1') === text;

/** The first bytes each format's container starts with. */
const MAGIC: Record<string, (b: Buffer) => boolean> = {
  mp3: (b) => ascii(b, 0, 'ID3') || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0),
  opus: (b) => ascii(b, 0, 'OggS') && ascii(b, 28, 'OpusHead'),
  ogg: (b) => ascii(b, 0, 'OggS') && ascii(b, 28, '\x01vorbis'),
  aac: (b) => b[0] === 0xff && (b[1]! & 0xf6) === 0xf0,
  m4a: (b) => ascii(b, 4, 'ftyp') && b.includes('moov'),
  flac: (b) => ascii(b, 0, 'fLaC'),
  wav: (b) => ascii(b, 0, 'RIFF') && ascii(b, 8, 'WAVE'),
};

/** ffprobe's first audio stream, and how many frames a full decode yields. */
function decode(body: Buffer, format: string) {
  const file = join(tmpdir(), `ap-limits-${process.pid}-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, body);
  const probed = JSON.parse(
    execFileSync(ffprobe, [
      ...['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'stream=codec_name'],
      ...['-of', 'json', '-f', format === 'm4a' ? 'mp4' : format === 'opus' ? 'ogg' : format],
      file,
    ]).toString(),
  ) as { streams: { codec_name: string }[] };
  const pcm = execFileSync(ffmpeg, ['-v', 'error', '-i', file, '-ac', '1', '-f', 's16le', '-'], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return { codec: probed.streams[0]?.codec_name, frames: pcm.length / 2 };
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await closeLeavingNothing(h);
});

async function expectRenderable(options: string) {
  const parsed = parseOptions(options);
  if (!parsed.ok) throw new Error(`test options must be valid: ${options}`);
  const format = parsed.options.format;
  const r = await limit(() => get(h.url, `/insecure/${options}/plain/${SOURCE}`));
  const head = r.body.subarray(0, 80).toString('latin1');
  expect(r.status, `${options}: ${head}`).toBe(200);
  expect(r.complete).toBe(true);
  expect(r.body.length, options).toBeGreaterThan(0);
  expect(MAGIC[format]!(r.body), `${options} magic`).toBe(true);
  // The key is the URL's canonical options, whatever the encoder was actually given.
  const tag = `"${cacheKey(normalizeOptions(parsed.options), SOURCE)}"`;
  // An mp3 answered from its render carries the weak form (docs/ranges.md, the ETag contract).
  expect(r.headers.etag).toBe(tag);
  const decoded = decode(r.body, format);
  expect(decoded.codec, options).toBeDefined();
  expect(decoded.frames, `${options} decodes to samples`).toBeGreaterThan(0);
}

describe('the fuzzer’s URLs render', () => {
  const FOUND = [
    'f:opus/br:10000',
    'f:opus/br:1',
    'f:opus/br:10000/ch:1',
    'f:ogg/br:1',
    'f:ogg/br:10000',
    'f:ogg/br:10000/ch:1/sr:8000',
    'f:aac/sr:1',
    'f:m4a/sr:1',
    'f:mp3/sr:1',
    'f:opus/sr:1',
    'f:ogg/sr:1',
    'f:aac/t:5:1',
    'f:aac/t:5',
    'f:aac/t:1',
    'f:mp3/t:5:1',
    'f:opus/t:5:1',
    'f:ogg/t:5:1/br:1',
    'f:m4a/t:5:1',
    'f:flac/t:5:1',
    'f:wav/t:5:1',
  ];
  it.concurrent.each(FOUND)('%s', (options) => expectRenderable(options), CASE_TIMEOUT_MS);
});

describe('an encoder that exits cleanly having written nothing', () => {
  it(
    'is not a 5xx: the options were valid and ffmpeg reported success',
    async () => {
      // `true` stands in for an ffmpeg that accepts its argv, exits 0 and writes no byte.
      const quiet = await startHarness({}, { ffmpegTarget: '/bin/true' });
      try {
        const r = await get(quiet.url, `/insecure/f:aac/plain/${SOURCE}`);
        expect(r.status).toBe(200);
        expect(r.complete).toBe(true);
        expect(r.body.length).toBe(0);
        expect((await quiet.spawns()).length).toBe(1);
      } finally {
        await closeLeavingNothing(quiet);
      }
    },
    CASE_TIMEOUT_MS,
  );
});

describe('a seeded sample of extreme br/sr/q per lossy format renders', () => {
  const Q_RANGE: Record<string, [number, number]> = {
    mp3: [0, 9],
    ogg: [-1, 10],
    aac: [0.1, 2],
    m4a: [0.1, 2],
    opus: [0, 10],
  };
  const edge = (min: number, max: number) =>
    fc.oneof(fc.constantFrom(min, max), fc.integer({ min, max }));
  const caseFor = (format: string) =>
    fc
      .record({
        rate: fc.oneof(edge(1, 48_000), fc.constant(undefined)),
        ch: fc.constantFrom(undefined, 1, 2),
        knob: fc.oneof(
          edge(1, 10_000).map((br) => `br:${br}`),
          fc.constantFrom(...Q_RANGE[format]!).map((q) => `q:${q}`),
        ),
      })
      .map(({ rate, ch, knob }) =>
        [`f:${format}`, knob, rate && `sr:${rate}`, ch && `ch:${ch}`, 't:0:0.5']
          .filter(Boolean)
          .join('/'),
      );
  const cases = Object.keys(Q_RANGE).flatMap((format, i) => [
    ...new Set(fc.sample(caseFor(format), { numRuns: SAMPLES_PER_FORMAT, seed: SAMPLE_SEED + i })),
  ]);
  it.concurrent.each(cases)('%s', (options) => expectRenderable(options), CASE_TIMEOUT_MS);
});
