/**
 * The ffmpeg argument vectors: validated `RenderOptions` plus a resolved source in, argv out.
 *
 * This is the last leg of the promise the cache key makes: options that normalise alike build
 * byte-identical argv, so one key names one output. Both builders are pure; nothing here spawns,
 * reads the environment or looks at the file system.
 *
 * ## Invariants
 * - **Fixed shape.** Baseline flags, the input protocol whitelist, input-side seek (`-ss`/`-t`
 *   before `-i`, so only the trimmed region is decoded and it starts at t=0),
 *   the input, `-vn -sn -dn`, the filter chain, `-ac`, codec arguments, the output bound, the
 *   output's block writes (`OUTPUT_WRITES`), `-f <muxer> pipe:1`.
 *   The argv depends only on the options and the source (with its probe), never on the moment.
 * - **No URL byte becomes a flag.** The input is one argv element after `-i`; a local path is
 *   prefixed `file:` so a name such as `concat:a|b` or `https:x` stays a file name. Every flag
 *   emitted is in `ARGV_FLAGS`, and every filter value is a number the options layer bounded.
 * - **ffmpeg never chooses what to read.** The proxy opens every source itself (a local file,
 *   or a private spool of a remote one) and the child inherits it as fd 3; the input is
 *   `file:/proc/self/fd/3` (`FD_INPUT_PATH`), a reopen of that inode, not a path walk. Remote
 *   kinds are refused here (TypeError): ffmpeg speaks no network protocol. Every run carries
 *   `-protocol_whitelist file` and `-format_whitelist AUDIO_DEMUXERS`, so no playlist,
 *   manifest, concat, image or tty demuxer runs, and no demuxer that could open a second input.
 * - **Output is bounded in time.** With `maxDurationS` the output stops there (`-t` before the
 *   muxer): a backstop for a source whose probe understated its length.
 * - **Filter order is load-bearing:** enhance → loudnorm → volume → resample → afade → apad.
 *   Cleanup precedes measuring; `gain` offsets the normalised result; loudnorm outputs 192 kHz,
 *   so a resample follows it (`aformat=sample_rates=N`: a literal `aresample` there fails layout
 *   negotiation for PCM, flac and aac); fades shape the signal; the trim pad is silence.
 * - **A preset names one chain forever.** Improving `voice` means adding `voice2`.
 * - **A valid option always renders** (a 422 would break the contract): each value maps onto
 *   the nearest the encoder takes; the key keeps the URL's. `sr` snaps to the rate table (ogg:
 *   clamped to 8-48 kHz); `br` is clamped into libopus'/libvorbis' window for the output's
 *   channels and rate (LAME and aac clamp themselves). Limits measured on ffmpeg 5.1.
 *   The same holds for what a source brings: more channels than an encoder opens are downmixed
 *   to the most it takes (`ENCODER_CHANNELS`), a flac rate it cannot code is resampled.
 * - **A trim is never empty.** Past the source's end no frame is left (aac writes 0 bytes,
 *   mp3/opus/ogg undecodable headers), so a trim ends in `apad=whole_len=N`: silence only when
 *   the region is under `TRIM_MIN_OUTPUT_S`, identical bytes otherwise. Past the end that is a
 *   200 with ~10 ms of silence, the honest picture of an empty region, not keyed on the probe's
 *   duration (an estimate, e.g. VBR mp3). `whole_len`: the npm 2018 build lacks `whole_dur`.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None. A violated precondition (fade-out without a bounded trim, `q` for wav, an unknown kind)
 * is a programmer error and throws TypeError/RangeError naming it.
 */
import type { Format, HlsCodec, RenderOptions } from '../core/variant.js';
import {
  DEFAULT_HLS_CODEC,
  DEFAULT_HLS_SEGMENT_S,
  HLS_INIT_PART,
  LOSSY_SAMPLE_RATE_CAP_HZ,
  renderNumber,
} from '../core/variant.js';

/** Where a render reads from: always a file the proxy opened (see the header). */
export type SourceKind = 'local';

/** The resolved source, plus what its probe said when the caller has it. */
export interface ArgvInput {
  /** Absolute path (in production always `FD_INPUT_PATH`). One argv element, after `file:`. */
  readonly url: string;
  readonly kind: SourceKind;
  /** The source's sample rate (probe). Target of the resample that `norm` forces without `sr`. */
  readonly sampleRate?: number;
  /** The source's bit depth (probe). What `f:wav` without `bd` follows. */
  readonly bitDepth?: number;
  /** The source's channel count (probe). Pinned with `-ac` under `norm`; see `channelArgs`. */
  readonly channels?: number;
  /** Longest output in seconds (`AP_MAX_DURATION_S`): `-t` before the muxer. */
  readonly maxDurationS?: number;
  /** The source's duration in seconds (probe). What makes a PCM render's length exact. */
  readonly duration?: number;
}

/**
 * A PCM WAV render whose length is fixed before ffmpeg runs: `samples` frames of `channels` ×
 * `bits` at `sampleRate`, behind the proxy's own 44-byte header (`workers/wavHeader.ts`).
 */
export interface ExactWavLayout {
  readonly sampleRate: number;
  readonly channels: number;
  readonly bits: 16 | 24 | 32;
  /** IEEE float samples (`bd:32f`), else signed integers. */
  readonly float: boolean;
  /** Sample frames in the data chunk. */
  readonly samples: number;
  /** Header plus data: what `Content-Length` announces and the store keeps. */
  readonly totalBytes: number;
}

/** The header the proxy writes in front of an exact WAV render's PCM. */
export const WAV_HEADER_BYTES = 44;
/** RIFF sizes are 32-bit: a longer render keeps ffmpeg's own (streamed, unsized) header. */
const RIFF_MAX_DATA_BYTES = 0xffff_ffff - (WAV_HEADER_BYTES - 8);

/** What the peaks reducer was built for: the decode must produce exactly this interleaving. */
export interface PeaksDecodeShape {
  readonly sampleRate: number;
  readonly channels: 1 | 2;
}

/** Only errors reach stderr, so the 4096-byte tail the classifier reads holds the cause. */
const LOG_LEVEL = 'error';
const BASELINE: readonly string[] = [
  '-nostdin',
  '-nostats',
  '-hide_banner',
  '-loglevel',
  LOG_LEVEL,
];
const AUDIO_ONLY: readonly string[] = ['-vn', '-sn', '-dn'];

const LOCAL_PROTOCOLS = 'file'; // no network protocol: a path can never make ffmpeg fetch

/** The descriptor the child reads its input from: the proxy's open file, mapped by spawn. */
export const INPUT_FD = 3; // the first past stdin/stdout/stderr
/** The input ffmpeg/ffprobe open: the inherited descriptor, reopened (seekable, own offset). */
export const FD_INPUT_PATH = `/proc/self/fd/${INPUT_FD}`;

/**
 * The only demuxers any ffmpeg or ffprobe run may use. Audio containers and raw audio streams
 * only, none of which opens a second input: no playlist (hls), manifest (dash), script (concat,
 * sbg), image or tty demuxer, no mpegts/mpeg-ps (video transports), no `lavfi`. `mov` admits the
 * whole `mov,mp4,m4a,3gp,3g2,mj2` family (ffmpeg matches any name in a demuxer's list), whose
 * external data references stay off (`enable_drefs` defaults to 0); `matroska` admits webm; `asf`
 * is WMA's container; `wav` also reads RF64. A video inside mov/matroska/asf is still refused by
 * the probe's policy. Checked on ffmpeg 5.1 and the npm 2018 build: both refuse anything else
 * with `Format … not on whitelist` before reading a byte past the probe buffer.
 */
export const AUDIO_DEMUXERS: readonly string[] = Object.freeze([
  'wav',
  'w64',
  'mp3',
  'flac',
  'ogg',
  'mov',
  'aac',
  'aiff',
  'caf',
  'matroska',
  'ac3',
  'eac3',
  'dts',
  'dtshd',
  'truehd',
  'mlp',
  'wv',
  'ape',
  'tta',
  'tak',
  'shn',
  'mpc',
  'mpc8',
  'amr',
  'au',
  'asf',
  'dsf',
  'voc',
  'xwma',
]);
const FORMAT_WHITELIST = AUDIO_DEMUXERS.join(',');

/**
 * Channel counts each encoder opens with ffmpeg's default layout for that count, measured on
 * ffmpeg 5.1 with `-ac N`: libmp3lame takes mono and stereo; libopus has no mapping for the
 * default 3.0 and 4.0 layouts nor past 8; aac and flac stop at 8; libvorbis and PCM take any.
 */
export const ENCODER_CHANNELS: Readonly<Record<AudioFormat, readonly number[] | 'any'>> =
  Object.freeze({
    mp3: [1, 2],
    opus: [1, 2, 5, 6, 7, 8],
    aac: [1, 2, 3, 4, 5, 6, 7, 8],
    m4a: [1, 2, 3, 4, 5, 6, 7, 8],
    flac: [1, 2, 3, 4, 5, 6, 7, 8],
    ogg: 'any',
    wav: 'any',
  });
/**
 * ffmpeg's flac encoder takes any rate below 65,535 Hz, and above it only multiples of 10 Hz
 * below 655,350 Hz (the header codes such rates in tens of hertz); measured on ffmpeg 5.1.
 */
/**
 * The most channels a `norm` render pins with `-ac`: past 8, ffmpeg 5.1 has no default layout
 * for most counts and swresample refuses to build one ("Output channel layout '12 channels' is
 * not supported"), so a wider source is downmixed to 7.1 first.
 */
export const NORM_MAX_CHANNELS = 8;
/** The widest count ffmpeg 5.1 guesses a layout for (its default layouts for 1..8 channels). */
export const GUESSED_LAYOUT_MAX_CHANNELS = 8;
/** The layouts a fold lands on: every output count a wide source can be asked for. */
const FOLD_LAYOUTS: Readonly<Record<number, string>> = Object.freeze({
  1: 'mono',
  2: 'stereo',
  8: '7.1',
});
export const FLAC_ANY_RATE_BELOW_HZ = 65_535;
export const FLAC_MAX_SAMPLE_RATE_HZ = 655_340;

/** The rate ffmpeg's flac encoder opens for a source at `hz`: `hz` itself when it can. */
export function flacSampleRate(hz: number): number {
  if (hz < FLAC_ANY_RATE_BELOW_HZ) return hz;
  return Math.min(FLAC_MAX_SAMPLE_RATE_HZ, hz - (hz % 10));
}

/** Where a normalised render lands when no probe gave the source rate: the lossy ceiling. */
export const LOUDNORM_FALLBACK_RATE_HZ = 48_000;
/** m4a fragment length: 1 s to first byte; per-frame fragments would add a third to the size. */
export const M4A_FRAGMENT_DURATION_US = 1_000_000;

/** libmp3lame's MPEG-1/2/2.5 rates (`ffmpeg -h encoder=libmp3lame`); it refuses all others. */
export const MP3_SAMPLE_RATES_HZ: readonly number[] = Object.freeze([
  8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000,
]);
/** The aac encoder's sampling-frequency table up to the lossy cap (`-h encoder=aac`). */
export const AAC_SAMPLE_RATES_HZ: readonly number[] = Object.freeze([
  7_350, 8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000,
]);
/** libopus codes at these rates only (`-h encoder=libopus`); the decoder always plays 48 kHz. */
export const OPUS_SAMPLE_RATES_HZ: readonly number[] = Object.freeze([
  8_000, 12_000, 16_000, 24_000, 48_000,
]);
/** libvorbis' lowest rate: it takes any, but has no setup below 8 kHz (at 1-2 Hz, undecodable). */
export const VORBIS_MIN_SAMPLE_RATE_HZ = 8_000;
/** libopus refuses more than 256 kb/s per channel ("between 500 and 256000" per channel). */
export const OPUS_MAX_KBPS_PER_CHANNEL = 256;

/** One libvorbis setup template's ABR window, in kb/s for the whole stream. */
export interface VorbisAbrBand {
  /** The band covers `fromHz <= rate < belowHz`. */
  readonly fromHz: number;
  readonly belowHz: number;
  readonly mono: readonly [minK: number, maxK: number];
  readonly stereo: readonly [minK: number, maxK: number];
}

/**
 * Where libvorbis' managed (ABR) mode opens, per setup template: outside a band's window the
 * encoder setup fails. Measured with `-b:a` on ffmpeg 5.1 at both edges of every band; at an
 * edge two templates overlap and the window is their union, so the band's own is a safe subset.
 * More than two channels are coded uncoupled: the mono window per channel. Above 50 kHz there is
 * no ABR template at all, so a `br` render is resampled into the table.
 */
export const VORBIS_ABR_BANDS: readonly VorbisAbrBand[] = Object.freeze([
  { fromHz: 8_000, belowHz: 9_000, mono: [8, 42], stereo: [12, 84] },
  { fromHz: 9_000, belowHz: 15_000, mono: [12, 50], stereo: [16, 100] },
  { fromHz: 15_000, belowHz: 19_000, mono: [16, 100], stereo: [24, 200] },
  { fromHz: 19_000, belowHz: 26_000, mono: [16, 90], stereo: [30, 180] },
  { fromHz: 26_000, belowHz: 40_000, mono: [30, 190], stereo: [36, 380] },
  { fromHz: 40_000, belowHz: 50_001, mono: [32, 240], stereo: [45, 500] },
] as const);

/** The shortest output a trimmed render produces: past the source's end, this much silence. */
export const TRIM_MIN_OUTPUT_S = 0.01; // one encoder frame or less: present, but plainly empty
/** The rate the trim pad is counted at when no probe gave one. */
export const TRIM_PAD_FALLBACK_RATE_HZ = 7_350; // the lowest lossy rate: the pad never outlasts `t`

/**
 * The pinned preset chains: high-pass under the voice (80 Hz), gentle spectral denoise, de-ess,
 * 3:1 speech compression with 2x makeup, and a -0.2 dBFS limiter (`level=disabled`, or alimiter
 * renormalises to full scale and the ceiling does nothing). `deesser` needs ffmpeg ≥ 4.2.
 */
export const ENHANCE_CHAINS: Readonly<Record<'voice', string>> = Object.freeze({
  voice:
    'highpass=f=80,afftdn=nr=12:nf=-30,deesser=i=0.4:m=0.5:f=0.5:s=o,' +
    'acompressor=threshold=0.125:ratio=3:attack=20:release=250:makeup=2,' +
    'alimiter=limit=0.977:level=disabled',
});

export type AudioFormat = Exclude<Format, 'peaks' | 'hls'>;

/** The encoder (and its option rules) behind each `hls_c`; every segment is fragmented MP4. */
export const HLS_SEGMENT_ENCODINGS: Readonly<Record<HlsCodec, AudioFormat>> = {
  flac: 'flac',
  aac: 'm4a',
  opus: 'opus',
};
/**
 * Decoded and dropped before every HLS segment's window. Without it the first ~2k samples after
 * a seek are the decoder warming up (mp3's bit reservoir and overlap, AAC's and Opus' overlap):
 * measured up to 0.08 full scale off the continuous decode; with 0.5 s the windows of mp3, AAC
 * and Opus sources are sample-identical to it (docs/hls.md).
 */
export const HLS_PREROLL_S = 0.5;
/**
 * Fragmented from the first byte (`empty_moov`), no `mfra` index at the end (`skip_trailer`):
 * the init section (`-frames:a 0`) is then exactly the `ftyp`+`moov` every segment starts with.
 */
const HLS_MOVFLAGS = 'empty_moov+default_base_moof+skip_trailer';

const MUXERS: Readonly<Record<AudioFormat, string>> = {
  mp3: 'mp3',
  opus: 'ogg',
  ogg: 'ogg',
  aac: 'adts',
  m4a: 'mp4',
  flac: 'flac',
  wav: 'wav',
};

/** wav is absent: its encoder is the bit depth. */
const ENCODERS: Readonly<Record<Exclude<AudioFormat, 'wav'>, string>> = {
  mp3: 'libmp3lame',
  opus: 'libopus',
  ogg: 'libvorbis',
  aac: 'aac',
  m4a: 'aac',
  flac: 'flac',
};

/** `q` is the VBR scale where the codec has one, and the effort knob where it does not. */
const QUALITY_FLAGS: Readonly<Partial<Record<AudioFormat, string>>> = {
  mp3: '-q:a',
  ogg: '-q:a',
  aac: '-q:a',
  m4a: '-q:a',
  opus: '-compression_level',
  flac: '-compression_level',
};

const LOSSY: ReadonlySet<AudioFormat> = new Set<AudioFormat>(['mp3', 'opus', 'ogg', 'aac', 'm4a']);

const WAV_ENCODERS = { '16': 'pcm_s16le', '24': 'pcm_s24le', '32f': 'pcm_f32le' } as const;
/** flac is integer-only; its s32 path encodes 24 bits. */
const FLAC_SAMPLE_FORMATS = { '16': 's16', '24': 's32' } as const;
/** ffmpeg's own ceiling (`-ac`, channel layouts); a probe claiming more cannot be encoded. */
export const MAX_CHANNELS = 64;
/** The raw muxer an exact WAV render writes its PCM with (the proxy writes the header). */
const RAW_PCM_MUXERS = { pcm_s16le: 's16le', pcm_s24le: 's24le', pcm_f32le: 'f32le' } as const;
const PEAKS_PCM_ENCODER = 'pcm_s16le';
const PEAKS_PCM_MUXER = 's16le';

/**
 * Every flag either builder can emit, with how many argv elements follow it. A test walks built
 * argv against this table, so a flag added without review (or arriving from anywhere else) fails.
 */
export const ARGV_FLAGS: Readonly<Record<string, 0 | 1>> = Object.freeze({
  '-nostdin': 0,
  '-nostats': 0,
  '-hide_banner': 0,
  '-loglevel': 1,
  '-protocol_whitelist': 1,
  '-format_whitelist': 1,
  '-ss': 1,
  '-t': 1,
  '-i': 1,
  '-vn': 0,
  '-sn': 0,
  '-dn': 0,
  '-af': 1,
  '-ac': 1,
  '-c:a': 1,
  '-b:a': 1,
  '-q:a': 1,
  '-compression_level': 1,
  '-sample_fmt': 1,
  '-movflags': 1,
  '-frag_duration': 1,
  '-flush_packets': 1,
  '-blocksize': 1,
  '-frames:a': 1,
  '-strict': 1,
  '-f': 1,
});

/**
 * How ffmpeg writes to the pipe: in blocks of `OUTPUT_BLOCK_BYTES`, not one write per packet.
 * By default (`flush_packets` auto) a muxer flushes after every packet: an mp3 at 128 kb/s is
 * 2,299 writes of 418 bytes for 60 s, and every write wakes the worker thread that reads it.
 * With these flags the same render is 59 writes, and the bytes still leave as they are encoded
 * (16 KiB is 1 s of a 128 kb/s mp3, 4 s of a 32 kb/s opus; the tail is flushed at the end).
 * `bench/cpu.ts` measures what this saves.
 */
export const OUTPUT_BLOCK_BYTES = 16 * 1024;
export const OUTPUT_WRITES: readonly string[] = [
  '-flush_packets',
  '0',
  '-blocksize',
  String(OUTPUT_BLOCK_BYTES),
];

/** The input protocol whitelist: `file` only, whatever the source was (see the header). */
export function protocolWhitelist(input: Pick<ArgvInput, 'url' | 'kind'>): string {
  if (input.kind !== 'local') {
    throw new TypeError(
      `a ${JSON.stringify((input as { kind?: unknown }).kind)} input is spooled by the proxy and read through a descriptor`,
    );
  }
  return LOCAL_PROTOCOLS;
}

/** The flags that confine what an input may be: protocols, then demuxers. */
export function inputWhitelists(input: Pick<ArgvInput, 'url' | 'kind'>): string[] {
  return ['-protocol_whitelist', protocolWhitelist(input), '-format_whitelist', FORMAT_WHITELIST];
}

/**
 * The input argument exactly as ffmpeg/ffprobe will receive it. A local path gets the explicit
 * `file:` protocol so that no prefix of the name is ever read as another protocol.
 */
export function inputArgument(input: Pick<ArgvInput, 'url' | 'kind'>): string {
  const { url } = input;
  if (typeof url !== 'string' || url === '') {
    throw new TypeError('input.url must be a non-empty string');
  }
  protocolWhitelist(input); // rejects every kind but a file
  if (url.startsWith('file:')) return url;
  if (!url.startsWith('/')) throw new TypeError('a local source must be an absolute path');
  return `file:${url}`;
}

/**
 * A lossy render without `br`: no encoder's default is above it (LAME and aac 128k, libopus
 * 96k stereo, libvorbis q3 ~112k); `test/workers/outputRate.test.ts` checks it on noise.
 */
const LOSSY_DEFAULT_BOUND_KBPS = 128;
/** A lossy render with `q`: above the top of every quality scale (LAME V0 peaks at 320k). */
const LOSSY_QUALITY_BOUND_KBPS = 512;
/** Headroom over a lossy render's `br`: VBR swings, container and tag bytes. */
const LOSSY_RATE_MARGIN = 1.5;
/** A lossless render's bound: 32-bit samples, above any depth it is written at. */
const LOSSLESS_BOUND_BYTES_PER_SAMPLE = 4;

/**
 * At most how many output bytes one second of the render's audio takes, for the worker's lead
 * rule (`LISTENER_LEAD_MS` in core/worker.ts): an over-estimate only makes the worker send
 * sooner, so each bound is generous. Undefined where none is known (peaks, HLS parts, a
 * lossless render of a source whose rate or channels no probe gave): the time rule alone.
 */
export function outputBytesPerSecondBound(
  options: RenderOptions,
  input: ArgvInput,
): number | undefined {
  const format = options.format;
  if (format === 'peaks' || format === 'hls') return undefined;
  if (LOSSY.has(format)) {
    const kbps =
      options.quality !== undefined
        ? LOSSY_QUALITY_BOUND_KBPS
        : Math.max(options.bitrateK ?? LOSSY_DEFAULT_BOUND_KBPS, 1);
    return ((kbps * 1000) / 8) * LOSSY_RATE_MARGIN;
  }
  const rate = options.sampleRate ?? sourceRate(input);
  const channels = options.channels ?? sourceChannels(input);
  if (rate === undefined || channels === undefined) return undefined;
  return rate * channels * LOSSLESS_BOUND_BYTES_PER_SAMPLE;
}

/** ffmpeg argv (no executable) that encodes `options` from `input` to stdout. */
export function buildRenderArgv(options: RenderOptions, input: ArgvInput): string[] {
  const format = options.format;
  if (format === 'peaks') {
    throw new TypeError('f:peaks is a PCM decode plus a reduction: use buildPeaksDecodeArgv');
  }
  if (format === 'hls') return buildHlsPartArgv(options, input);
  if (!(format in MUXERS)) throw new TypeError(`unknown format ${JSON.stringify(format)}`);
  const rate = resampleRate(format, options, input);
  const chainHz = rate ?? sourceRate(input); // what reaches the encoder, before its own resample
  const channels = channelArgs(format, options, input);
  const fold = foldFilter(
    sourceChannels(input),
    channels.length === 0 ? undefined : Number(channels[1]),
  );
  // A lossless render of a known length is cut or padded to its exact sample count; an exact
  // WAV is written raw, behind the proxy's header (`wavHeader.ts`).
  const exact = exactSamples(options, input);
  const tail = exact
    ? [`apad=whole_len=${exact.samples}`, `atrim=end_sample=${exact.samples}`]
    : trimPad(options, chainHz);
  const muxer = exactWavLayout(options, input)
    ? RAW_PCM_MUXERS[encoder(format, options, input) as keyof typeof RAW_PCM_MUXERS]
    : MUXERS[format];
  return [
    ...head(options, input),
    ...filterArgs(options, rate, tail, fold),
    ...channels,
    ...codecArgs(format, options, input, chainHz),
    ...outputBound(input),
    ...OUTPUT_WRITES,
    '-f',
    muxer,
    'pipe:1',
  ];
}

/** One part of an `f:hls` playlist: a segment's window, or the init section they share. */
function buildHlsPartArgv(options: RenderOptions, input: ArgvInput): string[] {
  const part = options.hlsPart;
  if (part === undefined) throw new TypeError('an f:hls playlist is written, not rendered');
  const format = HLS_SEGMENT_ENCODINGS[options.hlsCodec ?? DEFAULT_HLS_CODEC];
  const window = hlsWindow(options, part);
  const rate = resampleRate(format, options, input);
  const chainHz = rate ?? sourceRate(input);
  const channels = channelArgs(format, options, input);
  const fold = foldFilter(
    sourceChannels(input),
    channels.length === 0 ? undefined : Number(channels[1]),
  );
  // The pre-roll is dropped first, at the source's rate, so the window starts on its sample.
  const preroll =
    window.prerollS > 0
      ? [`atrim=start=${renderNumber(window.prerollS)}`, 'asetpts=PTS-STARTPTS']
      : [];
  const windowed: RenderOptions = { ...options, trim: window.trim };
  const pad = part === HLS_INIT_PART ? [] : trimPad({ format, trim: window.kept }, chainHz);
  // No `-ss 0`: on an AAC-in-MP4 source a seek to 0 decodes the priming differently (up to
  // 0.09 off in its first 250 samples, measured) than the continuous render this must join.
  const { start, duration } = window.trim;
  const fromZero = duration === undefined ? [] : ['-t', renderNumber(duration)];
  return [
    ...(start === 0
      ? [
          ...BASELINE,
          ...inputWhitelists(input),
          ...fromZero,
          '-i',
          inputArgument(input),
          ...AUDIO_ONLY,
        ]
      : head(windowed, input)),
    ...filterArgs(windowed, rate, pad, [...preroll, ...fold]),
    ...channels,
    ...codecArgs(format, options, input, chainHz, true),
    ...(part === HLS_INIT_PART ? ['-frames:a', '0'] : []),
    ...outputBound(input),
    ...OUTPUT_WRITES,
    '-f',
    'mp4',
    'pipe:1',
  ];
}

/**
 * Where an `f:hls` segment's media sits on the playlist's timeline, in seconds from the trim's
 * start (what its fragments' decode times are moved by); undefined for anything else.
 */
export function hlsDecodeTimeShiftS(options: RenderOptions): number | undefined {
  const part = options.hlsPart;
  if (options.format !== 'hls' || typeof part !== 'number') return undefined;
  return part * (options.hlsSegmentS ?? DEFAULT_HLS_SEGMENT_S);
}

/** Where part `part` reads (seek and length, pre-roll included) and the window it keeps. */
function hlsWindow(
  options: RenderOptions,
  part: typeof HLS_INIT_PART | number,
): {
  readonly trim: { readonly start: number; readonly duration?: number };
  readonly kept: { readonly start: number; readonly duration: number };
  readonly prerollS: number;
} {
  const startMs = millis(options.trim?.start ?? 0);
  if (part === HLS_INIT_PART) {
    return { trim: { start: startMs / 1000 }, kept: { start: 0, duration: 0 }, prerollS: 0 };
  }
  const lenMs = (options.hlsSegmentS ?? DEFAULT_HLS_SEGMENT_S) * 1000;
  const segStartMs = startMs + part * lenMs;
  const trimDuration = options.trim?.duration;
  const durMs =
    trimDuration === undefined
      ? lenMs
      : Math.min(lenMs, startMs + millis(trimDuration) - segStartMs);
  if (!(durMs > 0)) throw new RangeError(`hls_seg:${part} is past the trim's end`);
  const preMs = Math.min(millis(HLS_PREROLL_S), segStartMs);
  return {
    trim: { start: (segStartMs - preMs) / 1000, duration: (durMs + preMs) / 1000 },
    kept: { start: segStartMs / 1000, duration: durMs / 1000 },
    prerollS: preMs / 1000,
  };
}

/**
 * The exact sample count of a lossless render (`f:wav`, `f:flac`) of `input`, with the rate and
 * channel count it is coded at, or undefined when it cannot be known before the render (no
 * probed rate, channel count or duration). The count is the trimmed window (`t:`; past the
 * source's end, the trim pad's silence) at the output rate, bounded by `maxDurationS`;
 * `buildRenderArgv` pads or cuts the PCM to exactly it, so it is true by construction even
 * where the probe's duration is an estimate (a VBR mp3 source): at most the last few
 * milliseconds are cut, or padded with silence.
 */
export function exactSamples(
  options: RenderOptions,
  input: ArgvInput,
):
  | { readonly sampleRate: number; readonly channels: number; readonly samples: number }
  | undefined {
  const format = options.format;
  if (format !== 'wav' && format !== 'flac') return undefined;
  const duration = input.duration;
  if (duration === undefined || !Number.isFinite(duration) || duration < 0) return undefined;
  const sampleRate = resampleRate(format, options, input) ?? sourceRate(input);
  const pinned = channelArgs(format, options, input);
  const channels = pinned.length === 0 ? sourceChannels(input) : Number(pinned[1]);
  if (sampleRate === undefined || channels === undefined) return undefined;
  const trim = options.trim;
  let seconds = trim
    ? Math.max(0, Math.min(trim.duration ?? Number.POSITIVE_INFINITY, duration - trim.start))
    : duration;
  if (input.maxDurationS !== undefined) seconds = Math.min(seconds, input.maxDurationS);
  let samples = Math.round(seconds * sampleRate);
  if (trim) {
    // The trim pad's floor (`trimPad`): a region past the end is a moment of silence.
    const floor = Math.floor(
      sampleRate * Math.min(TRIM_MIN_OUTPUT_S, trim.duration ?? TRIM_MIN_OUTPUT_S),
    );
    samples = Math.max(samples, floor);
  }
  if (samples < 1) return undefined;
  return { sampleRate, channels, samples };
}

/**
 * The exact layout of a `f:wav` render of `input` (`exactSamples`, behind the proxy's header),
 * or undefined when its length cannot be known before the render, or is past RIFF's 4 GiB.
 */
export function exactWavLayout(
  options: RenderOptions,
  input: ArgvInput,
): ExactWavLayout | undefined {
  if (options.format !== 'wav') return undefined;
  const exact = exactSamples(options, input);
  if (exact === undefined) return undefined;
  const codec = encoder('wav', options, input) as keyof typeof RAW_PCM_MUXERS;
  const bits = codec === 'pcm_s16le' ? 16 : codec === 'pcm_s24le' ? 24 : 32;
  const dataBytes = exact.samples * exact.channels * (bits / 8);
  if (dataBytes > RIFF_MAX_DATA_BYTES) return undefined;
  return {
    ...exact,
    bits,
    float: codec === 'pcm_f32le',
    totalBytes: WAV_HEADER_BYTES + dataBytes,
  };
}

/**
 * ffmpeg argv that decodes the trimmed, processed region to interleaved s16le PCM on stdout, at
 * exactly the rate and channel count the reducer was built for (so the frame budget holds and
 * the header's `sample_rate` describes the samples actually reduced).
 */
export function buildPeaksDecodeArgv(
  options: RenderOptions,
  input: ArgvInput,
  shape: PeaksDecodeShape,
): string[] {
  if (options.format !== 'peaks') {
    throw new TypeError(`buildPeaksDecodeArgv needs f:peaks, got ${options.format}`);
  }
  const rate = shape.sampleRate;
  if (!Number.isInteger(rate) || rate < 1) {
    throw new RangeError(`shape.sampleRate must be a positive integer, got ${rate}`);
  }
  const fold = foldFilter(sourceChannels(input), channelCount(shape.channels));
  return [
    ...head(options, input),
    ...filterArgs(options, rate, [], fold),
    '-ac',
    String(channelCount(shape.channels)),
    '-c:a',
    PEAKS_PCM_ENCODER,
    ...outputBound(input),
    '-f',
    PEAKS_PCM_MUXER,
    'pipe:1',
  ];
}

/** The pinned chain for a preset. */
export function enhanceChain(preset: string): string {
  const chain = (ENHANCE_CHAINS as Record<string, string>)[preset];
  if (chain === undefined) throw new TypeError(`unknown enhance preset ${JSON.stringify(preset)}`);
  return chain;
}

// ---------------------------------------------------------------------------------------------

function head(options: RenderOptions, input: ArgvInput): string[] {
  const url = inputArgument(input);
  return [...BASELINE, ...inputWhitelists(input), ...seekArgs(options), '-i', url, ...AUDIO_ONLY];
}

/** `-t` on the output: the longest the render may run in media time, whatever the source says. */
function outputBound(input: ArgvInput): string[] {
  const max = input.maxDurationS;
  if (max === undefined) return [];
  if (!Number.isInteger(max) || max < 1) {
    throw new RangeError(`input.maxDurationS must be a positive integer, got ${max}`);
  }
  return ['-t', String(max)];
}

function seekArgs(options: RenderOptions): string[] {
  const trim = options.trim;
  if (trim === undefined) return [];
  const seek = ['-ss', renderNumber(trim.start)];
  return trim.duration === undefined ? seek : [...seek, '-t', renderNumber(trim.duration)];
}

function filterArgs(
  options: RenderOptions,
  resampleHz: number | undefined,
  tail: readonly string[] = [],
  fold: readonly string[] = [],
): string[] {
  const chain: string[] = [...fold];
  if (options.enhance !== undefined) chain.push(enhanceChain(options.enhance));
  if (options.norm !== undefined) {
    const { i, tp, lra } = options.norm;
    chain.push(`loudnorm=I=${renderNumber(i)}:TP=${renderNumber(tp)}:LRA=${renderNumber(lra)}`);
  }
  if (options.gainDb !== undefined) chain.push(`volume=${renderNumber(options.gainDb)}dB`);
  if (resampleHz !== undefined) chain.push(`aformat=sample_rates=${resampleHz}`);
  chain.push(...fadeFilters(options), ...tail);
  return chain.length === 0 ? [] : ['-af', chain.join(',')];
}

function fadeFilters(options: RenderOptions): string[] {
  const fade = options.fade;
  if (fade === undefined) return [];
  const out: string[] = [];
  if (fade.in > 0) out.push(`afade=t=in:st=0:d=${renderNumber(fade.in)}`);
  if (fade.out > 0) {
    const duration = options.trim?.duration;
    if (duration === undefined) {
      throw new TypeError('a fade-out needs a bounded trim (t:start:duration)');
    }
    // Whole milliseconds keep the start exact: 0.3 - 0.2 is not 0.1 in binary floats.
    const startS = (millis(duration) - millis(fade.out)) / 1000;
    out.push(`afade=t=out:st=${renderNumber(startS)}:d=${renderNumber(fade.out)}`);
  }
  return out;
}

/**
 * The rate a lossy encoder will actually code at for a wanted rate: the nearest in its table
 * (a tie goes up: more bandwidth), or for libvorbis the wanted rate clamped to its tuned range.
 * Lossless formats take every rate the grammar allows and get `hz` back.
 */
export function encoderSampleRate(format: Format, hz: number): number {
  if (!Number.isInteger(hz) || hz < 1) {
    throw new RangeError(`sample rate must be a positive integer, got ${hz}`);
  }
  switch (format) {
    case 'mp3':
      return nearest(MP3_SAMPLE_RATES_HZ, hz);
    case 'aac':
    case 'm4a':
      return nearest(AAC_SAMPLE_RATES_HZ, hz);
    case 'opus':
      return nearest(OPUS_SAMPLE_RATES_HZ, hz);
    case 'ogg':
      return Math.min(Math.max(hz, VORBIS_MIN_SAMPLE_RATE_HZ), LOSSY_SAMPLE_RATE_CAP_HZ);
    default:
      return hz;
  }
}

/**
 * The `-b:a` (kb/s) the encoder will open with for a wanted `br`: clamped into libopus' and
 * libvorbis' windows for `channels` at `rateHz`. LAME and the aac encoder take every `br` the
 * grammar allows (1..10000; they settle on their nearest legal rate themselves), so theirs
 * passes through. An unknown channel count gets the window valid for both mono and stereo.
 */
export function encoderBitrateK(
  format: Format,
  kbps: number,
  rateHz: number | undefined,
  channels: number | undefined,
): number {
  if (!Number.isInteger(kbps) || kbps < 1) {
    throw new RangeError(`bitrate must be a positive integer (kb/s), got ${kbps}`);
  }
  switch (format) {
    case 'opus':
      return Math.min(kbps, OPUS_MAX_KBPS_PER_CHANNEL * (channels ?? 1));
    case 'ogg': {
      const [min, max] = vorbisAbrWindowK(rateHz ?? LOSSY_SAMPLE_RATE_CAP_HZ, channels);
      return Math.min(Math.max(kbps, min), max);
    }
    default:
      return kbps;
  }
}

/** libvorbis' ABR window (kb/s) at `rateHz` for `channels` (undefined: mono and stereo both). */
export function vorbisAbrWindowK(
  rateHz: number,
  channels: number | undefined,
): readonly [number, number] {
  const band = VORBIS_ABR_BANDS.find((b) => rateHz >= b.fromHz && rateHz < b.belowHz);
  if (band === undefined) {
    throw new RangeError(`libvorbis has no ABR setup at ${rateHz} Hz`);
  }
  if (channels === 1) return band.mono;
  if (channels === 2) return band.stereo;
  if (channels === undefined) {
    return [Math.max(band.mono[0], band.stereo[0]), Math.min(band.mono[1], band.stereo[1])];
  }
  return [band.mono[0] * channels, band.mono[1] * channels];
}

/**
 * The rate the filter chain resamples to, or undefined to leave the source's rate to ffmpeg
 * (which converts it to the encoder's nearest on its own). `sr`, or `norm`'s return to the
 * source rate, is snapped to what the encoder takes; an ABR vorbis render also pins a source
 * rate outside libvorbis' templates (or an unknown one), since its window depends on it.
 */
function resampleRate(
  format: AudioFormat,
  options: RenderOptions,
  input: ArgvInput,
): number | undefined {
  const wanted = options.sampleRate ?? (options.norm ? normalisedRate(format, input) : undefined);
  if (wanted !== undefined) return encoderSampleRate(format, wanted);
  if (format === 'flac') {
    const source = sourceRate(input);
    return source !== undefined && flacSampleRate(source) !== source
      ? flacSampleRate(source)
      : undefined;
  }
  if (format !== 'ogg' || options.bitrateK === undefined) return undefined;
  const source = sourceRate(input);
  if (source === undefined) return LOSSY_SAMPLE_RATE_CAP_HZ;
  const pinned = encoderSampleRate(format, source);
  return pinned === source ? undefined : pinned;
}

/** `apad` that keeps a trimmed render from being empty; nothing without a trim. */
function trimPad(options: RenderOptions, chainHz: number | undefined): string[] {
  const trim = options.trim;
  if (trim === undefined) return [];
  const seconds = Math.min(TRIM_MIN_OUTPUT_S, trim.duration ?? TRIM_MIN_OUTPUT_S);
  const samples = Math.floor((chainHz ?? TRIM_PAD_FALLBACK_RATE_HZ) * seconds);
  // At an absurd lossless rate (sr:1) not even one sample fits: that file stays empty but valid.
  return samples < 1 ? [] : [`apad=whole_len=${samples}`];
}

function nearest(table: readonly number[], hz: number): number {
  let best = table[0]!;
  for (const candidate of table) {
    const d = Math.abs(candidate - hz);
    const bestD = Math.abs(best - hz);
    if (d < bestD || (d === bestD && candidate > best)) best = candidate;
  }
  return best;
}

/** Without `sr`, a normalised render goes back to the source's rate (lossy: capped at 48 kHz). */
function normalisedRate(format: AudioFormat, input: ArgvInput): number {
  const source = sourceRate(input);
  if (source === undefined) return LOUDNORM_FALLBACK_RATE_HZ;
  return LOSSY.has(format) ? Math.min(source, LOSSY_SAMPLE_RATE_CAP_HZ) : source;
}

function codecArgs(
  format: AudioFormat,
  options: RenderOptions,
  input: ArgvInput,
  encoderHz: number | undefined,
  hlsPart = false,
): string[] {
  const args = ['-c:a', encoder(format, options, input)];
  // ffmpeg 5.1 calls flac in MP4 experimental (it is what Chromium's and hls.js' MSE play), and
  // ffmpeg 4.x (the npm fallback) opus in MP4 too: without the flag its mp4 muxer refuses them.
  if (hlsPart && (format === 'flac' || format === 'opus')) args.push('-strict', '-2');
  if (options.bitrateK !== undefined) {
    if (!LOSSY.has(format)) throw new TypeError(`br does not apply to ${format}`);
    const channels = options.channels ?? sourceChannels(input);
    args.push('-b:a', `${encoderBitrateK(format, options.bitrateK, encoderHz, channels)}k`);
  }
  if (options.quality !== undefined) {
    const flag = QUALITY_FLAGS[format];
    if (flag === undefined) throw new TypeError(`q does not apply to ${format}`);
    args.push(flag, renderNumber(options.quality));
  }
  if (format === 'flac' && options.bitDepth !== undefined) {
    const sampleFormat = (FLAC_SAMPLE_FORMATS as Record<string, string>)[options.bitDepth];
    if (sampleFormat === undefined) throw new TypeError(`bd:${options.bitDepth} is wav-only`);
    args.push('-sample_fmt', sampleFormat);
  }
  if (hlsPart) {
    args.push('-movflags', HLS_MOVFLAGS, '-frag_duration', String(M4A_FRAGMENT_DURATION_US));
  } else if (format === 'm4a') {
    // Plain MP4 needs a seekable output for its moov; fragment on time (audio has no keyframes
    // that `frag_keyframe` would cut on), so bytes stream as they are encoded.
    args.push(
      '-movflags',
      'empty_moov+default_base_moof',
      '-frag_duration',
      String(M4A_FRAGMENT_DURATION_US),
    );
  }
  return args;
}

function encoder(format: AudioFormat, options: RenderOptions, input: ArgvInput): string {
  if (format !== 'wav') {
    if (options.bitDepth !== undefined && format !== 'flac') {
      throw new TypeError(`bd does not apply to ${format}`);
    }
    return ENCODERS[format];
  }
  if (options.bitDepth !== undefined) {
    const codec = (WAV_ENCODERS as Record<string, string>)[options.bitDepth];
    if (codec === undefined) throw new TypeError(`unknown bit depth ${options.bitDepth}`);
    return codec;
  }
  // No `bd`: follow the source as far as the integer vocabulary goes; 16-bit when unknown.
  return (input.bitDepth ?? 16) >= 24 ? WAV_ENCODERS['24'] : WAV_ENCODERS['16'];
}

/**
 * `-ac` from `ch`; under `norm` without `ch`, the source's own count (a no-op remix). Without a
 * pinned count, loudnorm followed by the resample cannot negotiate a channel layout once `-ss`
 * puts a trim on the input, and every non-mp3 encoder fails (Debian 5.1 and the 2018 build).
 */
function channelArgs(format: AudioFormat, options: RenderOptions, input: ArgvInput): string[] {
  if (options.channels !== undefined) return ['-ac', String(channelCount(options.channels))];
  const source = sourceChannels(input);
  if (source === undefined) return [];
  const fit = encoderChannels(format, source);
  if (options.norm !== undefined) return ['-ac', String(Math.min(fit, NORM_MAX_CHANNELS))];
  return fit === source ? [] : ['-ac', String(fit)];
}

/**
 * The channel count `format`'s encoder opens for a source of `source` channels: the source's
 * own when the encoder takes it with ffmpeg's default layout for that count, else the largest
 * it takes below it (a downmix), so a valid source never fails the encoder's setup.
 */
export function encoderChannels(format: AudioFormat, source: number): number {
  const taken = ENCODER_CHANNELS[format];
  if (taken === 'any' || taken.includes(source)) return source;
  let best = 1;
  for (const n of taken) if (n < source && n > best) best = n;
  return best;
}

/**
 * A source of more than `GUESSED_LAYOUT_MAX_CHANNELS` channels with no channel mask has no
 * layout ffmpeg can guess, and swresample refuses to rematrix it ("not enough information"), so
 * a render that needs fewer channels folds it explicitly: input channel i is summed into output
 * i mod `target` (`<` normalises each sum, so the fold cannot clip). Nothing for narrower sources,
 * whose layout ffmpeg guesses and downmixes by the book.
 */
export function foldFilter(source: number | undefined, target: number | undefined): string[] {
  if (source === undefined || target === undefined) return [];
  if (source <= GUESSED_LAYOUT_MAX_CHANNELS || target >= source) return [];
  const layout = FOLD_LAYOUTS[target];
  if (layout === undefined) throw new RangeError(`no fold layout for ${target} channels`);
  const outputs = Array.from({ length: target }, (_, out) => {
    const inputs: string[] = [];
    for (let i = out; i < source; i += target) inputs.push(`c${i}`);
    return `c${out}<${inputs.join('+')}`;
  });
  return [`pan=${layout}|${outputs.join('|')}`];
}

/** The probe's sample rate, checked; undefined when no probe said. */
function sourceRate(input: ArgvInput): number | undefined {
  const source = input.sampleRate;
  if (source === undefined) return undefined;
  if (!Number.isInteger(source) || source < 1) {
    throw new RangeError(`input.sampleRate must be a positive integer, got ${source}`);
  }
  return source;
}

/** The probe's channel count, checked; undefined when no probe said. */
function sourceChannels(input: ArgvInput): number | undefined {
  const channels = input.channels;
  if (channels === undefined) return undefined;
  if (!Number.isInteger(channels) || channels < 1 || channels > MAX_CHANNELS) {
    throw new RangeError(`input.channels must be an integer in 1..${MAX_CHANNELS}`);
  }
  return channels;
}

function channelCount(channels: number): 1 | 2 {
  if (channels !== 1 && channels !== 2) throw new RangeError(`channels must be 1 or 2`);
  return channels;
}

function millis(seconds: number): number {
  return Math.round(seconds * 1000);
}
