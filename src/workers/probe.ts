/**
 * The probe: what ffprobe is asked about a source, how its JSON is read, the audio-only policy
 * applied to it, and the `/info` body built from it.
 *
 * Running ffprobe is the render task's job (same spawn, kill discipline and stderr classes as a
 * render); this module is argv, parsing and policy, all pure. ffprobe's output varies by version
 * and container, so parsing is explicit and defensive: numbers arrive as strings or numbers,
 * "N/A" means unknown, and anything unknown is omitted rather than guessed.
 *
 * ## Invariants
 * - **Every stream is shown** (no `-select_streams`): a gate cannot refuse what it cannot see.
 * - **Cover art is not video.** A video stream is ignored when its disposition says
 *   `attached_pic`, or when it is a single frame of a codec that can only be a still image.
 *   Anything else with `codec_type: video` is video: the policy fails closed. (Every render also
 *   carries `-vn -sn -dn`, so a crafted disposition still yields an audio-only encode.)
 * - **Output is bounded**: more than `MAX_PROBE_OUTPUT_BYTES` is refused, never parsed.
 * - **Unknown is omitted, never null or zero**: a lossy stream has no bit depth, "N/A" has no
 *   duration.
 * - **`format` is the API's token** where ffprobe's format list contains one (so the
 *   `mov,mp4,m4a,…` family is `m4a`, and Ogg carrying Opus is `opus`); otherwise its first name.
 * - **Tags are bounded**: string values only, sorted by key before the cap of 32, keys
 *   lowercased, values cut at 512 characters. Format tags, or the audio stream's when the
 *   container has none (Ogg keeps its comments on the stream).
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * | Verdict | When |
 * |---|---|
 * | `video_source` | a stream that is video and not cover art |
 * | `undecodable_source` | a demuxer outside `AUDIO_DEMUXERS`; no audio stream; (when required) no duration |
 * | `undecodable_source` (admission) | > 64 channels, a rate outside 1–768 kHz, a duration its bytes cannot hold |
 * | `source_too_long` (admission) | a duration over `AP_MAX_DURATION_S` |
 * | `render_failed` | the output is not a JSON object, or is over the size bound |
 */
import {
  type ArgvInput,
  AUDIO_DEMUXERS,
  inputArgument,
  inputWhitelists,
  MAX_CHANNELS,
} from './argv.js';

/** Real probes are a few KiB; beyond this the source carries something pathological. */
export const MAX_PROBE_OUTPUT_BYTES = 1_048_576;
/** Tags copied into `/info`: bounded because they are arbitrary bytes from someone's file. */
export const MAX_INFO_TAGS = 32;
export const MAX_INFO_TAG_CHARS = 512; // a long comment/lyrics tag is truncated, not dropped

/** Container names the API itself spells; the first match in ffprobe's list wins. */
const API_CONTAINERS: ReadonlySet<string> = new Set(['mp3', 'ogg', 'aac', 'm4a', 'flac', 'wav']);

/**
 * Codecs that can only ever be a still picture. Deliberately not every image decoder: names a
 * video stream can also wear (av1, hevc, vp8, vp9) must stay out, or a video could pass as art.
 */
const STILL_IMAGE_CODECS: ReadonlySet<string> = new Set([
  'mjpeg',
  'mjpegb',
  'png',
  'apng',
  'bmp',
  'gif',
  'tiff',
  'webp',
  'jpeg2000',
  'jpegls',
  'ppm',
  'pgm',
  'pbm',
  'pam',
  'pgmyuv',
  'targa',
  'pcx',
  'sgi',
  'sunrast',
  'dpx',
  'exr',
  'xwd',
  'qdraw',
  'fits',
]);

export interface ProbeInfo {
  readonly format?: string;
  readonly duration?: number;
  readonly sampleRate?: number;
  readonly channels?: number;
  readonly bitDepth?: number;
  /** bits per second */
  readonly bitrate?: number;
  /** ffprobe's own idea of the size; `/info` prefers the stat's. */
  readonly size?: number;
  readonly tags?: Readonly<Record<string, string>>;
}

export type ParsedProbe =
  | {
      readonly ok: true;
      readonly info: ProbeInfo;
      readonly hasVideo: boolean;
      readonly hasAudio: boolean;
      /** ffprobe's `format_name` as written (a comma list); absent when it named none. */
      readonly demuxer?: string;
      /** The audio stream's `codec_name` (what ffmpeg must decode); absent without audio. */
      readonly codec?: string;
    }
  | { readonly ok: false; readonly reason: 'render_failed'; readonly detail: string };

export type ProbeVerdict =
  | { readonly ok: true; readonly info: ProbeInfo }
  | {
      readonly ok: false;
      readonly reason: 'video_source' | 'undecodable_source' | 'render_failed';
    };

/** The `/info` body: snake_case as the API spells it, unknown fields absent. */
export interface InfoBody {
  format?: string;
  duration?: number;
  sample_rate?: number;
  channels?: number;
  bit_depth?: number;
  bitrate?: number;
  size?: number;
  tags?: Record<string, string>;
}

type Json = Record<string, unknown>;

/** ffprobe argv (no executable): every stream and the container, as JSON; input last. */
export function buildProbeArgv(input: Pick<ArgvInput, 'url' | 'kind'>): string[] {
  const url = inputArgument(input);
  return [
    '-hide_banner',
    '-v',
    'error',
    '-show_format',
    '-show_streams',
    '-of',
    'json',
    ...inputWhitelists(input),
    url,
  ];
}

/** Reads ffprobe's stdout. Not a JSON object, or too large: `render_failed` (our problem). */
export function parseProbe(output: string | Uint8Array): ParsedProbe {
  const bytes = typeof output === 'string' ? Buffer.byteLength(output) : output.byteLength;
  if (bytes > MAX_PROBE_OUTPUT_BYTES) {
    return {
      ok: false,
      reason: 'render_failed',
      detail: `probe output over ${MAX_PROBE_OUTPUT_BYTES} bytes`,
    };
  }
  const text = typeof output === 'string' ? output : Buffer.from(output).toString('utf8');
  let decoded: unknown;
  try {
    decoded = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'render_failed', detail: 'probe output is not JSON' };
  }
  if (!isObject(decoded)) {
    return { ok: false, reason: 'render_failed', detail: 'probe output is not a JSON object' };
  }
  const streams = Array.isArray(decoded.streams) ? decoded.streams.filter(isObject) : [];
  const format = isObject(decoded.format) ? decoded.format : {};
  // An audio stream ffprobe names no codec for has no decoder here ("Decoder (codec none) not
  // found" at render time): as good as no audio at all.
  const audio = streams.find((s) => s.codec_type === 'audio' && hasCodec(s));
  const hasVideo = streams.some(isVideo);
  const demuxer =
    typeof format.format_name === 'string' && format.format_name !== ''
      ? { demuxer: format.format_name }
      : {};
  if (audio === undefined) return { ok: true, info: {}, hasVideo, hasAudio: false, ...demuxer };

  const info: { -readonly [K in keyof ProbeInfo]: ProbeInfo[K] } = {};
  const container = containerToken(format, audio);
  if (container !== undefined) info.format = container;
  const duration = seconds(format.duration) ?? seconds(audio.duration);
  if (duration !== undefined) info.duration = duration;
  const sampleRate = positiveInteger(audio.sample_rate);
  if (sampleRate !== undefined) info.sampleRate = sampleRate;
  const channels = positiveInteger(audio.channels);
  if (channels !== undefined) info.channels = channels;
  // Deliberately not sample_fmt: mp3 decodes to fltp and would claim 32 bits it never had.
  const bitDepth =
    positiveInteger(audio.bits_per_raw_sample) ?? positiveInteger(audio.bits_per_sample);
  if (bitDepth !== undefined) info.bitDepth = bitDepth;
  const bitrate = positiveInteger(format.bit_rate) ?? positiveInteger(audio.bit_rate);
  if (bitrate !== undefined) info.bitrate = bitrate;
  const size = positiveInteger(format.size);
  if (size !== undefined) info.size = size;
  const tags = boundedTags(format.tags) ?? boundedTags(audio.tags);
  if (tags !== undefined) info.tags = tags;
  return {
    ok: true,
    info,
    hasVideo,
    hasAudio: true,
    ...demuxer,
    codec: audio.codec_name as string,
  };
}

function hasCodec(stream: Record<string, unknown>): boolean {
  const name = stream.codec_name;
  return typeof name === 'string' && name !== '' && name !== 'none';
}

/** Whether ffprobe's `format_name` names a demuxer of `AUDIO_DEMUXERS` (any name in its list). */
export function isAudioDemuxer(formatName: string | undefined): boolean {
  if (formatName === undefined) return false;
  return formatName.split(',').some((name) => AUDIO_DEMUXERS.includes(name));
}

/**
 * The audio-only policy. Video (not cover art) is refused first; then a source with no audio
 * stream, or — unless `requireDuration` is false — with no known duration, is undecodable.
 * Peaks need the duration (bucket widths); the original's `/info` and audio gate needed only an
 * audio stream, so pass `{ requireDuration: false }` there.
 */
export function probeVerdict(
  parsed: ParsedProbe,
  options: { readonly requireDuration?: boolean } = {},
): ProbeVerdict {
  if (!parsed.ok) return { ok: false, reason: 'render_failed' };
  // The argv's whitelist already refuses other demuxers; this is the same rule on the answer.
  if (!isAudioDemuxer(parsed.demuxer)) return { ok: false, reason: 'undecodable_source' };
  if (parsed.hasVideo) return { ok: false, reason: 'video_source' };
  if (!parsed.hasAudio) return { ok: false, reason: 'undecodable_source' };
  if ((options.requireDuration ?? true) && parsed.info.duration === undefined) {
    return { ok: false, reason: 'undecodable_source' };
  }
  return { ok: true, info: parsed.info };
}

/** Below this a claimed rate is a forgery: each sample becomes ≥ 8 output samples (the 1 Hz WAV). */
export const MIN_SOURCE_SAMPLE_RATE_HZ = 1_000;
/** Above this a claimed rate is a forgery: twice the highest rate any audio format records (DXD ×2). */
export const MAX_SOURCE_SAMPLE_RATE_HZ = 768_000;
/**
 * The fewest bytes per second of media any real source spends: 8 (64 b/s). The most compressible
 * silence measured (ffmpeg 5.1, 10 minutes of mono silence) was WavPack at 545 b/s, FLAC at
 * 1 076, Vorbis at 945, Opus at 1 818: a source claiming more seconds than its bytes / 8 decodes
 * to far more than its bytes justify, and is refused before it costs a slot.
 */
export const MIN_SOURCE_BYTES_PER_SECOND = 8;

export type AdmissionVerdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: 'undecodable_source' | 'source_too_long' };

const ADMITTED = Object.freeze({ ok: true } as const);

/**
 * Can the encoders take this source, within the output bound? Applied to a render's probe before
 * it asks for a slot, so a refusal never holds one: more than `MAX_CHANNELS` channels, a rate
 * outside `MIN_SOURCE_SAMPLE_RATE_HZ`..`MAX_SOURCE_SAMPLE_RATE_HZ`, or a duration its byte size
 * cannot justify is `undecodable_source`, and so is a stream with no sample rate; a duration over
 * `maxDurationS` is `source_too_long`. An unknown duration or channel count passes: the argv's
 * `-t` and the output byte cap still bound the render.
 */
export function admissionVerdict(
  media: {
    readonly sampleRate?: number;
    readonly channels?: number;
    readonly duration?: number;
  },
  sizeBytes: number | undefined,
  limits: { readonly maxDurationS: number },
): AdmissionVerdict {
  const { sampleRate, channels, duration } = media;
  if (channels !== undefined && channels > MAX_CHANNELS) {
    return { ok: false, reason: 'undecodable_source' };
  }
  // No rate (ffprobe says 0 for a stream header that names none): no decoder can time its
  // frames, so ffmpeg's filter graph refuses it ("time_base 1/0") after the slot was taken.
  if (
    sampleRate === undefined ||
    sampleRate < MIN_SOURCE_SAMPLE_RATE_HZ ||
    sampleRate > MAX_SOURCE_SAMPLE_RATE_HZ
  ) {
    return { ok: false, reason: 'undecodable_source' };
  }
  if (duration === undefined) return ADMITTED;
  if (sizeBytes !== undefined && duration * MIN_SOURCE_BYTES_PER_SECOND > sizeBytes) {
    return { ok: false, reason: 'undecodable_source' };
  }
  if (duration > limits.maxDurationS) return { ok: false, reason: 'source_too_long' };
  return ADMITTED;
}

/** The `/info` JSON object. `size` is the stat's; ffprobe's is the fallback. */
export function infoBody(parsed: ParsedProbe | ProbeInfo, size?: number): InfoBody {
  const info: ProbeInfo = 'ok' in parsed ? (parsed.ok ? parsed.info : {}) : parsed;
  const body: InfoBody = {};
  if (info.format !== undefined) body.format = info.format;
  if (info.duration !== undefined) body.duration = info.duration;
  if (info.sampleRate !== undefined) body.sample_rate = info.sampleRate;
  if (info.channels !== undefined) body.channels = info.channels;
  if (info.bitDepth !== undefined) body.bit_depth = info.bitDepth;
  if (info.bitrate !== undefined) body.bitrate = info.bitrate;
  const bytes = size !== undefined && Number.isSafeInteger(size) && size >= 0 ? size : info.size;
  if (bytes !== undefined) body.size = bytes;
  if (info.tags !== undefined && Object.keys(info.tags).length > 0) body.tags = { ...info.tags };
  return body;
}

/**
 * Collects ffprobe's stdout up to `MAX_PROBE_OUTPUT_BYTES`. `push` answers false once the bound
 * is crossed: the owner then cancels ffprobe and reports `probe_failed`.
 */
export class ProbeOutputCollector {
  readonly #max: number;
  readonly #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(maxBytes: number = MAX_PROBE_OUTPUT_BYTES) {
    if (!Number.isInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    }
    this.#max = maxBytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get overflowed(): boolean {
    return this.#bytes > this.#max;
  }

  /** Keeps `chunk`; false when the output is now over the bound (nothing more is kept). */
  push(chunk: Uint8Array): boolean {
    if (this.overflowed) return false;
    this.#bytes += chunk.byteLength;
    if (this.overflowed) {
      this.#chunks.length = 0;
      return false;
    }
    this.#chunks.push(Buffer.from(chunk));
    return true;
  }

  text(): string {
    if (this.overflowed) throw new RangeError('probe output exceeded its bound');
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

// ---------------------------------------------------------------------------------------------

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isVideo(stream: Json): boolean {
  if (stream.codec_type !== 'video') return false;
  const disposition = stream.disposition;
  if (isObject(disposition) && disposition.attached_pic === 1) return false;
  const codec = stream.codec_name;
  const stillImage =
    typeof codec === 'string' &&
    STILL_IMAGE_CODECS.has(codec) &&
    positiveInteger(stream.nb_frames) === 1;
  return !stillImage;
}

function containerToken(format: Json, audio: Json): string | undefined {
  const name = format.format_name;
  if (typeof name !== 'string' || name === '') return undefined;
  const names = name.split(',');
  const base = names.find((n) => API_CONTAINERS.has(n)) ?? names[0]!;
  // One container, two API formats: the codec decides.
  return base === 'ogg' && audio.codec_name === 'opus' ? 'opus' : base;
}

/** A non-negative number of seconds; ffprobe writes "N/A" for a duration it cannot determine. */
function seconds(value: unknown): number | undefined {
  let n: number;
  if (typeof value === 'number') n = value;
  else if (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value)) n = Number(value);
  else return undefined;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

function positiveInteger(value: unknown): number | undefined {
  if (typeof value === 'number')
    return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function boundedTags(tags: unknown): Record<string, string> | undefined {
  if (!isObject(tags)) return undefined;
  const entries = Object.entries(tags)
    .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, MAX_INFO_TAGS);
  if (entries.length === 0) return undefined;
  // Null prototype: a tag named `__proto__` or `constructor` is data like any other.
  const out: Record<string, string> = Object.create(null);
  for (const [key, value] of entries) {
    const lower = key.toLowerCase();
    if (!Object.hasOwn(out, lower)) {
      out[lower] = Array.from(value).slice(0, MAX_INFO_TAG_CHARS).join('');
    }
  }
  return out;
}
