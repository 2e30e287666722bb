/**
 * The argv builders: exact shape for representative options, the filter-order and number rules,
 * the protocol whitelist per source kind, and (property) that no URL byte ever becomes a flag.
 * Then the argv is run for real: Debian ffmpeg on generated fixtures, checking container magic
 * and, through ffprobe and a PCM decode, that `t`, `ch`, `sr`, `gain` and `fade` did what they
 * say; and the npm-shipped 2018 ffmpeg on one argv per format.
 */
import { copyFile, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pLimit from 'p-limit';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RenderOptions } from '../../src/core/variant.js';
import { parseOptions } from '../../src/http/options.js';
import {
  ARGV_FLAGS,
  type ArgvInput,
  AUDIO_DEMUXERS,
  buildPeaksDecodeArgv,
  buildRenderArgv,
  ENHANCE_CHAINS,
  FD_INPUT_PATH,
  protocolWhitelist,
} from '../../src/workers/argv.js';
import { type AudioFixtures, makeFixtures, runTool } from '../fixtures/audio.js';

const NPM_FFMPEG = join(process.cwd(), 'node_modules/@ffmpeg-installer/linux-x64/ffmpeg');
const DEBIAN_FFMPEG = 'ffmpeg';
const DURATION_TOLERANCE_S = 0.08; // codec priming/padding: aac 1024, mp3 ≤1152+1105 frames
const limit = pLimit(2); // two ffmpeg processes at a time: the machine has two cores
/** Concurrent cases queue behind `limit`, so each one's clock includes the others' runs. */
const QUEUED_CASE_TIMEOUT_MS = 120_000;

function opts(text: string): RenderOptions {
  const parsed = parseOptions(text);
  if (!parsed.ok) throw new Error(`fixture options invalid: ${text}: ${parsed.message}`);
  return parsed.options;
}

const local = (url: string, extra: Partial<ArgvInput> = {}): ArgvInput => ({
  url,
  kind: 'local',
  ...extra,
});

/** The value following `flag` in `argv`. */
function valueAfter(argv: readonly string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i === -1 ? undefined : argv[i + 1];
}

describe('buildRenderArgv: shape', () => {
  it('builds the documented argv for an opus preview read through the source descriptor', () => {
    const argv = buildRenderArgv(opts('f:opus/br:96/t:12.5:30/fade:0.5:1'), {
      url: FD_INPUT_PATH,
      kind: 'local',
      maxDurationS: 21_600,
    });
    expect(argv).toEqual([
      ...['-nostdin', '-nostats', '-hide_banner', '-loglevel', 'error'],
      ...['-protocol_whitelist', 'file', '-format_whitelist', AUDIO_DEMUXERS.join(',')],
      ...['-ss', '12.5', '-t', '30', '-i', 'file:/proc/self/fd/3'],
      ...['-vn', '-sn', '-dn'],
      // No probe: the trim pad is counted at the lowest lossy rate (10 ms at 7350 Hz).
      ...['-af', 'afade=t=in:st=0:d=0.5,afade=t=out:st=29:d=1,apad=whole_len=73'],
      ...['-c:a', 'libopus', '-b:a', '96k', '-t', '21600'],
      ...['-flush_packets', '0', '-blocksize', '16384', '-f', 'ogg', 'pipe:1'],
    ]);
  });

  it('confines every run to the file protocol and the audio demuxers; no TLS, no URL', () => {
    const o = opts('f:mp3');
    for (const argv of [
      buildRenderArgv(o, local('/srv/a.wav')),
      buildPeaksDecodeArgv(opts('f:peaks'), local('/srv/a.wav'), { sampleRate: 8000, channels: 1 }),
    ]) {
      expect(valueAfter(argv, '-protocol_whitelist')).toBe('file');
      expect(valueAfter(argv, '-format_whitelist')).toBe(AUDIO_DEMUXERS.join(','));
      expect(argv).not.toContain('-tls_verify');
    }
    for (const forbidden of ['hls', 'dash', 'concat', 'image2', 'tty', 'lavfi', 'mpegts', 'sbg']) {
      expect(AUDIO_DEMUXERS).not.toContain(forbidden);
    }
    expect(() => buildRenderArgv(o, { url: 'https://h/a.wav', kind: 'https' as never })).toThrow(
      /spooled by the proxy/,
    );
    expect(() => buildRenderArgv(o, { url: 'https://s3/b/k', kind: 's3' as never })).toThrow(
      TypeError,
    );
  });

  it('bounds the output with -t before the muxer only when maxDurationS is given', () => {
    const bounded = buildRenderArgv(opts('f:wav'), local('/srv/a.wav', { maxDurationS: 60 }));
    expect(bounded.slice(-9)).toEqual([
      ...['-t', '60', '-flush_packets', '0', '-blocksize', '16384'],
      ...['-f', 'wav', 'pipe:1'],
    ]);
    expect(buildRenderArgv(opts('f:wav'), local('/srv/a.wav')).slice(-9, -7)).not.toContain('-t');
    expect(() => buildRenderArgv(opts('f:wav'), local('/srv/a.wav', { maxDurationS: 0 }))).toThrow(
      RangeError,
    );
  });

  it('defaults to mp3 with no filters and no -ac', () => {
    const argv = buildRenderArgv(opts(''), local('/srv/a.wav'));
    expect(argv.slice(-12)).toEqual([
      '-vn',
      '-sn',
      '-dn',
      '-c:a',
      'libmp3lame',
      ...['-flush_packets', '0', '-blocksize', '16384'],
      '-f',
      'mp3',
      'pipe:1',
    ]);
    expect(argv).not.toContain('-af');
    expect(argv).not.toContain('-ac');
    expect(argv).not.toContain('-ss');
  });

  it('maps each format to its encoder and muxer', () => {
    const cases: [string, string, string][] = [
      ['f:mp3', 'libmp3lame', 'mp3'],
      ['f:opus', 'libopus', 'ogg'],
      ['f:ogg', 'libvorbis', 'ogg'],
      ['f:aac', 'aac', 'adts'],
      ['f:m4a', 'aac', 'mp4'],
      ['f:flac', 'flac', 'flac'],
      ['f:wav', 'pcm_s16le', 'wav'],
    ];
    for (const [text, encoder, muxer] of cases) {
      const argv = buildRenderArgv(opts(text), local('/a.wav'));
      expect([valueAfter(argv, '-c:a'), valueAfter(argv, '-f')], text).toEqual([encoder, muxer]);
    }
  });

  it('maps q to the codec’s own scale and br to kbps', () => {
    expect(valueAfter(buildRenderArgv(opts('f:mp3/q:2.5'), local('/a')), '-q:a')).toBe('2.5');
    expect(valueAfter(buildRenderArgv(opts('f:ogg/q:-1'), local('/a')), '-q:a')).toBe('-1');
    expect(valueAfter(buildRenderArgv(opts('f:m4a/q:0.1'), local('/a')), '-q:a')).toBe('0.1');
    expect(
      valueAfter(buildRenderArgv(opts('f:opus/q:10'), local('/a')), '-compression_level'),
    ).toBe('10');
    expect(valueAfter(buildRenderArgv(opts('f:flac/q:8'), local('/a')), '-compression_level')).toBe(
      '8',
    );
    expect(valueAfter(buildRenderArgv(opts('f:aac/br:1'), local('/a')), '-b:a')).toBe('1k');
  });

  it('fragments m4a on time so it streams', () => {
    const argv = buildRenderArgv(opts('f:m4a'), local('/a'));
    expect(valueAfter(argv, '-movflags')).toBe('empty_moov+default_base_moof');
    expect(valueAfter(argv, '-frag_duration')).toBe('1000000');
  });

  it('picks the PCM encoder from bd, else from the source depth, else 16-bit', () => {
    const wav = (text: string, bitDepth?: number) =>
      valueAfter(buildRenderArgv(opts(text), local('/a', bitDepth ? { bitDepth } : {})), '-c:a');
    expect(wav('f:wav/bd:24')).toBe('pcm_s24le');
    expect(wav('f:wav/bd:32f')).toBe('pcm_f32le');
    expect(wav('f:wav/bd:16', 24)).toBe('pcm_s16le');
    expect(wav('f:wav', 24)).toBe('pcm_s24le');
    expect(wav('f:wav', 32)).toBe('pcm_s24le');
    expect(wav('f:wav', 8)).toBe('pcm_s16le');
    expect(wav('f:wav')).toBe('pcm_s16le');
    expect(valueAfter(buildRenderArgv(opts('f:flac/bd:24'), local('/a')), '-sample_fmt')).toBe(
      's32',
    );
    expect(valueAfter(buildRenderArgv(opts('f:flac/bd:16'), local('/a')), '-sample_fmt')).toBe(
      's16',
    );
  });

  it('orders filters enhance → loudnorm → volume → resample → afade → trim pad', () => {
    const argv = buildRenderArgv(
      opts('f:mp3/enhance:voice/norm:ebu:-14:-1:9/gain:-3/sr:44100/t:0:10/fade:1:2'),
      local('/a'),
    );
    expect(valueAfter(argv, '-af')).toBe(
      [
        ENHANCE_CHAINS.voice,
        'loudnorm=I=-14:TP=-1:LRA=9',
        'volume=-3dB',
        'aformat=sample_rates=44100',
        'afade=t=in:st=0:d=1',
        'afade=t=out:st=8:d=2',
        'apad=whole_len=441',
      ].join(','),
    );
  });

  it('pins the voice preset to one exact chain', () => {
    expect(ENHANCE_CHAINS.voice).toBe(
      'highpass=f=80,afftdn=nr=12:nf=-30,deesser=i=0.4:m=0.5:f=0.5:s=o,' +
        'acompressor=threshold=0.125:ratio=3:attack=20:release=250:makeup=2,' +
        'alimiter=limit=0.977:level=disabled',
    );
  });

  it('resamples after loudnorm to the source rate, capped for lossy, 48 kHz when unknown', () => {
    const af = (text: string, sampleRate?: number) =>
      valueAfter(buildRenderArgv(opts(text), local('/a', sampleRate ? { sampleRate } : {})), '-af');
    expect(af('f:mp3/norm:ebu', 96_000)).toBe(
      'loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=48000',
    );
    expect(af('f:mp3/norm:ebu', 22_050)).toBe(
      'loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=22050',
    );
    expect(af('f:flac/norm:ebu', 96_000)).toBe(
      'loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=96000',
    );
    expect(af('f:flac/norm:ebu')).toBe('loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=48000');
    expect(af('f:flac/norm:ebu/sr:8000', 96_000)).toBe(
      'loudnorm=I=-16:TP=-1.5:LRA=11,aformat=sample_rates=8000',
    );
    expect(af('f:flac/sr:8000', 96_000)).toBe('aformat=sample_rates=8000');
    expect(af('f:flac', 96_000)).toBeUndefined();
  });

  it('pins the source channel count under norm (a seek breaks layout negotiation otherwise)', () => {
    const ac = (text: string, channels?: number) =>
      valueAfter(buildRenderArgv(opts(text), local('/a', channels ? { channels } : {})), '-ac');
    expect(ac('f:wav/norm:ebu', 6)).toBe('6');
    expect(ac('f:wav/norm:ebu/ch:1', 6)).toBe('1');
    expect(ac('f:wav/norm:ebu')).toBeUndefined();
    expect(ac('f:wav', 6)).toBeUndefined();
    expect(() => ac('f:wav/norm:ebu', 65)).toThrow(RangeError);
  });

  it('computes the fade-out start in whole milliseconds', () => {
    const argv = buildRenderArgv(opts('f:wav/t:5:0.3/fade:0.1:0.2'), local('/a'));
    expect(valueAfter(argv, '-af')).toBe(
      'afade=t=in:st=0:d=0.1,afade=t=out:st=0.1:d=0.2,apad=whole_len=73',
    );
    expect(argv.slice(argv.indexOf('-ss'), argv.indexOf('-i'))).toEqual(['-ss', '5', '-t', '0.3']);
  });

  it('keeps gain:0, t:0 and fade:0 as written (no-ops are distinct keys, not dropped stages)', () => {
    const argv = buildRenderArgv(opts('f:wav/gain:0/t:0/fade:0'), local('/a'));
    expect(valueAfter(argv, '-af')).toBe('volume=0dB,apad=whole_len=73');
    expect(valueAfter(argv, '-ss')).toBe('0');
    expect(argv).not.toContain('-t');
  });

  it('is deterministic: equal options build equal argv', () => {
    const a = buildRenderArgv(opts('br:96/f:opus/t:1:2'), local('/a'));
    const b = buildRenderArgv(opts('t:1:2/f:opus/br:96'), local('/a'));
    expect(a).toEqual(b);
  });
});

describe('source kinds and the protocol whitelist', () => {
  it('reads a local path as file: only, even when its name looks like a protocol', () => {
    for (const url of ['/srv/a.wav', '/srv/concat:a|b.wav', '/https://evil.test/x']) {
      const argv = buildRenderArgv(opts(''), { url, kind: 'local' });
      expect(valueAfter(argv, '-protocol_whitelist')).toBe('file');
      expect(valueAfter(argv, '-i')).toBe(`file:${url}`);
    }
    expect(valueAfter(buildRenderArgv(opts(''), local('file:/a.wav')), '-i')).toBe('file:/a.wav');
  });

  it('has no whitelist for remote kinds: they are spooled by the proxy', () => {
    expect(() => protocolWhitelist({ url: 'https://h/a', kind: 'https' as never })).toThrow(
      TypeError,
    );
    expect(() => protocolWhitelist({ url: 'http://minio:9000/b/k', kind: 's3' as never })).toThrow(
      TypeError,
    );
  });

  it('refuses an input that contradicts its kind, and unknown kinds', () => {
    expect(() => buildRenderArgv(opts(''), { url: 'http://h/a', kind: 'https' as never })).toThrow(
      TypeError,
    );
    expect(() => buildRenderArgv(opts(''), { url: '/etc/passwd', kind: 's3' as never })).toThrow(
      TypeError,
    );
    expect(() => buildRenderArgv(opts(''), { url: '', kind: 'local' })).toThrow(TypeError);
    expect(() => buildRenderArgv(opts(''), { url: 'a.wav', kind: 'local' })).toThrow(/absolute/);
    expect(() => buildRenderArgv(opts(''), { url: '/a', kind: 'ftp' as never })).toThrow(TypeError);
  });

  it('refuses options that violate the grammar’s own preconditions', () => {
    const bad = (o: RenderOptions) => () => buildRenderArgv(o, local('/a'));
    expect(bad({ format: 'peaks', pts: 10, channels: 1 })).toThrow(TypeError);
    expect(bad({ format: 'mp3', fade: { in: 0, out: 1 } })).toThrow(/bounded trim/);
    expect(bad({ format: 'wav', quality: 5 })).toThrow(/q does not apply/);
    expect(bad({ format: 'flac', bitrateK: 128 })).toThrow(/br does not apply/);
    expect(bad({ format: 'flac', bitDepth: '32f' })).toThrow(/wav-only/);
    expect(bad({ format: 'mp3', channels: 3 as never })).toThrow(RangeError);
  });
});

describe('argv property: the vocabulary is closed and the URL is data', () => {
  const optionText = fc
    .record(
      {
        f: fc.constantFrom('mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav'),
        br: fc.integer({ min: 1, max: 320 }),
        ch: fc.constantFrom(1, 2),
        sr: fc.constantFrom(8000, 22050, 44100, 48000),
        t: fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 2000, max: 9000 })),
        fade: fc.tuple(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 500 })),
        gain: fc.integer({ min: -100_000, max: 100_000 }),
        norm: fc.constant('ebu'),
        enhance: fc.constant('voice'),
      },
      { requiredKeys: ['f'] },
    )
    .map((r) => {
      const lossy = !['flac', 'wav'].includes(r.f);
      const parts = [`f:${r.f}`];
      if (r.br !== undefined && lossy) parts.push(`br:${r.br}`);
      if (r.ch !== undefined) parts.push(`ch:${r.ch}`);
      if (r.sr !== undefined) parts.push(`sr:${r.sr}`);
      if (r.t !== undefined) parts.push(`t:${r.t[0] / 1000}:${r.t[1] / 1000}`);
      if (r.t !== undefined && r.fade !== undefined) {
        parts.push(`fade:${r.fade[0] / 1000}:${r.fade[1] / 1000}`);
      }
      if (r.gain !== undefined) parts.push(`gain:${r.gain / 1000}`);
      if (r.norm !== undefined) parts.push(`norm:${r.norm}`);
      if (r.enhance !== undefined) parts.push(`enhance:${r.enhance}`);
      return parts.join('/');
    });
  const hostileUrl = fc.string({ minLength: 1, maxLength: 40 }).map((s) => `/srv/-i ${s}`);

  it('every flag is in ARGV_FLAGS, values follow their flags, the URL is one element', () => {
    fc.assert(
      fc.property(optionText, hostileUrl, (text, url) => {
        const argv = buildRenderArgv(opts(text), local(url));
        let sawInput = 0;
        for (let i = 0; i < argv.length - 1; i++) {
          const flag = argv[i]!;
          expect(flag in ARGV_FLAGS, `${flag} in ${argv.join(' ')}`).toBe(true);
          if (flag === '-i') {
            sawInput += 1;
            expect(argv[i + 1]).toBe(`file:${url}`);
          }
          i += ARGV_FLAGS[flag]!;
        }
        expect(sawInput).toBe(1);
        expect(argv.at(-1)).toBe('pipe:1');
        expect(buildRenderArgv(opts(text), local(url))).toEqual(argv);
      }),
      { numRuns: 300 },
    );
  });
});

describe('buildPeaksDecodeArgv', () => {
  it('decodes to s16le at the reducer’s rate and interleaving, with the same processing', () => {
    const argv = buildPeaksDecodeArgv(
      opts('f:peaks/ch:2/t:1:4/fade:0.5:0.5/gain:3/norm:ebu/enhance:voice'),
      local('/a.flac'),
      { sampleRate: 44_100, channels: 2 },
    );
    expect(argv.slice(argv.indexOf('-ss'), argv.indexOf('-i') + 2)).toEqual([
      ...['-ss', '1', '-t', '4', '-i', 'file:/a.flac'],
    ]);
    expect(valueAfter(argv, '-af')).toBe(
      [
        ENHANCE_CHAINS.voice,
        'loudnorm=I=-16:TP=-1.5:LRA=11',
        'volume=3dB',
        'aformat=sample_rates=44100',
        'afade=t=in:st=0:d=0.5',
        'afade=t=out:st=3.5:d=0.5',
      ].join(','),
    );
    expect(argv.slice(-7)).toEqual(['-ac', '2', '-c:a', 'pcm_s16le', '-f', 's16le', 'pipe:1']);
  });

  it('always pins the rate (the frame budget is computed at it) and refuses non-peaks', () => {
    const argv = buildPeaksDecodeArgv(opts('f:peaks'), local('/a'), {
      sampleRate: 48_000,
      channels: 1,
    });
    expect(valueAfter(argv, '-af')).toBe('aformat=sample_rates=48000');
    expect(valueAfter(argv, '-ac')).toBe('1');
    expect(() =>
      buildPeaksDecodeArgv(opts('f:mp3'), local('/a'), { sampleRate: 1, channels: 1 }),
    ).toThrow(TypeError);
    expect(() =>
      buildPeaksDecodeArgv(opts('f:peaks'), local('/a'), { sampleRate: 0, channels: 1 }),
    ).toThrow(RangeError);
  });
});

// ---------------------------------------------------------------------------------------------
// Real ffmpeg

interface Probed {
  codec: string;
  sampleRate: number;
  channels: number;
  bitsPerRawSample?: number;
  /** Decoded duration: PCM frames actually produced ÷ rate. */
  decodedS: number;
  /** Largest absolute sample in the first and in the middle 50 ms, decoded as s16. */
  headPeak: number;
  middlePeak: number;
}

async function probeOutput(file: string): Promise<Probed> {
  const probe = await runTool('ffprobe', [
    ...['-v', 'error', '-show_streams', '-select_streams', 'a:0', '-of', 'json', file],
  ]);
  expect(probe.status, probe.stderr).toBe(0);
  const stream = JSON.parse(probe.stdout.toString()).streams[0];
  const channels = Number(stream.channels);
  const sampleRate = Number(stream.sample_rate);
  const pcm = await runTool(DEBIAN_FFMPEG, [
    ...['-nostdin', '-v', 'error', '-i', file, '-f', 's16le', '-c:a', 'pcm_s16le', 'pipe:1'],
  ]);
  expect(pcm.status, pcm.stderr).toBe(0);
  const frames = pcm.stdout.byteLength / 2 / channels;
  const window = Math.round(sampleRate * 0.05);
  const peakIn = (startFrame: number) => {
    let peak = 0;
    for (let f = startFrame; f < Math.min(startFrame + window, frames); f++) {
      for (let c = 0; c < channels; c++) {
        peak = Math.max(peak, Math.abs(pcm.stdout.readInt16LE((f * channels + c) * 2)));
      }
    }
    return peak;
  };
  const bits = Number(stream.bits_per_raw_sample);
  return {
    codec: stream.codec_name,
    sampleRate,
    channels,
    ...(Number.isFinite(bits) ? { bitsPerRawSample: bits } : {}),
    decodedS: frames / sampleRate,
    headPeak: peakIn(0),
    middlePeak: peakIn(Math.floor(frames / 2)),
  };
}

const ascii = (b: Buffer, at: number, text: string) =>
  b.subarray(at, at + text.length).toString('latin1') === text;

const MAGIC: Record<string, (b: Buffer) => boolean> = {
  mp3: (b) => {
    if (!ascii(b, 0, 'ID3')) return b[0] === 0xff && (b[1]! & 0xe0) === 0xe0;
    const size = ((b[6]! & 0x7f) << 21) | ((b[7]! & 0x7f) << 14) | ((b[8]! & 0x7f) << 7) | b[9]!;
    const frame = 10 + size;
    return b[frame] === 0xff && (b[frame + 1]! & 0xe0) === 0xe0;
  },
  opus: (b) => ascii(b, 0, 'OggS') && ascii(b, 28, 'OpusHead'),
  ogg: (b) => ascii(b, 0, 'OggS') && ascii(b, 28, '\x01vorbis'),
  aac: (b) => b[0] === 0xff && b[1] === 0xf1,
  m4a: (b) => ascii(b, 4, 'ftyp') && b.includes('moov') && b.includes('moof'),
  flac: (b) => ascii(b, 0, 'fLaC'),
  wav: (b) => ascii(b, 0, 'RIFF') && ascii(b, 8, 'WAVE'),
};

interface RealCase {
  readonly options: string;
  readonly source: 'stereoWav' | 'monoMp3' | 'tinyFlac';
  readonly expect: {
    readonly durationS: number;
    readonly channels: number;
    readonly sampleRate: number;
    readonly codec?: string;
    readonly bits?: number;
  };
  readonly check?: (p: Probed, out: Buffer) => void;
}

/** What the probe says about each fixture, as the render path passes it on. */
const SOURCE_PROBES = {
  stereoWav: { sampleRate: 44_100, channels: 2 },
  monoMp3: { sampleRate: 44_100, channels: 1 },
  tinyFlac: { sampleRate: 48_000, channels: 2 },
} as const;

const SINE_PEAK = 4096; // lavfi sine's amplitude 1/8 of full scale, as s16

const REAL_CASES: readonly RealCase[] = [
  {
    options: 'f:mp3/br:128/t:0.5:1',
    source: 'stereoWav',
    expect: { durationS: 1, channels: 2, sampleRate: 44_100, codec: 'mp3' },
  },
  {
    options: 'f:mp3/q:4/ch:1/sr:22050',
    source: 'stereoWav',
    expect: { durationS: 3, channels: 1, sampleRate: 22_050, codec: 'mp3' },
  },
  {
    options: 'f:opus/br:64/ch:1/t:1:1.5',
    source: 'stereoWav',
    expect: { durationS: 1.5, channels: 1, sampleRate: 48_000, codec: 'opus' },
  },
  {
    options: 'f:opus/q:5/enhance:voice/norm:ebu',
    source: 'monoMp3',
    expect: { durationS: 2.04, channels: 1, sampleRate: 48_000, codec: 'opus' },
  },
  {
    options: 'f:ogg/q:3/sr:32000',
    source: 'stereoWav',
    expect: { durationS: 3, channels: 2, sampleRate: 32_000, codec: 'vorbis' },
  },
  {
    options: 'f:aac/br:96/t:0:2/ch:1',
    source: 'stereoWav',
    expect: { durationS: 2, channels: 1, sampleRate: 44_100, codec: 'aac' },
  },
  {
    options: 'f:m4a/q:1/fade:0.5',
    source: 'stereoWav',
    expect: { durationS: 3, channels: 2, sampleRate: 44_100, codec: 'aac' },
    check: (p, out) => {
      expect(countBoxes(out, 'moof')).toBeGreaterThanOrEqual(3); // one per second of audio
      expect(p.headPeak).toBeLessThan(p.middlePeak / 4);
    },
  },
  {
    options: 'f:flac/bd:24/t:0.25',
    source: 'stereoWav',
    expect: { durationS: 2.75, channels: 2, sampleRate: 44_100, codec: 'flac', bits: 24 },
  },
  {
    options: 'f:flac/q:8/sr:22050/ch:1',
    source: 'tinyFlac',
    expect: { durationS: 1, channels: 1, sampleRate: 22_050, codec: 'flac', bits: 24 },
  },
  {
    // loudnorm hands back 192 kHz; without sr the render returns to the source's own rate.
    options: 'f:flac/norm:ebu:-20',
    source: 'tinyFlac',
    expect: { durationS: 1, channels: 2, sampleRate: 48_000, codec: 'flac', bits: 24 },
  },
  {
    // A seek plus loudnorm needs the channel count pinned, or layout negotiation fails.
    options: 'f:wav/t:0.2:1/norm:ebu',
    source: 'stereoWav',
    expect: { durationS: 1, channels: 2, sampleRate: 44_100, codec: 'pcm_s16le' },
  },
  {
    options: 'f:aac/t:0.5:0.5/norm:ebu:-23',
    source: 'tinyFlac',
    expect: { durationS: 0.5, channels: 2, sampleRate: 48_000, codec: 'aac' },
  },
  {
    options: 'f:wav/bd:32f/t:1:1',
    source: 'stereoWav',
    expect: { durationS: 1, channels: 2, sampleRate: 44_100, codec: 'pcm_f32le' },
  },
  {
    options: 'f:wav/sr:8000/ch:1/gain:-6.021',
    source: 'stereoWav',
    expect: { durationS: 3, channels: 1, sampleRate: 8000, codec: 'pcm_s16le' },
    check: (p) => {
      // -6.021 dB halves the amplitude; the mono downmix of two equal tones stays below 1/8.
      expect(p.middlePeak).toBeLessThanOrEqual(SINE_PEAK / 2 + 8);
      expect(p.middlePeak).toBeGreaterThan(SINE_PEAK / 8);
    },
  },
  {
    options: 'f:wav/t:0:2/fade:1:0.5/norm:ebu/gain:1',
    source: 'stereoWav',
    expect: { durationS: 2, channels: 2, sampleRate: 44_100, codec: 'pcm_s16le' },
    check: (p) => expect(p.headPeak).toBeLessThan(p.middlePeak / 10),
  },
];

function countBoxes(b: Buffer, type: string): number {
  let count = 0;
  let at = b.indexOf(type);
  while (at !== -1) {
    count += 1;
    at = b.indexOf(type, at + 4);
  }
  return count;
}

describe('real ffmpeg (Debian 5.1) on generated fixtures', () => {
  let fx: AudioFixtures;
  let work: string;
  beforeAll(async () => {
    fx = await makeFixtures();
    work = await mkdtemp(join(tmpdir(), 'argv-test-'));
  });

  it.concurrent.each(REAL_CASES)(
    '$options from $source',
    async (c) => {
      const options = opts(c.options);
      const argv = buildRenderArgv(options, local(fx[c.source], SOURCE_PROBES[c.source]));
      const run = await limit(() => runTool(DEBIAN_FFMPEG, argv));
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toBe('');
      expect(MAGIC[options.format]!(run.stdout), `${options.format} magic`).toBe(true);
      const file = join(work, `${c.options.replaceAll(/[/:]/g, '_')}.${options.format}`);
      await writeFile(file, run.stdout);
      const probed = await limit(() => probeOutput(file));
      expect(probed.channels).toBe(c.expect.channels);
      expect(probed.sampleRate).toBe(c.expect.sampleRate);
      if (c.expect.codec) expect(probed.codec).toBe(c.expect.codec);
      if (c.expect.bits) expect(probed.bitsPerRawSample).toBe(c.expect.bits);
      expect(Math.abs(probed.decodedS - c.expect.durationS)).toBeLessThan(DURATION_TOLERANCE_S);
      c.check?.(probed, run.stdout);
    },
    QUEUED_CASE_TIMEOUT_MS,
  );

  it('reads a local file whose name would otherwise parse as a protocol', async () => {
    const odd = join(work, 'concat:looks|like-a-protocol.wav');
    await copyFile(fx.stereoWav, odd);
    const run = await limit(() =>
      runTool(DEBIAN_FFMPEG, buildRenderArgv(opts('f:wav/t:0:0.5'), local(odd))),
    );
    expect(run.status, run.stderr).toBe(0);
    expect(MAGIC.wav!(run.stdout)).toBe(true);
  });

  it('a local playlist cannot make ffmpeg fetch from the network', async () => {
    const playlist = join(work, 'pivot.m3u8');
    await writeFile(
      playlist,
      '#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nhttp://127.0.0.1:9/seg.ts\n#EXT-X-ENDLIST\n',
    );
    const run = await limit(() =>
      runTool(DEBIAN_FFMPEG, buildRenderArgv(opts(''), local(playlist))),
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/not on whitelist/);
  });

  it('the peaks decode produces exactly the budgeted interleaved frames', async () => {
    const argv = buildPeaksDecodeArgv(opts('f:peaks/ch:2/t:0.5:2'), local(fx.stereoWav), {
      sampleRate: 22_050,
      channels: 2,
    });
    const run = await limit(() => runTool(DEBIAN_FFMPEG, argv));
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.byteLength).toBe(2 * 22_050 * 2 * 2);
  });
});

describe('npm-shipped ffmpeg (2018 static build)', () => {
  let fx: AudioFixtures;
  beforeAll(async () => {
    fx = await makeFixtures();
  });

  const PER_FORMAT = [
    'f:mp3/br:96/t:0:1/fade:0.2:0.2',
    'f:opus/q:4/ch:1/t:0:1',
    'f:ogg/br:96/sr:22050/t:0:1',
    'f:aac/q:1/t:0:1/gain:-2',
    'f:m4a/br:64/t:0.5:1/norm:ebu',
    'f:flac/bd:24/t:0:1',
    'f:wav/bd:32f/ch:1/t:0:1',
  ];

  it.concurrent.each(PER_FORMAT)(
    '%s encodes and carries its container magic',
    async (text) => {
      const options = opts(text);
      const argv = buildRenderArgv(options, local(fx.stereoWav, SOURCE_PROBES.stereoWav));
      const run = await limit(() => runTool(NPM_FFMPEG, argv));
      expect(run.status, run.stderr).toBe(0);
      expect(MAGIC[options.format]!(run.stdout)).toBe(true);
    },
    QUEUED_CASE_TIMEOUT_MS,
  );

  it('decodes peaks PCM', async () => {
    const argv = buildPeaksDecodeArgv(opts('f:peaks/t:0:1'), local(fx.stereoWav), {
      sampleRate: 44_100,
      channels: 1,
    });
    const run = await limit(() => runTool(NPM_FFMPEG, argv));
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.byteLength).toBe(44_100 * 2);
  });

  it('lacks deesser, so enhance:voice fails there (a known limit of the 2018 build)', async () => {
    const argv = buildRenderArgv(opts('f:mp3/enhance:voice/t:0:1'), local(fx.stereoWav));
    const run = await limit(() => runTool(NPM_FFMPEG, argv));
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/No such filter: 'deesser'/);
  });
});
