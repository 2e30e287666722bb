/**
 * The output byte-rate bound the worker's lead rule rests on (`outputBytesPerSecondBound`): it
 * must never be below what a render really writes per second of audio, or the worker would
 * think a listener further ahead than it is and hold bytes it needs. Checked against real
 * ffmpeg output for every format that gets one, and undefined where no bound is known.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RenderOptions } from '../../src/core/variant.js';
import { buildRenderArgv, outputBytesPerSecondBound } from '../../src/workers/argv.js';
import { runTool } from '../fixtures/audio.js';

const input = { url: '/in.wav', kind: 'local', sampleRate: 44_100, channels: 2 } as const;
const SECONDS = 10;
let dir = '';
let noise = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ap-rate-'));
  noise = join(dir, 'noise.wav');
  // White noise is the hardest input for every codec: the most bytes per second it writes.
  const made = await runTool('ffmpeg', [
    '-hide_banner',
    '-loglevel',
    'error',
    '-f',
    'lavfi',
    '-i',
    `anoisesrc=d=${SECONDS}:r=48000`,
    '-ac',
    '2',
    noise,
  ]);
  if (made.status !== 0) throw new Error(made.stderr);
});

afterAll(() => rm(dir, { recursive: true, force: true }));

describe('output byte-rate bound', () => {
  it('is the br with headroom for lossy formats, a generous default without one', () => {
    expect(outputBytesPerSecondBound({ format: 'mp3', bitrateK: 128 }, input)).toBe(24_000);
    expect(outputBytesPerSecondBound({ format: 'opus' }, input)).toBe(24_000);
    expect(outputBytesPerSecondBound({ format: 'mp3', quality: 0 }, input)).toBe(96_000);
  });

  it('is 32-bit PCM for lossless formats, and unknown without the rate or the channels', () => {
    expect(outputBytesPerSecondBound({ format: 'wav' }, input)).toBe(44_100 * 2 * 4);
    expect(
      outputBytesPerSecondBound({ format: 'flac', sampleRate: 8_000, channels: 1 }, input),
    ).toBe(32_000);
    expect(outputBytesPerSecondBound({ format: 'flac' }, { url: '/in.wav', kind: 'local' })).toBe(
      undefined,
    );
  });

  it('is unknown for peaks and HLS parts (the time rule alone)', () => {
    expect(outputBytesPerSecondBound({ format: 'peaks' } as RenderOptions, input)).toBe(undefined);
    expect(outputBytesPerSecondBound({ format: 'hls' } as RenderOptions, input)).toBe(undefined);
  });

  it.each<RenderOptions>([
    { format: 'mp3' },
    { format: 'mp3', bitrateK: 64 },
    { format: 'mp3', quality: 0 },
    { format: 'opus' },
    { format: 'opus', bitrateK: 32 },
    { format: 'ogg' },
    { format: 'aac' },
    { format: 'm4a' },
    { format: 'flac' },
    { format: 'wav' },
  ])('bounds what ffmpeg really writes for %o (10 s of noise)', async (options) => {
    const source = { url: noise, kind: 'local', sampleRate: 48_000, channels: 2 } as const;
    const out = await runTool('ffmpeg', buildRenderArgv(options, source));
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout.length).toBeGreaterThan(0);
    const bound = outputBytesPerSecondBound(options, source)!;
    expect(out.stdout.length / SECONDS).toBeLessThanOrEqual(bound);
  });
});
