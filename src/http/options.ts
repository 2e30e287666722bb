/**
 * The processing-options grammar: route split, parse, validate, normalise, and presets.
 *
 * Options are the API. A variant is fully described by its *variant* options, and the normalised
 * options string is half of what the cache key hashes, so this module owns three obligations:
 * turning `/`-separated `key:value` segments into typed `RenderOptions` (every value domain), the
 * cross-key rules no single segment can see, and rendering the canonical string back (defaults
 * materialised, keys sorted, numbers minimal). `exp` is a *request* option: parsed and validated
 * here, signed for free as path bytes, and kept out of the canonical string so URLs that differ only
 * in `exp` share a key and coalesce. The keys, bounds and defaults come from the grammar's table
 * (`optionTable.ts`), which docs/options.md is generated from.
 *
 * A *preset* (`pr:NAME[:NAME…]`, `AP_PRESETS`) is a stored option string. It expands under the
 * URL's own segments: named presets apply in order (a later one wins a key two set), and a key the
 * URL spells itself wins over every preset wherever it stands. `AP_ONLY_PRESETS` refuses every
 * variant option a URL spells itself and requires a preset.
 *
 * ## Invariants
 * - **Refused, never repaired.** Every malformed or conflicting segment is a 422 naming it; values
 *   are never rounded, clamped or last-write-wins. A key appears once among the URL's own segments
 *   (`pr` included); a preset's value yielding to the URL's is the one precedence, and it is
 *   order-free, so segment order still never changes the result.
 * - **A preset URL is its expansion.** Presets never reach the canonical string: a URL naming a
 *   preset and one spelling the same options out normalise identically and share a cache key, and
 *   redefining a preset moves its URLs to the new variant instead of serving stale bytes.
 * - **Normalisation is a fixed point.** `normalizeOptions(parse(normalizeOptions(x)))` equals
 *   `normalizeOptions(x)`: decimals carry at most three places, magnitudes are bounded so every
 *   accepted value is exact to the millisecond in a double, and every number is rendered by the
 *   one `renderNumber`.
 * - **The canonical string cannot contain a newline** (control bytes in `dl`/`cb` are refused),
 *   which is what keeps the cache key's `\n` separator unambiguous.
 * - **The source starts at the first segment exactly equal to `plain` or `enc`.** No marker is the
 *   generic 404, not a 422: nothing servable was named.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None. The 422 is data (`InvalidOptions`); `errors.ts` maps it to HTTP.
 */

import {
  DEFAULT_FORMAT,
  DEFAULT_NORM,
  DEFAULT_PEAK_CHANNELS,
  DEFAULT_PEAK_COUNT,
  DEFAULT_PEAKS_FORMAT,
  ENHANCE_PRESETS,
  FORMATS,
  type Format,
  LOSSY_SAMPLE_RATE_CAP_HZ,
  MAX_DECIMAL_PLACES,
  type RenderOptions,
  renderNumber,
  VARIANT_KEYS,
} from '../core/variant.js';
import {
  BIT_DEPTHS,
  FLOAT_BIT_DEPTH,
  INFO_SEGMENT,
  LOSSLESS_FORMATS,
  LOSSY_FORMATS,
  MAX_BITRATE_KBPS,
  MAX_EXP_S,
  MAX_GAIN_DB,
  MAX_PEAK_COUNT,
  MAX_SAMPLE_RATE_HZ,
  MAX_SECONDS,
  NORM_RANGES,
  OPTION_ROWS,
  type OptionKey,
  PEAKS_FORMATS,
  PEAKS_UNSUPPORTED,
  PRESET_KEY,
  QUALITY_RANGES,
  SOURCE_MARKERS,
} from './optionTable.js';

const LOSSY: ReadonlySet<Format> = new Set(LOSSY_FORMATS);
const LOSSLESS: ReadonlySet<Format> = new Set(LOSSLESS_FORMATS);

type VariantKey = (typeof VARIANT_KEYS)[number];
/** The keys a segment may carry besides `pr`: the table's variant and request rows. */
const ALL_KEYS: ReadonlySet<string> = new Set(
  OPTION_ROWS.filter((r) => r.kind !== 'preset').map((r) => r.key),
);
const REQUEST_ONLY: ReadonlySet<string> = new Set(
  OPTION_ROWS.filter((r) => r.kind === 'request').map((r) => r.key),
);
const MARKERS: ReadonlySet<string> = new Set(SOURCE_MARKERS);

const INTEGER = /^\d+$/;
const DECIMAL = new RegExp(`^-?\\d+(\\.\\d{1,${MAX_DECIMAL_PLACES}})?$`);
const LONG_DECIMAL = /^-?\d+\.\d+$/;

/** Options about the request rather than the variant. */
export interface RequestOptions {
  /** Expiry, Unix seconds. Past values are valid grammar: the expiry check answers 410. */
  readonly exp?: number;
}

/** Every reason a segment is refused for, in the order the reference lists them. */
export const OPTION_ERROR_REASONS = [
  'empty_segment',
  'missing_value',
  'unknown_key',
  'duplicate_key',
  'invalid_integer',
  'invalid_number',
  'excessive_precision',
  'invalid_value',
  'out_of_range',
  'control_character',
  'mutually_exclusive',
  'requires_lossless_format',
  'requires_lossy_format',
  'requires_peaks_format',
  'unsupported_for_peaks',
  'unsupported_for_format',
  'out_of_range_for_format',
  'requires_bounded_trim',
  'sample_rate_above_lossy_cap',
  'fade_exceeds_duration',
  'info_with_options',
  'unknown_preset',
  'duplicate_preset',
  'only_presets',
  'preset_required',
] as const;
export type OptionErrorReason = (typeof OPTION_ERROR_REASONS)[number];

/** The 422 outcome. `message` names the segment in its canonical spelling; `error` is the contract. */
export interface InvalidOptions {
  readonly ok: false;
  readonly error: 'invalid_options';
  readonly reason: OptionErrorReason;
  readonly segment: string;
  readonly message: string;
}

export type ParseOptionsResult =
  | { readonly ok: true; readonly options: RenderOptions; readonly request: RequestOptions }
  | InvalidOptions;

export type RouteResult =
  | {
      readonly ok: true;
      readonly endpoint: 'render';
      readonly options: RenderOptions;
      readonly request: RequestOptions;
      /** `normalizeOptions(options)`, the first half of the cache key. */
      readonly normalized: string;
      /** The raw source string from the marker on (`plain/…` or `enc/…`), still escaped. */
      readonly source: string;
    }
  | { readonly ok: true; readonly endpoint: 'info'; readonly source: string }
  | InvalidOptions
  | { readonly ok: false; readonly error: 'not_found' };

const NOT_FOUND = Object.freeze({ ok: false, error: 'not_found' } as const);

const q = (s: string | undefined): string => JSON.stringify(s ?? '');

function messageFor(reason: OptionErrorReason, segment: string, related?: string): string {
  switch (reason) {
    case 'empty_segment':
      return 'empty options segment';
    case 'missing_value':
      return `segment ${q(segment)} has no value`;
    case 'unknown_key':
      return `unknown option ${q(segment)}`;
    case 'duplicate_key':
      return `option ${q(segment)} given more than once`;
    case 'invalid_integer':
      return `${q(segment)} expects an integer`;
    case 'invalid_number':
      return `${q(segment)} expects a number`;
    case 'excessive_precision':
      return `${q(segment)} exceeds millisecond precision`;
    case 'invalid_value':
      return `${q(segment)} is not a supported value`;
    case 'out_of_range':
      return `${q(segment)} is out of range`;
    case 'control_character':
      return `${q(segment)} contains a control character`;
    case 'mutually_exclusive':
      return `${q(segment)} conflicts with ${q(related)}`;
    case 'requires_lossless_format':
      return `${q(segment)} requires a lossless format, not ${q(related)}`;
    case 'requires_lossy_format':
      return `${q(segment)} requires a lossy format, not ${q(related)}`;
    case 'requires_peaks_format':
      return `${q(segment)} requires f:peaks`;
    case 'unsupported_for_peaks':
      return `${q(segment)} is not supported with f:peaks`;
    case 'unsupported_for_format':
      return `${q(segment)} is not supported with ${q(related)}`;
    case 'out_of_range_for_format':
      return `${q(segment)} is out of range for ${q(related)}`;
    case 'requires_bounded_trim':
      return `${q(segment)} requires a trim with a duration`;
    case 'sample_rate_above_lossy_cap':
      return `${q(segment)} exceeds the 48 kHz lossy cap`;
    case 'fade_exceeds_duration':
      return `${q(segment)} is longer than the trimmed region ${q(related)}`;
    case 'info_with_options':
      return `${q(segment)} cannot accompany info, which takes no options`;
    case 'unknown_preset':
      return `${q(segment)} names no preset ${q(related)}`;
    case 'duplicate_preset':
      return `${q(segment)} names preset ${q(related)} more than once`;
    case 'only_presets':
      return `${q(segment)} is refused: only presets (pr:NAME) and exp may be given`;
    case 'preset_required':
      return 'a preset is required (pr:NAME)';
  }
}

function invalid(reason: OptionErrorReason, segment: string, related?: string): InvalidOptions {
  return {
    ok: false,
    error: 'invalid_options',
    reason,
    segment,
    message: messageFor(reason, segment, related),
  };
}

// ---------------------------------------------------------------------------------------------
// Numbers

/** Milliseconds, exact for every value the grammar accepts. */
function millis(seconds: number): number {
  return Math.round(seconds * 1000);
}

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: OptionErrorReason };
const fail = <T>(reason: OptionErrorReason): Parsed<T> => ({ ok: false, reason });
const okv = <T>(value: T): Parsed<T> => ({ ok: true, value });

function boundedInteger(text: string, max: number): Parsed<number> {
  if (!INTEGER.test(text)) return fail('invalid_integer');
  const n = Number(text);
  return n >= 1 && n <= max ? okv(n) : fail('out_of_range');
}

function decimal(text: string): Parsed<number> {
  if (DECIMAL.test(text)) {
    const n = Number(text);
    // Hundreds of digits overflow a double; no option's domain reaches that far.
    if (!Number.isFinite(n)) return fail('out_of_range');
    // `-0` is a legal spelling of zero; collapse it so it can never reach a struct or an argv.
    return okv(n === 0 ? 0 : n);
  }
  return fail(LONG_DECIMAL.test(text) ? 'excessive_precision' : 'invalid_number');
}

function boundedDecimal(text: string, min: number, max: number): Parsed<number> {
  const d = decimal(text);
  if (!d.ok) return d;
  return d.value >= min && d.value <= max ? d : fail('out_of_range');
}

function seconds(text: string): Parsed<number> {
  return boundedDecimal(text, 0, MAX_SECONDS);
}

// ---------------------------------------------------------------------------------------------
// Parsing

type Draft = { -readonly [K in keyof RenderOptions]: RenderOptions[K] } & { exp?: number };

function oneOf<T extends string>(value: string, allowed: readonly T[]): Parsed<T> {
  return (allowed as readonly string[]).includes(value) ? okv(value as T) : fail('invalid_value');
}

/** C0 controls and DEL: they would reach a header, and `\n` would break the key's separator. */
function hasControlByte(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

function opaque(value: string): Parsed<string> {
  if (value === '') return fail('invalid_value');
  return hasControlByte(value) ? fail('control_character') : okv(value);
}

function applyValue(key: OptionKey, value: string, draft: Draft): OptionErrorReason | undefined {
  switch (key) {
    case 'f': {
      const r = oneOf(value, FORMATS);
      if (!r.ok) return r.reason;
      draft.format = r.value;
      return undefined;
    }
    case 'br': {
      const r = boundedInteger(value, MAX_BITRATE_KBPS);
      if (!r.ok) return r.reason;
      draft.bitrateK = r.value;
      return undefined;
    }
    case 'q': {
      const r = decimal(value);
      if (!r.ok) return r.reason;
      draft.quality = r.value;
      return undefined;
    }
    case 'sr': {
      const r = boundedInteger(value, MAX_SAMPLE_RATE_HZ);
      if (!r.ok) return r.reason;
      draft.sampleRate = r.value;
      return undefined;
    }
    case 'ch': {
      if (value !== '1' && value !== '2') return 'invalid_value';
      draft.channels = value === '1' ? 1 : 2;
      return undefined;
    }
    case 'bd': {
      const r = oneOf(value, BIT_DEPTHS);
      if (!r.ok) return r.reason;
      draft.bitDepth = r.value;
      return undefined;
    }
    case 't': {
      const parts = value.split(':');
      if (parts.length > 2) return 'invalid_value';
      const start = seconds(parts[0]!);
      if (!start.ok) return start.reason;
      if (parts.length === 1) {
        draft.trim = { start: start.value };
        return undefined;
      }
      const duration = seconds(parts[1]!);
      if (!duration.ok) return duration.reason;
      if (duration.value <= 0) return 'out_of_range';
      draft.trim = { start: start.value, duration: duration.value };
      return undefined;
    }
    case 'fade': {
      const parts = value.split(':');
      if (parts.length > 2) return 'invalid_value';
      const fadeIn = seconds(parts[0]!);
      if (!fadeIn.ok) return fadeIn.reason;
      const fadeOut = parts.length === 2 ? seconds(parts[1]!) : okv(0);
      if (!fadeOut.ok) return fadeOut.reason;
      draft.fade = { in: fadeIn.value, out: fadeOut.value };
      return undefined;
    }
    case 'gain': {
      const r = boundedDecimal(value, -MAX_GAIN_DB, MAX_GAIN_DB);
      if (!r.ok) return r.reason;
      draft.gainDb = r.value;
      return undefined;
    }
    case 'norm': {
      const [mode, ...targets] = value.split(':');
      if (mode !== 'ebu' || targets.length > NORM_RANGES.length) return 'invalid_value';
      const values = [DEFAULT_NORM.i, DEFAULT_NORM.tp, DEFAULT_NORM.lra];
      for (let k = 0; k < targets.length; k++) {
        const [min, max] = NORM_RANGES[k]!;
        const r = boundedDecimal(targets[k]!, min, max);
        if (!r.ok) return r.reason;
        values[k] = r.value;
      }
      draft.norm = { i: values[0]!, tp: values[1]!, lra: values[2]! };
      return undefined;
    }
    case 'enhance': {
      const r = oneOf(value, ENHANCE_PRESETS);
      if (!r.ok) return r.reason;
      draft.enhance = r.value;
      return undefined;
    }
    case 'pts': {
      const r = boundedInteger(value, MAX_PEAK_COUNT);
      if (!r.ok) return r.reason;
      draft.pts = r.value;
      return undefined;
    }
    case 'pk_fmt': {
      const r = oneOf(value, PEAKS_FORMATS);
      if (!r.ok) return r.reason;
      draft.peaksFormat = r.value;
      return undefined;
    }
    case 'dl': {
      const r = opaque(value);
      if (!r.ok) return r.reason;
      draft.download = r.value;
      return undefined;
    }
    case 'cb': {
      const r = opaque(value);
      if (!r.ok) return r.reason;
      draft.cacheBuster = r.value;
      return undefined;
    }
    case 'exp': {
      const r = boundedInteger(value, MAX_EXP_S);
      if (!r.ok) return r.reason;
      draft.exp = r.value;
      return undefined;
    }
  }
}

/**
 * One key rendered canonically, or undefined when absent. Used both by `normalizeOptions` and by
 * validation to name a segment in its canonical spelling.
 */
function renderSegment(key: VariantKey, o: RenderOptions): string | undefined {
  const peaks = o.format === 'peaks';
  switch (key) {
    case 'f':
      return `f:${o.format}`;
    case 'bd':
      return o.bitDepth === undefined ? undefined : `bd:${o.bitDepth}`;
    case 'br':
      return o.bitrateK === undefined ? undefined : `br:${o.bitrateK}`;
    case 'cb':
      return o.cacheBuster === undefined ? undefined : `cb:${o.cacheBuster}`;
    case 'ch': {
      const ch = peaks ? (o.channels ?? DEFAULT_PEAK_CHANNELS) : o.channels;
      return ch === undefined ? undefined : `ch:${ch}`;
    }
    case 'dl':
      return o.download === undefined ? undefined : `dl:${o.download}`;
    case 'enhance':
      return o.enhance === undefined ? undefined : `enhance:${o.enhance}`;
    case 'fade':
      return o.fade === undefined
        ? undefined
        : `fade:${renderNumber(o.fade.in)}:${renderNumber(o.fade.out)}`;
    case 'gain':
      return o.gainDb === undefined ? undefined : `gain:${renderNumber(o.gainDb)}`;
    case 'norm':
      return o.norm === undefined
        ? undefined
        : `norm:ebu:${renderNumber(o.norm.i)}:${renderNumber(o.norm.tp)}:${renderNumber(o.norm.lra)}`;
    case 'pk_fmt': {
      const fmt = peaks ? (o.peaksFormat ?? DEFAULT_PEAKS_FORMAT) : o.peaksFormat;
      return fmt === undefined ? undefined : `pk_fmt:${fmt}`;
    }
    case 'pts': {
      const pts = peaks ? (o.pts ?? DEFAULT_PEAK_COUNT) : o.pts;
      return pts === undefined ? undefined : `pts:${pts}`;
    }
    case 'q':
      return o.quality === undefined ? undefined : `q:${renderNumber(o.quality)}`;
    case 'sr':
      return o.sampleRate === undefined ? undefined : `sr:${o.sampleRate}`;
    case 't':
      if (o.trim === undefined) return undefined;
      return o.trim.duration === undefined
        ? `t:${renderNumber(o.trim.start)}`
        : `t:${renderNumber(o.trim.start)}:${renderNumber(o.trim.duration)}`;
  }
}

/** Cross-key rules, in the order they are reported. */
function validate(o: RenderOptions): InvalidOptions | undefined {
  const seg = (k: VariantKey): string => renderSegment(k, o) ?? '';
  const f = seg('f');
  const peaks = o.format === 'peaks';

  if (o.bitrateK !== undefined && o.quality !== undefined) {
    return invalid('mutually_exclusive', seg('q'), seg('br'));
  }
  // Peaks fall through to the peaks rule below, which names the better reason.
  if (!peaks) {
    if (o.bitrateK !== undefined && !LOSSY.has(o.format)) {
      return invalid('requires_lossy_format', seg('br'), f);
    }
    if (o.quality !== undefined) {
      const range = QUALITY_RANGES[o.format];
      if (range === undefined) return invalid('unsupported_for_format', seg('q'), f);
      if (o.quality < range[0] || o.quality > range[1]) {
        return invalid('out_of_range_for_format', seg('q'), f);
      }
    }
    if (o.bitDepth !== undefined && !LOSSLESS.has(o.format)) {
      return invalid('requires_lossless_format', seg('bd'), f);
    }
    if (o.bitDepth === FLOAT_BIT_DEPTH && o.format !== 'wav') {
      return invalid('unsupported_for_format', seg('bd'), f);
    }
  } else {
    const refused = PEAKS_UNSUPPORTED.find((k) => renderSegment(k, o) !== undefined);
    if (refused !== undefined) return invalid('unsupported_for_peaks', seg(refused), f);
  }
  if (!peaks) {
    if (o.pts !== undefined) return invalid('requires_peaks_format', seg('pts'), f);
    if (o.peaksFormat !== undefined) return invalid('requires_peaks_format', seg('pk_fmt'), f);
  }
  if (
    o.sampleRate !== undefined &&
    LOSSY.has(o.format) &&
    o.sampleRate > LOSSY_SAMPLE_RATE_CAP_HZ
  ) {
    return invalid('sample_rate_above_lossy_cap', seg('sr'), f);
  }
  if (o.fade !== undefined) {
    const duration = o.trim?.duration;
    if (duration === undefined) {
      // A fade-out counts back from the end, which only a bounded trim names without a probe.
      if (o.fade.out > 0) return invalid('requires_bounded_trim', seg('fade'), seg('t'));
    } else if (millis(o.fade.in) + millis(o.fade.out) > millis(duration)) {
      // Integer milliseconds: 0.1 + 0.2 must fit a 0.3 trim exactly.
      return invalid('fade_exceeds_duration', seg('fade'), seg('t'));
    }
  }
  return undefined;
}

function splitSegments(input: string | readonly string[]): readonly string[] {
  if (typeof input !== 'string') return input;
  return input === '' ? [] : input.split('/');
}

/**
 * The presets a URL may name, and whether they are all it may name. Built from the
 * configuration by `presets.ts`, which checks every preset against this grammar first.
 */
export interface OptionGrammar {
  /** Preset name → its option segments, in order. */
  readonly presets: ReadonlyMap<string, readonly string[]>;
  /** `AP_ONLY_PRESETS`: a render names a preset and carries no variant option of its own. */
  readonly onlyPresets: boolean;
}

/** The grammar with no presets: `pr:NAME` is refused as an unknown preset. */
export const NO_PRESETS: OptionGrammar = Object.freeze({
  presets: new Map<string, readonly string[]>(),
  onlyPresets: false,
});

/** `pr:`'s names, each a configured preset named once; or why not (naming the name). */
function presetNames(
  value: string,
  grammar: OptionGrammar,
): { ok: true; names: readonly string[] } | { ok: false; reason: OptionErrorReason; name: string } {
  const names = value.split(':');
  const seen = new Set<string>();
  for (const name of names) {
    if (!grammar.presets.has(name)) return { ok: false, reason: 'unknown_preset', name };
    if (seen.has(name)) return { ok: false, reason: 'duplicate_preset', name };
    seen.add(name);
  }
  return { ok: true, names };
}

/**
 * Parses option segments (`'f:opus/br:96'` or `['f:opus', 'br:96']`; `''` is the defaults) into
 * validated `RenderOptions` plus the request options. Under `f:peaks`, `channels`, `pts` and
 * `peaksFormat` come back materialised.
 *
 * `pr:NAME[:NAME…]` expands the named presets of `grammar`: in the order named (a later preset
 * wins a key two of them set), and under the URL's own segments (an explicit key wins over every
 * preset, wherever either stands, so segment order still never matters). Keys stay unique among
 * the URL's own segments, `pr` included.
 */
export function parseOptions(
  input: string | readonly string[],
  grammar: OptionGrammar = NO_PRESETS,
): ParseOptionsResult {
  const draft: Draft = { format: DEFAULT_FORMAT };
  const seen = new Set<string>();
  let presets: readonly string[] = [];
  for (const segment of splitSegments(input)) {
    if (segment === '') return invalid('empty_segment', '');
    const colon = segment.indexOf(':');
    if (colon === -1) return invalid('missing_value', segment);
    const key = segment.slice(0, colon);
    const value = segment.slice(colon + 1);
    if (key !== PRESET_KEY && !ALL_KEYS.has(key)) return invalid('unknown_key', segment);
    if (seen.has(key)) return invalid('duplicate_key', segment);
    seen.add(key);
    if (key === PRESET_KEY) {
      const named = presetNames(value, grammar);
      if (!named.ok) return invalid(named.reason, segment, named.name);
      presets = named.names;
      continue;
    }
    if (grammar.onlyPresets && !REQUEST_ONLY.has(key)) return invalid('only_presets', segment);
    const reason = applyValue(key as OptionKey, value, draft);
    if (reason !== undefined) return invalid(reason, segment);
  }
  if (grammar.onlyPresets && presets.length === 0) return invalid('preset_required', '');
  for (const name of presets) {
    for (const segment of grammar.presets.get(name)!) {
      const colon = segment.indexOf(':');
      const key = segment.slice(0, colon);
      if (seen.has(key)) continue; // the URL's own segment wins
      // Checked against this grammar when the presets were built, so this cannot refuse.
      const reason = applyValue(key as OptionKey, segment.slice(colon + 1), draft);
      if (reason !== undefined) return invalid(reason, `${PRESET_KEY}:${name}`);
    }
  }
  const { exp, ...variant } = draft;
  const failure = validate(variant);
  if (failure !== undefined) return failure;
  const options: RenderOptions =
    variant.format === 'peaks'
      ? {
          ...variant,
          channels: variant.channels ?? DEFAULT_PEAK_CHANNELS,
          pts: variant.pts ?? DEFAULT_PEAK_COUNT,
          peaksFormat: variant.peaksFormat ?? DEFAULT_PEAKS_FORMAT,
        }
      : variant;
  return { ok: true, options, request: exp === undefined ? {} : { exp } };
}

/**
 * The canonical options string: variant keys only, sorted, defaults materialised (`f` always;
 * `ch`, `pts`, `pk_fmt` under `f:peaks`; all three `norm` targets), numbers minimal, `fade:IN:OUT`,
 * `norm:ebu:I:TP:LRA`. Expects options that came from `parseOptions`.
 */
export function normalizeOptions(options: RenderOptions): string {
  const parts: string[] = [];
  for (const key of VARIANT_KEYS) {
    const rendered = renderSegment(key, options);
    if (rendered !== undefined) parts.push(rendered);
  }
  return parts.join('/');
}

/** Parse and normalise in one step. */
export function normalizeOptionsString(
  input: string | readonly string[],
  grammar: OptionGrammar = NO_PRESETS,
): { ok: true; normalized: string } | InvalidOptions {
  const parsed = parseOptions(input, grammar);
  return parsed.ok ? { ok: true, normalized: normalizeOptions(parsed.options) } : parsed;
}

/**
 * Splits the verified rest of the path (`/f:opus/plain/local://a.wav`) at the first segment that is
 * exactly `plain` or `enc`. No marker → `not_found`.
 */
export function splitOptionsAndSource(
  rest: string,
):
  | { readonly ok: true; readonly optionSegments: readonly string[]; readonly source: string }
  | { readonly ok: false; readonly error: 'not_found' } {
  const segments = rest.split('/');
  // The leading empty segment is the leading slash, not an empty option.
  if (segments[0] === '') segments.shift();
  const marker = segments.findIndex((s) => MARKERS.has(s));
  if (marker === -1) return NOT_FOUND;
  return {
    ok: true,
    optionSegments: segments.slice(0, marker),
    source: segments.slice(marker).join('/'),
  };
}

/**
 * The whole options stage for a verified rest of path: marker split (404), `info` detection
 * (`info` must be the only segment, else a 422 naming the other one), option grammar with the
 * presets of `grammar` (422), and the normalised string for the cache key.
 */
export function parseRoute(rest: string, grammar: OptionGrammar = NO_PRESETS): RouteResult {
  const split = splitOptionsAndSource(rest);
  if (!split.ok) return split;
  const { optionSegments, source } = split;
  if (optionSegments.includes(INFO_SEGMENT)) {
    if (optionSegments.length === 1) return { ok: true, endpoint: 'info', source };
    const other = optionSegments.find((s) => s !== INFO_SEGMENT);
    return other === undefined
      ? invalid('duplicate_key', INFO_SEGMENT)
      : invalid('info_with_options', other);
  }
  const parsed = parseOptions(optionSegments, grammar);
  if (!parsed.ok) return parsed;
  return {
    ok: true,
    endpoint: 'render',
    options: parsed.options,
    request: parsed.request,
    normalized: normalizeOptions(parsed.options),
    source,
  };
}
