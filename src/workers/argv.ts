/**
 * The ffmpeg argument vectors: validated `RenderOptions` plus a resolved source in, argv out.
 *
 * This is the last leg of the promise the cache key makes: options that normalise alike build
 * byte-identical argv, so one key names one output. Both builders are pure; nothing here spawns,
 * reads the environment or looks at the file system.
 *
 * ## Invariants
 * - **Fixed shape.** Baseline flags, the input protocol whitelist, input-side seek (`-ss`/`-t`
 *   before `-i`, so a remote input is fetched by range and the trimmed region starts at t=0),
 *   the input, `-vn -sn -dn`, the filter chain, `-ac`, codec arguments, `-f <muxer> pipe:1`.
 *   The argv depends only on the options and the source (with its probe), never on the moment.
 * - **No URL byte becomes a flag.** The input is one argv element after `-i`; a local path is
 *   prefixed `file:` so a name such as `concat:a|b` or `https:x` stays a file name. Every flag
 *   emitted is in `ARGV_FLAGS`, and every filter value is a number the options layer bounded.
 * - **Protocols follow the source kind, never the request.** Local reads get `file` only, remote
 *   reads get TLS over TCP only (plus cleartext HTTP for an `http://` S3 endpoint): no source can
 *   pivot ffmpeg across the file-system/network boundary. A TLS input always verifies its peer
 *   (`-tls_verify 1`, `-ca_file` when the caller named a bundle).
 * - **Filter order is load-bearing:** enhance → loudnorm → volume → resample → afade. Cleanup
 *   runs before loudness is measured; `gain` offsets a normalised result; single-pass loudnorm
 *   outputs 192 kHz, so a resample always follows it; fades shape the final signal. The resample
 *   is `aformat=sample_rates=N` (ffmpeg inserts its resampler there): a literal `aresample=N`
 *   right after loudnorm fails channel-layout negotiation for PCM, flac and aac outputs.
 * - **A preset names one chain forever.** Improving `voice` means adding `voice2`.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None. A violated precondition (fade-out without a bounded trim, `q` for wav, an unknown kind)
 * is a programmer error and throws TypeError/RangeError naming it.
 */
import type { Format, RenderOptions } from '../http/options.js';
import { LOSSY_SAMPLE_RATE_CAP_HZ, renderNumber } from '../http/options.js';

/** Where a render reads from; decides the protocol whitelist. */
export type SourceKind = 'local' | 's3' | 'https';

/** The resolved source, plus what its probe said when the caller has it. */
export interface ArgvInput {
  /** Absolute path for `local`; a (presigned) URL for `s3`/`https`. One argv element, verbatim. */
  readonly url: string;
  readonly kind: SourceKind;
  /** The source's sample rate (probe). Target of the resample that `norm` forces without `sr`. */
  readonly sampleRate?: number;
  /** The source's bit depth (probe). What `f:wav` without `bd` follows. */
  readonly bitDepth?: number;
  /** The source's channel count (probe). Pinned with `-ac` under `norm`; see `channelArgs`. */
  readonly channels?: number;
  /** PEM roots a TLS input is verified against (`-ca_file`); see `sources/trust.ts`. */
  readonly caFile?: string;
}

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
const REMOTE_PROTOCOLS = 'https,tls,tcp'; // what HTTPS needs and nothing else: no `file`
const CLEARTEXT_S3_PROTOCOLS = 'http,https,tls,tcp'; // a dev S3 endpoint on http://; still no `file`

/** Where a normalised render lands when no probe gave the source rate: the lossy ceiling. */
export const LOUDNORM_FALLBACK_RATE_HZ = 48_000;
/** m4a fragment length: 1 s to first byte; per-frame fragments would add a third to the size. */
export const M4A_FRAGMENT_DURATION_US = 1_000_000;

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

type AudioFormat = Exclude<Format, 'peaks'>;

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
const MAX_CHANNELS = 64; // ffmpeg's own ceiling; a probe claiming more is corrupt
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
  '-tls_verify': 1,
  '-ca_file': 1,
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
  '-f': 1,
});

/** The input protocol whitelist for a source. */
export function protocolWhitelist(input: Pick<ArgvInput, 'url' | 'kind'>): string {
  switch (input.kind) {
    case 'local':
      return LOCAL_PROTOCOLS;
    case 'https':
      return REMOTE_PROTOCOLS;
    case 's3':
      return input.url.startsWith('http://') ? CLEARTEXT_S3_PROTOCOLS : REMOTE_PROTOCOLS;
    default:
      throw new TypeError(`unknown source kind ${JSON.stringify((input as ArgvInput).kind)}`);
  }
}

/**
 * Peer verification for an input read over TLS: ffmpeg's default is not to verify, so every
 * remote input asks for it, against `caFile` when one is known. Nothing for cleartext inputs.
 */
export function tlsArgs(input: Pick<ArgvInput, 'url' | 'kind' | 'caFile'>): string[] {
  if (input.kind === 'local' || !input.url.startsWith('https://')) return [];
  return input.caFile === undefined
    ? ['-tls_verify', '1']
    : ['-tls_verify', '1', '-ca_file', input.caFile];
}

/**
 * The input argument exactly as ffmpeg/ffprobe will receive it. A local path gets the explicit
 * `file:` protocol so that no prefix of the name is ever read as another protocol.
 */
export function inputArgument(input: Pick<ArgvInput, 'url' | 'kind'>): string {
  const { url, kind } = input;
  if (typeof url !== 'string' || url === '') {
    throw new TypeError('input.url must be a non-empty string');
  }
  if (kind === 'local') {
    if (url.startsWith('file:')) return url;
    if (!url.startsWith('/')) throw new TypeError('a local source must be an absolute path');
    return `file:${url}`;
  }
  if (kind === 'https' && !url.startsWith('https://')) {
    throw new TypeError('an https source must be an https:// URL');
  }
  if (kind === 's3' && !/^https?:\/\//.test(url)) {
    throw new TypeError('an s3 source must be a presigned http(s):// URL');
  }
  protocolWhitelist(input); // rejects an unknown kind
  return url;
}

/** ffmpeg argv (no executable) that encodes `options` from `input` to stdout. */
export function buildRenderArgv(options: RenderOptions, input: ArgvInput): string[] {
  const format = options.format;
  if (format === 'peaks') {
    throw new TypeError('f:peaks is a PCM decode plus a reduction: use buildPeaksDecodeArgv');
  }
  if (!(format in MUXERS)) throw new TypeError(`unknown format ${JSON.stringify(format)}`);
  const rate = options.sampleRate ?? (options.norm ? normalisedRate(format, input) : undefined);
  return [
    ...head(options, input),
    ...filterArgs(options, rate),
    ...channelArgs(options, input),
    ...codecArgs(format, options, input),
    '-f',
    MUXERS[format],
    'pipe:1',
  ];
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
  return [
    ...head(options, input),
    ...filterArgs(options, rate),
    '-ac',
    String(channelCount(shape.channels)),
    '-c:a',
    PEAKS_PCM_ENCODER,
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
  return [
    ...BASELINE,
    '-protocol_whitelist',
    protocolWhitelist(input),
    ...tlsArgs(input),
    ...seekArgs(options),
    '-i',
    url,
    ...AUDIO_ONLY,
  ];
}

function seekArgs(options: RenderOptions): string[] {
  const trim = options.trim;
  if (trim === undefined) return [];
  const seek = ['-ss', renderNumber(trim.start)];
  return trim.duration === undefined ? seek : [...seek, '-t', renderNumber(trim.duration)];
}

function filterArgs(options: RenderOptions, resampleHz: number | undefined): string[] {
  const chain: string[] = [];
  if (options.enhance !== undefined) chain.push(enhanceChain(options.enhance));
  if (options.norm !== undefined) {
    const { i, tp, lra } = options.norm;
    chain.push(`loudnorm=I=${renderNumber(i)}:TP=${renderNumber(tp)}:LRA=${renderNumber(lra)}`);
  }
  if (options.gainDb !== undefined) chain.push(`volume=${renderNumber(options.gainDb)}dB`);
  if (resampleHz !== undefined) chain.push(`aformat=sample_rates=${resampleHz}`);
  chain.push(...fadeFilters(options));
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

/** Without `sr`, a normalised render goes back to the source's rate (lossy: capped at 48 kHz). */
function normalisedRate(format: AudioFormat, input: ArgvInput): number {
  const source = input.sampleRate;
  if (source === undefined) return LOUDNORM_FALLBACK_RATE_HZ;
  if (!Number.isInteger(source) || source < 1) {
    throw new RangeError(`input.sampleRate must be a positive integer, got ${source}`);
  }
  return LOSSY.has(format) ? Math.min(source, LOSSY_SAMPLE_RATE_CAP_HZ) : source;
}

function codecArgs(format: AudioFormat, options: RenderOptions, input: ArgvInput): string[] {
  const args = ['-c:a', encoder(format, options, input)];
  if (options.bitrateK !== undefined) {
    if (!LOSSY.has(format)) throw new TypeError(`br does not apply to ${format}`);
    args.push('-b:a', `${options.bitrateK}k`);
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
  if (format === 'm4a') {
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
function channelArgs(options: RenderOptions, input: ArgvInput): string[] {
  if (options.channels !== undefined) return ['-ac', String(channelCount(options.channels))];
  if (options.norm === undefined || input.channels === undefined) return [];
  if (!Number.isInteger(input.channels) || input.channels < 1 || input.channels > MAX_CHANNELS) {
    throw new RangeError(`input.channels must be an integer in 1..${MAX_CHANNELS}`);
  }
  return ['-ac', String(input.channels)];
}

function channelCount(channels: number): 1 | 2 {
  if (channels !== 1 && channels !== 2) throw new RangeError(`channels must be 1 or 2`);
  return channels;
}

function millis(seconds: number): number {
  return Math.round(seconds * 1000);
}
