/**
 * Valid options the encoders would refuse: the argv builder maps `sr` onto the encoder's rate
 * table and clamps `br` into its window for the output's channels and rate, and pads a trim
 * that would be empty. First the pure mapping (tables, ties, channel counts, a property over
 * the grammar's whole ranges), then every limit is checked against real Debian ffmpeg 5.1: each
 * window's ends open the encoder at both edges of its band, and one step outside fails.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Format, RenderOptions } from '../../src/core/variant.js';
import { parseOptions } from '../../src/http/options.js';
import {
  AAC_SAMPLE_RATES_HZ,
  type ArgvInput,
  buildRenderArgv,
  ENCODER_CHANNELS,
  encoderBitrateK,
  encoderChannels,
  encoderSampleRate,
  FLAC_MAX_SAMPLE_RATE_HZ,
  flacSampleRate,
  foldFilter,
  MP3_SAMPLE_RATES_HZ,
  OPUS_MAX_KBPS_PER_CHANNEL,
  OPUS_SAMPLE_RATES_HZ,
  TRIM_MIN_OUTPUT_S,
  VORBIS_ABR_BANDS,
  VORBIS_MIN_SAMPLE_RATE_HZ,
  vorbisAbrWindowK,
} from '../../src/workers/argv.js';
import { type AudioFixtures, makeFixtures, runTool } from '../fixtures/audio.js';

const DEBIAN_FFMPEG = 'ffmpeg';
const limit = pLimit(2); // two ffmpeg processes at a time: the machine has two cores
const QUEUED_CASE_TIMEOUT_MS = 120_000; // concurrent cases queue behind `limit`
const PROBE_SECONDS = '0.1'; // encoder setup is what is tested; a tenth of a second is plenty

function opts(text: string): RenderOptions {
  const parsed = parseOptions(text);
  if (!parsed.ok) throw new Error(`fixture options invalid: ${text}: ${parsed.message}`);
  return parsed.options;
}

const local = (extra: Partial<ArgvInput> = {}): ArgvInput => ({
  url: '/srv/a.wav',
  kind: 'local',
  ...extra,
});

function valueAfter(argv: readonly string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i === -1 ? undefined : argv[i + 1];
}

const STEREO_44K = { sampleRate: 44_100, channels: 2 } as const;

describe('sample rates snap to what the encoder takes', () => {
  it('takes the nearest rate in the table, a tie going up', () => {
    expect(encoderSampleRate('aac', 1)).toBe(7_350);
    expect(encoderSampleRate('m4a', 7_674)).toBe(7_350);
    expect(encoderSampleRate('m4a', 7_675)).toBe(8_000); // 325 Hz either way: up
    expect(encoderSampleRate('aac', 7_676)).toBe(8_000);
    expect(encoderSampleRate('mp3', 1)).toBe(8_000);
    expect(encoderSampleRate('mp3', 30_000)).toBe(32_000);
    expect(encoderSampleRate('mp3', 47_999)).toBe(48_000);
    expect(encoderSampleRate('opus', 1)).toBe(8_000);
    expect(encoderSampleRate('opus', 10_000)).toBe(12_000); // 2 kHz either way: up
    expect(encoderSampleRate('opus', 44_100)).toBe(48_000);
    expect(encoderSampleRate('opus', 36_000)).toBe(48_000); // tie between 24k and 48k
    expect(encoderSampleRate('opus', 35_999)).toBe(24_000);
  });

  it('keeps every table rate as it is', () => {
    for (const [format, table] of [
      ['mp3', MP3_SAMPLE_RATES_HZ],
      ['aac', AAC_SAMPLE_RATES_HZ],
      ['opus', OPUS_SAMPLE_RATES_HZ],
    ] as const) {
      for (const hz of table) expect(encoderSampleRate(format, hz)).toBe(hz);
    }
  });

  it('clamps vorbis into its tuned range and leaves lossless rates alone', () => {
    expect(encoderSampleRate('ogg', 1)).toBe(VORBIS_MIN_SAMPLE_RATE_HZ);
    expect(encoderSampleRate('ogg', 30_000)).toBe(30_000);
    expect(encoderSampleRate('ogg', 96_000)).toBe(48_000);
    expect(encoderSampleRate('flac', 1)).toBe(1);
    expect(encoderSampleRate('wav', 384_000)).toBe(384_000);
    expect(() => encoderSampleRate('mp3', 0)).toThrow(RangeError);
    expect(() => encoderSampleRate('mp3', 1.5)).toThrow(RangeError);
  });

  it('puts the snapped rate in the filter chain; the key is not argv’s business', () => {
    const af = (text: string, extra: Partial<ArgvInput> = {}) =>
      valueAfter(buildRenderArgv(opts(text), local(extra)), '-af');
    expect(af('f:aac/sr:1')).toBe('aformat=sample_rates=7350');
    expect(af('f:m4a/sr:1')).toBe('aformat=sample_rates=7350');
    expect(af('f:mp3/sr:1')).toBe('aformat=sample_rates=8000');
    expect(af('f:opus/sr:22050')).toBe('aformat=sample_rates=24000');
    expect(af('f:ogg/sr:1')).toBe('aformat=sample_rates=8000');
    expect(af('f:ogg/sr:30000')).toBe('aformat=sample_rates=30000');
    // norm's return to the source rate is snapped too (no second resample by ffmpeg).
    expect(af('f:opus/norm:ebu', { sampleRate: 11_025 })).toBe(
      'loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=12000',
    );
    // Lossless formats take any rate the grammar allows.
    expect(af('f:flac/sr:1')).toBe('aformat=sample_rates=1');
    // Without sr the source rate is ffmpeg's to convert: no filter at all.
    expect(af('f:opus', { sampleRate: 44_100 })).toBeUndefined();
  });
});

describe('bitrates are clamped into the encoder’s window', () => {
  it('caps libopus at 256 kb/s per channel, one channel when the count is unknown', () => {
    expect(encoderBitrateK('opus', 10_000, 48_000, 1)).toBe(256);
    expect(encoderBitrateK('opus', 10_000, 48_000, 2)).toBe(512);
    expect(encoderBitrateK('opus', 10_000, 48_000, 6)).toBe(1_536);
    expect(encoderBitrateK('opus', 10_000, undefined, undefined)).toBe(256);
    expect(encoderBitrateK('opus', 1, 8_000, 2)).toBe(1); // 1 kb/s is above libopus' 500 b/s
    expect(encoderBitrateK('opus', 96, 48_000, 2)).toBe(96);
  });

  it('uses the libvorbis band of the rate, per channel layout', () => {
    expect(vorbisAbrWindowK(44_100, 2)).toEqual([45, 500]);
    expect(vorbisAbrWindowK(44_100, 1)).toEqual([32, 240]);
    expect(vorbisAbrWindowK(8_999, 1)).toEqual([8, 42]);
    expect(vorbisAbrWindowK(9_000, 1)).toEqual([12, 50]);
    expect(vorbisAbrWindowK(44_100, 6)).toEqual([192, 1_440]); // uncoupled: mono per channel
    expect(vorbisAbrWindowK(22_050, undefined)).toEqual([30, 90]); // valid for mono and stereo
    expect(() => vorbisAbrWindowK(7_999, 1)).toThrow(RangeError);
    expect(encoderBitrateK('ogg', 1, 44_100, 2)).toBe(45);
    expect(encoderBitrateK('ogg', 10_000, 44_100, 2)).toBe(500);
    expect(encoderBitrateK('ogg', 10_000, 8_000, 1)).toBe(42);
    expect(encoderBitrateK('ogg', 128, 44_100, 2)).toBe(128);
  });

  it('passes LAME’s and aac’s through: they settle on a legal rate themselves', () => {
    for (const format of ['mp3', 'aac', 'm4a'] as const) {
      expect(encoderBitrateK(format, 1, 8_000, 1)).toBe(1);
      expect(encoderBitrateK(format, 10_000, 48_000, 2)).toBe(10_000);
    }
    expect(() => encoderBitrateK('mp3', 0, 48_000, 2)).toThrow(RangeError);
  });

  it('clamps for the output’s channels (ch, else the probe) and rate (sr, else the probe)', () => {
    const ba = (text: string, extra: Partial<ArgvInput> = {}) =>
      valueAfter(buildRenderArgv(opts(text), local(extra)), '-b:a');
    expect(ba('f:opus/br:10000', STEREO_44K)).toBe('512k');
    expect(ba('f:opus/br:10000/ch:1', STEREO_44K)).toBe('256k');
    expect(ba('f:opus/br:1', STEREO_44K)).toBe('1k');
    expect(ba('f:ogg/br:1', STEREO_44K)).toBe('45k');
    expect(ba('f:ogg/br:10000', STEREO_44K)).toBe('500k');
    expect(ba('f:ogg/br:10000/ch:1/sr:8000', STEREO_44K)).toBe('42k');
    expect(ba('f:ogg/br:10000/sr:1', { sampleRate: 44_100, channels: 1 })).toBe('42k');
    expect(ba('f:aac/br:10000', STEREO_44K)).toBe('10000k');
  });

  it('pins an ABR vorbis render to 48 kHz when the source rate is unknown or above it', () => {
    const af = (text: string, extra: Partial<ArgvInput>) =>
      valueAfter(buildRenderArgv(opts(text), local(extra)), '-af');
    expect(af('f:ogg/br:128', { sampleRate: 96_000, channels: 2 })).toBe(
      'aformat=sample_rates=48000',
    );
    expect(af('f:ogg/br:128', { channels: 2 })).toBe('aformat=sample_rates=48000');
    expect(af('f:ogg/br:128', { sampleRate: 4_000, channels: 2 })).toBe(
      'aformat=sample_rates=8000',
    );
    expect(af('f:ogg/br:128', STEREO_44K)).toBeUndefined();
    expect(af('f:ogg/q:5', { sampleRate: 96_000, channels: 2 })).toBeUndefined(); // VBR takes it
  });
});

describe('a trim always leaves something to encode', () => {
  const af = (text: string, extra: Partial<ArgvInput> = {}) =>
    valueAfter(buildRenderArgv(opts(text), local(extra)), '-af');

  it('pads to TRIM_MIN_OUTPUT_S at the chain’s rate, never past the asked duration', () => {
    expect(TRIM_MIN_OUTPUT_S).toBe(0.01);
    expect(af('f:aac/t:5:1', STEREO_44K)).toBe('apad=whole_len=441');
    expect(af('f:aac/t:5', STEREO_44K)).toBe('apad=whole_len=441');
    expect(af('f:aac/t:5:0.001', STEREO_44K)).toBe('apad=whole_len=44');
    expect(af('f:mp3/t:5:1/sr:8000', STEREO_44K)).toBe(
      'aformat=sample_rates=8000,apad=whole_len=80',
    );
    expect(af('f:wav/t:5:1')).toBe('apad=whole_len=73'); // no probe: counted at 7350 Hz
  });

  it('adds nothing without a trim, nor where not one sample fits (a lossless 1 Hz render)', () => {
    expect(af('f:aac', STEREO_44K)).toBeUndefined();
    expect(af('f:wav/sr:1/t:5:1', STEREO_44K)).toBe('aformat=sample_rates=1');
  });
});

describe('property: every valid br/sr lands inside the encoder’s limits', () => {
  const lossy = fc.constantFrom<Format>('mp3', 'opus', 'ogg', 'aac', 'm4a');
  it('the rate is in the table and the bitrate in the window', () => {
    fc.assert(
      fc.property(
        lossy,
        fc.integer({ min: 1, max: 10_000 }),
        fc.option(fc.integer({ min: 1, max: 48_000 }), { nil: undefined }),
        fc.option(fc.constantFrom(1, 2), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 384_000 }), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
        (format, br, sr, ch, sourceRate, sourceChannels) => {
          const text = [`f:${format}`, `br:${br}`, sr && `sr:${sr}`, ch && `ch:${ch}`]
            .filter(Boolean)
            .join('/');
          const argv = buildRenderArgv(
            opts(text),
            local({
              ...(sourceRate ? { sampleRate: sourceRate } : {}),
              ...(sourceChannels ? { channels: sourceChannels } : {}),
            }),
          );
          const resample = /aformat=sample_rates=(\d+)/.exec(valueAfter(argv, '-af') ?? '');
          const rate = resample ? Number(resample[1]) : sourceRate;
          const channels = ch ?? sourceChannels;
          const kbps = Number(valueAfter(argv, '-b:a')!.replace(/k$/, ''));
          if (sr !== undefined) expect(resample).not.toBeNull();
          if (format === 'ogg') {
            expect(rate).toBeGreaterThanOrEqual(8_000);
            expect(rate).toBeLessThanOrEqual(48_000);
            const [min, max] = vorbisAbrWindowK(rate!, channels);
            expect(kbps).toBeGreaterThanOrEqual(min);
            expect(kbps).toBeLessThanOrEqual(max);
          } else if (format === 'opus') {
            expect(kbps).toBeLessThanOrEqual(OPUS_MAX_KBPS_PER_CHANNEL * (channels ?? 1));
            if (resample) expect(OPUS_SAMPLE_RATES_HZ).toContain(rate);
          } else if (resample) {
            const table = format === 'mp3' ? MP3_SAMPLE_RATES_HZ : AAC_SAMPLE_RATES_HZ;
            expect(table).toContain(rate);
          }
          if (format === 'ogg') {
            // Inside the window the asked value stands; outside, the nearer end of it.
            const [min, max] = vorbisAbrWindowK(rate!, channels);
            expect(kbps).toBe(Math.min(Math.max(br, min), max));
          } else {
            expect(kbps).toBeLessThanOrEqual(br);
          }
          expect(kbps).toBeGreaterThanOrEqual(1);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('the limits, against real ffmpeg 5.1', () => {
  let fx: AudioFixtures;
  beforeAll(async () => {
    fx = await makeFixtures();
  });

  /** Opens `encoder` at `hz`/`channels`/`-b:a` on a tenth of a second of the stereo fixture. */
  async function opens(encoder: string, hz: number, channels: number, kbps?: number) {
    const muxer = encoder === 'aac' ? 'adts' : encoder === 'libmp3lame' ? 'mp3' : 'ogg';
    const run = await limit(() =>
      runTool(DEBIAN_FFMPEG, [
        ...['-nostdin', '-v', 'error', '-t', PROBE_SECONDS, '-i', fx.stereoWav],
        ...['-af', `aformat=sample_rates=${hz}`, '-ac', String(channels), '-c:a', encoder],
        ...(kbps === undefined ? [] : ['-b:a', `${kbps}k`]),
        ...['-f', muxer, 'pipe:1'],
      ]),
    );
    return run.status === 0 && run.stdout.byteLength > 0 && run.stderr === '';
  }

  const bandCases = VORBIS_ABR_BANDS.flatMap((band) =>
    [band.fromHz, Math.min(band.belowHz - 1, 48_000)].flatMap((hz) =>
      ([1, 2] as const).map((channels) => ({
        hz,
        channels,
        window: vorbisAbrWindowK(hz, channels),
      })),
    ),
  );

  it.concurrent.each(bandCases)(
    'libvorbis opens at both ends of its window at $hz Hz, $channels ch',
    async ({ hz, channels, window }) => {
      expect(await opens('libvorbis', hz, channels, window[0])).toBe(true);
      expect(await opens('libvorbis', hz, channels, window[1])).toBe(true);
    },
    QUEUED_CASE_TIMEOUT_MS,
  );

  it('libvorbis refuses one step outside a band’s window, so the clamp is needed', async () => {
    const [min, max] = vorbisAbrWindowK(44_100, 2);
    expect(await opens('libvorbis', 44_100, 2, min - 1)).toBe(false);
    expect(await opens('libvorbis', 44_100, 2, max + 1)).toBe(false);
  });

  it.concurrent.each([1, 2])(
    'libopus opens at its ceiling for %i channel(s) and refuses one above',
    async (channels) => {
      const max = OPUS_MAX_KBPS_PER_CHANNEL * channels;
      expect(await opens('libopus', 48_000, channels, max)).toBe(true);
      expect(await opens('libopus', 48_000, channels, max + 1)).toBe(false);
      expect(await opens('libopus', 8_000, channels, 1)).toBe(true);
    },
    QUEUED_CASE_TIMEOUT_MS,
  );

  const tableCases = [
    ...MP3_SAMPLE_RATES_HZ.map((hz) => ({ encoder: 'libmp3lame', hz })),
    ...AAC_SAMPLE_RATES_HZ.map((hz) => ({ encoder: 'aac', hz })),
    ...OPUS_SAMPLE_RATES_HZ.map((hz) => ({ encoder: 'libopus', hz })),
  ];

  it.concurrent.each(tableCases)(
    '$encoder takes $hz Hz at both ends of the grammar’s br',
    async ({ encoder, hz }) => {
      expect(await opens(encoder, hz, 2)).toBe(true);
      if (encoder !== 'libopus') {
        expect(await opens(encoder, hz, 1, 1)).toBe(true);
        expect(await opens(encoder, hz, 2, 10_000)).toBe(true);
      }
    },
    QUEUED_CASE_TIMEOUT_MS,
  );
});

describe('sources with more channels or a higher rate than an encoder takes', () => {
  const AUDIO_FORMATS = ['mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav'] as const;

  it('downmixes to a count the encoder opens, and never upmixes', () => {
    for (const format of AUDIO_FORMATS) {
      for (let source = 1; source <= 64; source++) {
        const fit = encoderChannels(format, source);
        const taken = ENCODER_CHANNELS[format];
        expect(fit).toBeLessThanOrEqual(source);
        if (taken !== 'any') expect(taken).toContain(fit);
        const argv = buildRenderArgv(opts(`f:${format}`), local({ channels: source }));
        expect(valueAfter(argv, '-ac')).toBe(fit === source ? undefined : String(fit));
      }
    }
    expect(encoderChannels('opus', 3)).toBe(2);
    expect(encoderChannels('opus', 12)).toBe(8);
    expect(encoderChannels('flac', 9)).toBe(8);
    expect(encoderChannels('mp3', 6)).toBe(2);
  });

  it('resamples flac only above the format’s highest rate', () => {
    const at = (hz: number) =>
      buildRenderArgv(opts('f:flac'), local({ sampleRate: hz, channels: 2 })).join(' ');
    expect(at(FLAC_MAX_SAMPLE_RATE_HZ)).not.toContain('aformat=sample_rates');
    expect(at(65_534)).not.toContain('aformat=sample_rates');
    expect(at(96_010)).not.toContain('aformat=sample_rates');
    expect(at(96_001)).toContain('aformat=sample_rates=96000');
    expect(at(65_535)).toContain('aformat=sample_rates=65530');
    expect(at(700_000)).toContain(`aformat=sample_rates=${FLAC_MAX_SAMPLE_RATE_HZ}`);
    expect(flacSampleRate(655_350)).toBe(FLAC_MAX_SAMPLE_RATE_HZ);
  });

  describe('against real ffmpeg 5.1', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'ap-channels-'));
      // 12 distinct channels (a sine each), 0.2 s, and a 700 kHz stereo tone.
      const pads = Array.from({ length: 12 }, (_, i) => `[a${i}]`).join('');
      const sines = Array.from(
        { length: 12 },
        (_, i) => `sine=f=${200 + 50 * i}:d=0.2[a${i}]`,
      ).join(';');
      for (const [name, graph] of [
        ['ch12.wav', `${sines};${pads}amerge=inputs=12`],
        ['ch3.wav', `${sines.split(';').slice(0, 3).join(';')};[a0][a1][a2]amerge=inputs=3`],
        ['hz700k.wav', 'sine=f=440:d=0.2:sample_rate=700000,aformat=channel_layouts=stereo'],
      ] as const) {
        const run = await runTool(DEBIAN_FFMPEG, [
          ...['-nostdin', '-v', 'error', '-filter_complex', graph, '-c:a', 'pcm_s16le'],
          join(dir, name),
        ]);
        expect(run.status, run.stderr).toBe(0);
      }
      // 64 channels with no mask: ffmpeg guesses no layout, so only an explicit fold downmixes.
      const raw = await runTool(DEBIAN_FFMPEG, [
        ...['-nostdin', '-v', 'error', '-f', 's16le', '-ar', '8000', '-ac', '64', '-t', '0.2'],
        ...['-i', '/dev/urandom', '-c:a', 'pcm_s16le', join(dir, 'ch64.wav')],
      ]);
      expect(raw.status, raw.stderr).toBe(0);
    });
    afterAll(() => rm(dir, { recursive: true, force: true }));

    const cases = [
      ...AUDIO_FORMATS.map((format) => ({ format, file: 'ch12.wav', channels: 12, hz: 44_100 })),
      // `norm` pins the channel count with -ac: the pinned count must fit the encoder too.
      ...AUDIO_FORMATS.map((format) => ({
        format: `${format}/norm:ebu` as const,
        file: 'ch12.wav',
        channels: 12,
        hz: 44_100,
      })),
      ...AUDIO_FORMATS.map((format) => ({ format, file: 'ch3.wav', channels: 3, hz: 44_100 })),
      { format: 'flac', file: 'hz700k.wav', channels: 2, hz: 700_000 },
      ...AUDIO_FORMATS.map((format) => ({ format, file: 'ch64.wav', channels: 64, hz: 8_000 })),
      ...AUDIO_FORMATS.map((format) => ({
        format: `${format}/norm:ebu` as const,
        file: 'ch64.wav',
        channels: 64,
        hz: 8_000,
      })),
      { format: 'mp3/ch:1', file: 'ch64.wav', channels: 64, hz: 8_000 },
    ];
    it.concurrent.each(cases)(
      'f:$format of $file ($channels ch, $hz Hz) encodes',
      async ({ format, file, channels, hz }) => {
        const argv = buildRenderArgv(
          opts(`f:${format}`),
          local({ url: join(dir, file), channels, sampleRate: hz }),
        );
        const run = await limit(() => runTool(DEBIAN_FFMPEG, argv));
        // A layout the encoder cannot name (3 channels as 2.1) is only a warning: it encodes.
        expect(run.status, run.stderr).toBe(0);
        expect(run.stdout.byteLength).toBeGreaterThan(0);
      },
      QUEUED_CASE_TIMEOUT_MS,
    );
  });
});

describe('folding a source ffmpeg cannot guess a layout for', () => {
  it('sums channel i into output i mod target, normalised, only past 8 channels', () => {
    expect(foldFilter(8, 2)).toEqual([]);
    expect(foldFilter(12, 12)).toEqual([]);
    expect(foldFilter(undefined, 2)).toEqual([]);
    expect(foldFilter(12, undefined)).toEqual([]);
    expect(foldFilter(9, 2)).toEqual(['pan=stereo|c0<c0+c2+c4+c6+c8|c1<c1+c3+c5+c7']);
    expect(foldFilter(10, 1)).toEqual([
      `pan=mono|c0<${[...Array(10).keys()].map((i) => `c${i}`).join('+')}`,
    ]);
    expect(foldFilter(64, 8)[0]).toMatch(/^pan=7\.1\|c0<c0\+c8\+/);
    expect(() => foldFilter(64, 3)).toThrow(RangeError);
  });
});
