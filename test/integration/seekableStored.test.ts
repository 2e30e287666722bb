/**
 * Stored variants are seekable and exact (issue #18, item 4), through the real server, real
 * ffmpeg and ffprobe, a file store and an S3 store (s3rver):
 * - every stored mp3, flac and wav variant, over several sources and `t:` windows, is reported
 *   by ffprobe at the source's trimmed duration within one frame (an mp3: its Xing/Info frame
 *   count, less the encoder delay ffprobe reports as `start_time`, since the count includes the
 *   delay and the last frame's padding, as in ffmpeg's own seekable encode), and m4a stays
 *   fragmented with its exact duration;
 * - the HIT's bytes differ from the MISS's only inside the mp3's info frame (same length, same
 *   offsets), and are what every later HIT serves;
 * - an mp3 MISS and its HIT carry the same strong ETag `"<key>"` (the contract); both
 *   revalidate with `If-None-Match` (304).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VariantStore } from '../../src/store/types.js';
import { resolveFfmpeg, resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { parseMp3Header, splitForInfoFrame } from '../../src/workers/xingFrame.js';
import { type S3rverHandle, startS3rver } from '../store/s3rver.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

const ffprobe = resolveFfprobe({ env: process.env }).path;
const ffmpeg = resolveFfmpeg({ env: process.env }).path;

/**
 * The fixtures' durations as decoded (sample count / rate, the mp3's encoder delay and padding
 * dropped as its LAME tag says), filled in by the first suite: 3 s, 2 s, 1 s.
 */
const SOURCES: Record<string, number> = { 'stereo.wav': 0, 'mono.mp3': 0, 'tiny.flac': 0 };
/**
 * As ffprobe, and so the proxy's probe, reports them: the mp3's is its Info frame count,
 * 2.0376 s, delay and padding included. An exact WAV or flac is cut or padded to this
 * (docs/ranges.md: exactness is relative to the probe).
 */
const PROBED: Record<string, number> = {};
type Window = [start: number, duration?: number];
/** What each store runs: the file store the whole grid, the S3 store a slice (same code path). */
interface Grid {
  readonly sources: readonly string[];
  readonly windows: readonly Window[];
  readonly formats: readonly string[];
}

function trimmed(source: string, [start, duration]: Window, probed = false): number {
  const total = (probed ? PROBED : SOURCES)[source]!;
  return Math.min(duration ?? Number.POSITIVE_INFINITY, total - start);
}

function storeOf(h: Harness): VariantStore {
  return (h.proxy as unknown as { store: VariantStore }).store;
}

const keyOf = (etag: unknown) => String(etag).replace(/^W\//, '').replaceAll('"', '');

interface Probed {
  readonly duration: number;
  readonly start: number;
  readonly sampleRate: number;
}

async function probe(dir: string, name: string, bytes: Buffer): Promise<Probed> {
  const file = join(dir, name);
  await writeFile(file, bytes);
  const out = JSON.parse(
    execFileSync(ffprobe, [
      ...['-v', 'error', '-of', 'json', '-show_entries'],
      'stream=duration,start_time,sample_rate:format=duration',
      file,
    ]).toString(),
  ) as { streams: Array<Record<string, string>>; format: Record<string, string> };
  const s = out.streams[0]!;
  return {
    duration: Number(s.duration ?? out.format.duration),
    start: Number(s.start_time ?? 0),
    sampleRate: Number(s.sample_rate),
  };
}

/** MISS, wait for the commit, then two HITs: returns the MISS and HIT bodies and headers. */
async function missThenHit(h: Harness, path: string) {
  const miss = await get(h.url, path);
  expect(miss.status, path).toBe(200);
  expect(miss.headers['x-audio-proxy']).toBe('MISS');
  const key = keyOf(miss.headers.etag);
  await waitFor(async () => (await storeOf(h).head(key)) !== undefined, 15_000);
  const hit = await get(h.url, path);
  expect(hit.headers['x-audio-proxy']).toBe('HIT');
  const again = await get(h.url, path);
  expect(again.body.equals(hit.body), 'a HIT serves what later HITs serve').toBe(true);
  return { miss, hit, key };
}

/** The byte range where `a` and `b` differ, or undefined when they are equal. */
function differing(a: Buffer, b: Buffer): [number, number] | undefined {
  let first = -1;
  let last = -1;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return first < 0 ? undefined : [first, last];
}

function suite(
  name: string,
  grid: Grid,
  env: () => Promise<{ env: Record<string, string>; done(): Promise<void> }>,
) {
  describe(name, () => {
    let h: Harness;
    let dir: string;
    let cleanup: () => Promise<void>;
    let n = 0;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'ap-seekable-'));
      const e = await env();
      cleanup = e.done;
      h = await startHarness({ ...e.env, AP_SERVE_MODE: 'proxy' });
      for (const source of Object.keys(SOURCES)) {
        const pcm = execFileSync(ffmpeg, [
          ...['-v', 'error', '-i', join(h.fixtures.dir, source)],
          ...['-ac', '1', '-ar', '48000', '-f', 's16le', '-'],
        ]);
        SOURCES[source] = pcm.length / 2 / 48_000;
        PROBED[source] = Number(
          execFileSync(ffprobe, [
            ...['-v', 'error', '-of', 'csv=p=0', '-show_entries', 'format=duration'],
            join(h.fixtures.dir, source),
          ])
            .toString()
            .trim(),
        );
      }
    }, 60_000);
    afterAll(async () => {
      await h?.close();
      await cleanup?.();
      await rm(dir, { recursive: true, force: true });
    });

    it('stored mp3s: exact duration from the Xing/Info frame; MISS and HIT differ only inside it', async () => {
      for (const source of grid.sources) {
        for (const window of grid.windows) {
          for (const extra of source === 'stereo.wav' ? ['', '/sr:22050'] : ['']) {
            const t = `t:${window.join(':')}`;
            const path = `/insecure/f:mp3/${t}${extra}/cb:${name.length}/plain/local://${source}`;
            const { miss, hit, key } = await missThenHit(h, path);
            const expected = trimmed(source, window);
            const label = `${path} (${expected} s)`;
            expect(hit.body.length, label).toBe(miss.body.length);
            const split = splitForInfoFrame(hit.body);
            if (typeof split === 'string') throw new Error(`${label}: no frame (${split})`);
            const info = parseMp3Header(hit.body, split.offset)!;
            const diff = differing(miss.body, hit.body);
            expect(diff, label).toBeDefined();
            expect(diff![0], label).toBeGreaterThanOrEqual(split.offset);
            expect(diff![1], label).toBeLessThan(split.offset + info.length);
            const tag = hit.body
              .subarray(split.offset, split.offset + info.length)
              .toString('latin1');
            expect(tag, label).toMatch(/Xing|Info/);
            const p = await probe(dir, `${++n}.mp3`, hit.body);
            const frame = info.samplesPerFrame / p.sampleRate;
            // The count covers the encoder delay (start_time) and the last frame's padding.
            expect(p.duration, label).toBeGreaterThanOrEqual(expected);
            expect(Math.abs(p.duration - p.start - expected), label).toBeLessThanOrEqual(frame);
            // ETags: the variant's key on both (the contract), though the info frame differs.
            expect(miss.headers.etag).toBe(`"${key}"`);
            expect(hit.headers.etag).toBe(`"${key}"`);
            const revalidated = await get(h.url, path, {
              headers: { 'if-none-match': String(miss.headers.etag) },
            });
            expect(revalidated.status).toBe(304);
          }
        }
      }
    });

    it('stored flac, wav and m4a: ffprobe duration exact within one frame; HIT = MISS bytes', async () => {
      for (const source of grid.sources) {
        for (const window of grid.windows) {
          for (const format of grid.formats) {
            const t = `t:${window.join(':')}`;
            const path = `/insecure/f:${format}/${t}/cb:${name.length}/plain/local://${source}`;
            const { miss, hit, key } = await missThenHit(h, path);
            // wav and flac are exact to the probe; m4a is encoded from the decoded audio.
            const expected = trimmed(source, window, format !== 'm4a');
            const label = `${path} (${expected} s)`;
            expect(hit.body.equals(miss.body), label).toBe(true);
            expect(miss.headers.etag).toBe(`"${key}"`);
            const p = await probe(dir, `${++n}.${format}`, hit.body);
            // One frame: 1 sample for PCM, a flac block (4608 at most here), an AAC frame (1024:
            // a fragmented m4a has no edit list, so ffprobe counts the encoder's 1024 priming
            // samples). ffprobe prints 6 decimals.
            const frame = format === 'wav' ? 1 : format === 'flac' ? 4608 : 1024;
            expect(Math.abs(p.duration - expected), label).toBeLessThanOrEqual(
              frame / p.sampleRate + 1e-6,
            );
          }
        }
      }
    });
  });
}

suite('file store', {
  sources: Object.keys(SOURCES),
  windows: [[0], [0.5, 1.2]],
  formats: ['flac', 'wav', 'm4a'],
}, async () => {
  const root = await mkdtemp(join(tmpdir(), 'ap-seekable-store-'));
  return {
    env: { AP_VARIANT_STORE: `file://${root}` },
    done: () => rm(root, { recursive: true, force: true }),
  };
});

let s3: S3rverHandle | undefined;
suite('s3 store', {
  sources: ['stereo.wav', 'mono.mp3'],
  windows: [[0.25]],
  formats: ['flac', 'wav'],
}, async () => {
  s3 = await startS3rver(['seekable']);
  return { env: s3.env({ AP_VARIANT_STORE: 's3://seekable' }), done: () => s3!.close() };
});
