/**
 * The variant's nouns: what a rendered variant is (`RenderOptions`), the formats and their
 * defaults, the option keys that describe bytes (part of the cache key) and those that describe
 * only the request, and the one canonical rendering of a number.
 *
 * Parsing and validating the URL grammar into these is `http/options.ts`; turning them into an
 * ffmpeg command is `workers/argv.ts`; both speak these types, so a value means the same thing
 * in the key and in the command.
 *
 * ## Invariants
 * - `renderNumber` is the only way a number enters a canonical string or an argv: at most three
 *   decimal places, no trailing zeros, no `-0`.
 * - `VARIANT_KEYS` is sorted: the canonical options string lists keys in this order.
 *
 * Imports nothing of the project.
 */

export const FORMATS = ['mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav', 'peaks'] as const;
export type Format = (typeof FORMATS)[number];
export type BitDepth = '16' | '24' | '32f';
export type PeaksFormat = 'json' | 'dat';
export type EnhancePreset = 'voice';

/** Pinned presets: a preset names an exact filter chain forever; a new chain is a new name. */
export const ENHANCE_PRESETS: readonly EnhancePreset[] = ['voice'];

/** Lossy encoders gain nothing above 48 kHz. Exported for the argv builder's source-rate clamp. */
export const LOSSY_SAMPLE_RATE_CAP_HZ = 48_000;

export const DEFAULT_FORMAT: Format = 'mp3';
export const DEFAULT_PEAK_COUNT = 800; // one pair per pixel of a typical player width
export const DEFAULT_PEAKS_FORMAT: PeaksFormat = 'json';
export const DEFAULT_PEAK_CHANNELS = 1; // a waveform UI draws one shape
export const DEFAULT_NORM: Readonly<NormTargets> = Object.freeze({ i: -16, tp: -1.5, lra: 11 });

/** Keys that describe the rendered bytes, in canonical (sorted) order. */
export const VARIANT_KEYS = [
  'bd',
  'br',
  'cb',
  'ch',
  'dl',
  'enhance',
  'f',
  'fade',
  'gain',
  'norm',
  'pk_fmt',
  'pts',
  'q',
  'sr',
  't',
] as const;
/** Keys that describe the request: signed, validated, never part of the key. */
export const REQUEST_KEYS = ['exp'] as const;

export interface NormTargets {
  /** Integrated loudness target, LUFS. */
  readonly i: number;
  /** True peak ceiling, dBTP. */
  readonly tp: number;
  /** Loudness range target, LU. */
  readonly lra: number;
}

/** A parsed, validated variant description. Absent fields follow the source or skip the stage. */
export interface RenderOptions {
  readonly format: Format;
  readonly bitrateK?: number;
  readonly quality?: number;
  readonly sampleRate?: number;
  /** Under `f:peaks` always present (default 1). */
  readonly channels?: 1 | 2;
  readonly bitDepth?: BitDepth;
  /** `duration` absent: to the end of the source. */
  readonly trim?: { readonly start: number; readonly duration?: number };
  /** An omitted out-fade is 0. */
  readonly fade?: { readonly in: number; readonly out: number };
  readonly gainDb?: number;
  readonly norm?: NormTargets;
  readonly enhance?: EnhancePreset;
  /** Under `f:peaks` always present (default 800). */
  readonly pts?: number;
  /** Under `f:peaks` always present (default json). */
  readonly peaksFormat?: PeaksFormat;
  /** Still percent-encoded, exactly as in the path. See `variantHeaders.ts` for the header. */
  readonly download?: string;
  readonly cacheBuster?: string;
}

/** Millisecond precision: float formatting can never move a key. The grammar refuses more places. */
export const MAX_DECIMAL_PLACES = 3;

/**
 * The canonical minimal rendering: `30` not `30.0`, `12.5` not `12.50`, at most three places.
 * Every number in a normalised string goes through here; the argv builder should use it too, so
 * the key and the command cannot disagree about a value.
 */
export function renderNumber(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`cannot render ${n} as an option number`);
  if (Object.is(n, -0)) return '0';
  if (Number.isInteger(n)) return String(n);
  const fixed = n.toFixed(MAX_DECIMAL_PLACES).replace(/0+$/, '').replace(/\.$/, '');
  return fixed === '-0' ? '0' : fixed;
}
