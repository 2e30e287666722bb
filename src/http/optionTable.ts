/**
 * The option grammar's table: one row per URL option key (what a value is, its bounds, its
 * default, how it renders in the canonical string, what it does, examples and refusals), and the
 * domain constants those texts and the parser share.
 *
 * ## Invariants
 * - **One source for the parser and its reference.** `options.ts` takes its key list and every
 *   bound from here, and docs/options.md is rendered from these rows (`optionDocs.ts`), so a bound
 *   written in the reference is the constant the parser checks, never a copied number.
 * - **Every key has exactly one row**, and there is no row without a key: the compiler refuses a
 *   table missing a key (`Complete`), `checked` refuses a repeated one at import.
 * - **Examples are the parser's, not prose**: test/optionsDocs.test.ts parses every example (it
 *   must be accepted, and the page shows the canonical string the parser renders) and every
 *   refusal (it must be refused for the reason the row names), under the sample presets below.
 *
 * Not here: parsing (`options.ts`), expanding presets (`options.ts`, `presets.ts`), the page's
 * prose (`optionDocs.ts`).
 */
import {
  type BitDepth,
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
  type PeaksFormat,
  type REQUEST_KEYS,
  type VARIANT_KEYS,
} from '../core/variant.js';

export const LOSSY_FORMATS: readonly Format[] = ['mp3', 'opus', 'ogg', 'aac', 'm4a'];
export const LOSSLESS_FORMATS: readonly Format[] = ['flac', 'wav'];
export const BIT_DEPTHS: readonly BitDepth[] = ['16', '24', '32f'];
/** The one bit depth only `f:wav` carries (flac encodes integers). */
export const FLOAT_BIT_DEPTH: BitDepth = '32f';
export const PEAKS_FORMATS: readonly PeaksFormat[] = ['json', 'dat'];

/** Each encoder's own quality scale; wav (PCM) has none. flac's is its compression level. */
export const QUALITY_RANGES: Readonly<Partial<Record<Format, readonly [number, number]>>> = {
  mp3: [0, 9],
  ogg: [-1, 10],
  aac: [0.1, 2],
  m4a: [0.1, 2],
  opus: [0, 10],
  flac: [0, 12],
};

/** Far above any codec's real ceiling; a typo fails here, not in ffmpeg. */
export const MAX_BITRATE_KBPS = 10_000;
/** The highest rate any real master uses. */
export const MAX_SAMPLE_RATE_HZ = 384_000;
/** Bounds the reducer's allocation; a waveform wider than any screen. */
export const MAX_PEAK_COUNT = 100_000;
/** Beyond this the output is silence or a square wave. */
export const MAX_GAIN_DB = 100;
/** The last second of year 9999: a larger `exp` is a typo. */
export const MAX_EXP_S = 253_402_300_799;
/** Time values above this lose millisecond exactness in a double (1e12 s × 1000 < 2^53). */
export const MAX_SECONDS = 1e12;

/** loudnorm's documented input ranges, in target order (`norm:ebu:I:TP:LRA`). */
export const NORM_RANGES: readonly (readonly [number, number])[] = [
  [-70, -5],
  [-9, 0],
  [1, 50],
];

type VariantKey = (typeof VARIANT_KEYS)[number];
/** An option key of the grammar: a variant key or a request key. */
export type OptionKey = VariantKey | (typeof REQUEST_KEYS)[number];
/** `f:peaks` refuses what cannot change the picture: encoder settings and the resample. */
export const PEAKS_UNSUPPORTED: readonly VariantKey[] = ['br', 'q', 'sr', 'bd'];

/** The segments that start the source; the first segment exactly equal to one of them. */
export const SOURCE_MARKERS: readonly string[] = ['plain', 'enc'];
/** The info endpoint's one options segment. */
export const INFO_SEGMENT = 'info';
/** The key that names presets: `pr:NAME[:NAME…]`. Never part of the canonical string. */
export const PRESET_KEY = 'pr';

/** One URL option, as the reference documents it. */
export interface OptionRow {
  readonly key: OptionKey | typeof PRESET_KEY;
  /** `variant`: part of the cache key; `request`: signed, never keyed; `preset`: expands. */
  readonly kind: 'variant' | 'request' | 'preset';
  readonly title: string;
  /** What a value is, bounds included (built from the constants above). */
  readonly values: string;
  /** What applies when the key is absent. */
  readonly default: string;
  /** How the key appears in the canonical options string. */
  readonly canonical: string;
  /** What it does, and the rules it shares with other keys. */
  readonly doc: string;
  /** Option strings the parser accepts (under `OPTION_EXAMPLE_PRESETS`). */
  readonly examples: readonly string[];
  /** Option strings the parser refuses, with the reason it gives (`OptionErrorReason`). */
  readonly refused: readonly (readonly [string, string])[];
}

/** The sample `AP_PRESETS` the reference's examples are parsed under. */
export const OPTION_EXAMPLE_PRESETS: readonly {
  readonly name: string;
  readonly options: string;
}[] = [
  { name: 'preview', options: 'f:mp3/br:64/t:0:30/fade:0:2' },
  { name: 'voice', options: 'enhance:voice/norm:ebu:-16' },
  { name: 'wave', options: 'f:peaks/pts:1200' },
  { name: 'hq', options: 'f:opus/br:160' },
];

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');
const range = ([min, max]: readonly [number, number]) => `${min} to ${max}`;
const qualityScales = Object.entries(QUALITY_RANGES)
  .map(([format, r]) => `${format} ${range(r!)}`)
  .join(', ');
const decimal = `a decimal in plain notation, at most ${MAX_DECIMAL_PLACES} places`;
const seconds = `seconds: ${decimal}, from 0 to ${MAX_SECONDS}`;
const [NORM_I, NORM_TP, NORM_LRA] = NORM_RANGES as [
  readonly [number, number],
  readonly [number, number],
  readonly [number, number],
];

/** `R` when it has a row for every key; otherwise a type naming the keys without one. */
type Complete<R extends readonly OptionRow[]> = [
  Exclude<OptionKey | typeof PRESET_KEY, R[number]['key']>,
] extends [never]
  ? R
  : { readonly keysWithoutARow: Exclude<OptionKey | typeof PRESET_KEY, R[number]['key']> };

function checked<const R extends readonly OptionRow[]>(rows: R & Complete<R>): R {
  const keys = new Set<string>();
  for (const r of rows) {
    if (keys.has(r.key)) throw new Error(`option table: ${r.key} has two rows`);
    keys.add(r.key);
  }
  return rows;
}

/** Every option, in the order the reference lists them. */
export const OPTION_ROWS = checked([
  {
    key: 'f',
    kind: 'variant',
    title: 'Output format',
    values: `one of ${list(FORMATS)}`,
    default: `\`${DEFAULT_FORMAT}\``,
    canonical: 'always present: `f:FORMAT`',
    doc: `The encoded format. Lossy: ${list(LOSSY_FORMATS)}; lossless: ${list(LOSSLESS_FORMATS)}. \`aac\` is an ADTS stream, \`m4a\` fragmented MP4. \`peaks\` is not audio but a waveform (min/max pairs, JSON or binary: see \`pts\` and \`pk_fmt\`); it refuses ${list(PEAKS_UNSUPPORTED)}, which cannot change the picture.`,
    examples: ['f:opus', 'f:flac', 'f:peaks', ''],
    refused: [
      ['f:wma', 'invalid_value'],
      ['f:MP3', 'invalid_value'],
      ['f:mp3/f:opus', 'duplicate_key'],
    ],
  },
  {
    key: 'br',
    kind: 'variant',
    title: 'Bitrate',
    values: `an integer from 1 to ${MAX_BITRATE_KBPS} (kbit/s)`,
    default: "the encoder's own",
    canonical: '`br:N`, no leading zeros',
    doc: `Constant or average bitrate. Lossy formats only; excludes \`q\`.`,
    examples: ['f:opus/br:96', 'br:0128'],
    refused: [
      ['br:0', 'out_of_range'],
      ['br:96.5', 'invalid_integer'],
      ['f:flac/br:320', 'requires_lossy_format'],
      ['br:128/q:2', 'mutually_exclusive'],
      ['f:peaks/br:96', 'unsupported_for_peaks'],
    ],
  },
  {
    key: 'q',
    kind: 'variant',
    title: 'Quality',
    values: `${decimal}, on the codec's own scale: ${qualityScales}`,
    default: "the encoder's own",
    canonical: '`q:N`, minimal number',
    doc: 'Variable-bitrate quality (for flac and opus, the compression level). `f:wav` has no scale. Excludes `br`.',
    examples: ['q:2', 'f:ogg/q:-1', 'f:flac/q:8', 'f:aac/q:1.50'],
    refused: [
      ['q:10', 'out_of_range_for_format'],
      ['f:wav/q:5', 'unsupported_for_format'],
      ['q:high', 'invalid_number'],
      ['q:5.0000', 'excessive_precision'],
    ],
  },
  {
    key: 'sr',
    kind: 'variant',
    title: 'Sample rate',
    values: `an integer from 1 to ${MAX_SAMPLE_RATE_HZ} (Hz); at most ${LOSSY_SAMPLE_RATE_CAP_HZ} for a lossy format`,
    default: `the source's rate (a lossy format caps it at ${LOSSY_SAMPLE_RATE_CAP_HZ})`,
    canonical: '`sr:N`',
    doc: 'Resamples.',
    examples: ['sr:44100', 'f:flac/sr:96000'],
    refused: [
      ['sr:96000', 'sample_rate_above_lossy_cap'],
      ['sr:44.1', 'invalid_integer'],
      ['f:peaks/sr:8000', 'unsupported_for_peaks'],
    ],
  },
  {
    key: 'ch',
    kind: 'variant',
    title: 'Channels',
    values: '`1` or `2`',
    default: `the source's (more channels than the encoder takes are downmixed to its most); \`${DEFAULT_PEAK_CHANNELS}\` under \`f:peaks\``,
    canonical: '`ch:N`; always present under `f:peaks`',
    doc: 'Downmixes to mono or stereo. Under `f:peaks`, `ch:2` gives one waveform per channel.',
    examples: ['ch:1', 'f:peaks/ch:2'],
    refused: [
      ['ch:3', 'invalid_value'],
      ['ch:01', 'invalid_value'],
    ],
  },
  {
    key: 'bd',
    kind: 'variant',
    title: 'Bit depth',
    values: `one of ${list(BIT_DEPTHS)}`,
    default: "the source's depth",
    canonical: '`bd:DEPTH`',
    doc: `Lossless formats only; \`${FLOAT_BIT_DEPTH}\` (float) is \`f:wav\` only, as flac encodes integers.`,
    examples: ['f:flac/bd:24', 'f:wav/bd:32f'],
    refused: [
      ['bd:16', 'requires_lossless_format'],
      ['f:flac/bd:32f', 'unsupported_for_format'],
      ['f:wav/bd:8', 'invalid_value'],
    ],
  },
  {
    key: 't',
    kind: 'variant',
    title: 'Trim',
    values: `\`START[:DURATION]\`, ${seconds}; the duration above 0`,
    default: 'the whole source',
    canonical: '`t:START` or `t:START:DURATION`, minimal numbers',
    doc: '`t:30` runs from 30 s to the end; `t:30:15` is 15 s from 30 s.',
    examples: ['t:30', 't:12.5:30', 't:012.500:30.0'],
    refused: [
      ['t:0:0', 'out_of_range'],
      ['t:1:2:3', 'invalid_value'],
      ['t:1.2345', 'excessive_precision'],
    ],
  },
  {
    key: 'fade',
    kind: 'variant',
    title: 'Fade',
    values: `\`IN[:OUT]\`, ${seconds}`,
    default: 'no fade',
    canonical: '`fade:IN:OUT` (an omitted out-fade is 0)',
    doc: "Fades in and out inside the trimmed region. A fade-out needs a trim with a duration (it counts back from the trim's end), and in + out (in whole milliseconds) must fit in it.",
    examples: ['fade:2', 't:0:30/fade:0.5:1'],
    refused: [
      ['fade:0:2', 'requires_bounded_trim'],
      ['t:0:1/fade:0.5:0.501', 'fade_exceeds_duration'],
    ],
  },
  {
    key: 'gain',
    kind: 'variant',
    title: 'Gain',
    values: `${decimal}, from -${MAX_GAIN_DB} to ${MAX_GAIN_DB} (dB)`,
    default: 'no gain stage',
    canonical: '`gain:N`, minimal number (`-0` is `0`)',
    doc: 'A static gain.',
    examples: ['gain:-3.5', 'gain:6.00', 'gain:-0'],
    refused: [
      ['gain:101', 'out_of_range'],
      ['gain:1e3', 'invalid_number'],
    ],
  },
  {
    key: 'norm',
    kind: 'variant',
    title: 'Loudness normalisation',
    values: `\`ebu[:I[:TP[:LRA]]]\`: I (LUFS) ${range(NORM_I)}, TP (dBTP) ${range(NORM_TP)}, LRA (LU) ${range(NORM_LRA)}`,
    default: `no normalisation; an omitted target is ${DEFAULT_NORM.i}, ${DEFAULT_NORM.tp}, ${DEFAULT_NORM.lra}`,
    canonical: '`norm:ebu:I:TP:LRA`, all three targets materialised',
    doc: "EBU R128 loudness normalisation with ffmpeg's single-pass `loudnorm` (good enough for previews; two-pass is not offered).",
    examples: ['norm:ebu', 'norm:ebu:-14:-1'],
    refused: [
      ['norm:ebu:-99', 'out_of_range'],
      ['norm:itu', 'invalid_value'],
    ],
  },
  {
    key: 'enhance',
    kind: 'variant',
    title: 'Enhancement',
    values: `one of ${list(ENHANCE_PRESETS)}`,
    default: 'none',
    canonical: '`enhance:NAME`',
    doc: 'A curated filter chain, pinned: a name means one chain forever, and a better chain gets a new name (a changed chain under an old name would serve two renders under one cache key). `voice`, for speech: an 80 Hz high-pass, denoise, de-ess, 3:1 compression and a limiter.',
    examples: ['enhance:voice'],
    refused: [['enhance:music', 'invalid_value']],
  },
  {
    key: 'pts',
    kind: 'variant',
    title: 'Peak count',
    values: `an integer from 1 to ${MAX_PEAK_COUNT}`,
    default: `\`${DEFAULT_PEAK_COUNT}\` under \`f:peaks\``,
    canonical: '`pts:N`; always present under `f:peaks`',
    doc: 'How many min/max pairs a waveform has. `f:peaks` only.',
    examples: ['f:peaks/pts:400'],
    refused: [
      ['pts:400', 'requires_peaks_format'],
      ['f:peaks/pts:100001', 'out_of_range'],
    ],
  },
  {
    key: 'pk_fmt',
    kind: 'variant',
    title: 'Peaks format',
    values: `one of ${list(PEAKS_FORMATS)}`,
    default: `\`${DEFAULT_PEAKS_FORMAT}\` under \`f:peaks\``,
    canonical: '`pk_fmt:FORMAT`; always present under `f:peaks`',
    doc: 'JSON (audiowaveform-like) or a compact binary. `f:peaks` only.',
    examples: ['f:peaks/pk_fmt:dat'],
    refused: [['pk_fmt:dat', 'requires_peaks_format']],
  },
  {
    key: 'dl',
    kind: 'variant',
    title: 'Download name',
    values:
      'any non-empty text without control characters, as the URL carries it (percent-encoded)',
    default: 'no `Content-Disposition`',
    canonical: '`dl:NAME`, still percent-encoded, byte for byte',
    doc: 'Answers with `Content-Disposition: attachment` and this file name (decoded for the header).',
    examples: ['dl:my%20song.mp3'],
    refused: [
      ['dl:', 'invalid_value'],
      ['dl:a\u0007b', 'control_character'],
    ],
  },
  {
    key: 'cb',
    kind: 'variant',
    title: 'Cache buster',
    values: 'any non-empty text without control characters, as the URL carries it',
    default: 'none',
    canonical: '`cb:TEXT`, byte for byte',
    doc: 'Changes nothing in the bytes but the cache key: a new value is a new variant.',
    examples: ['cb:v2'],
    refused: [['cb:', 'invalid_value']],
  },
  {
    key: 'exp',
    kind: 'request',
    title: 'Expiry',
    values: `an integer from 1 to ${MAX_EXP_S} (Unix seconds)`,
    default: 'never expires',
    canonical: 'never: URLs that differ only in `exp` share a cache key and one render',
    doc: 'A request option: signed (it is part of the path) but not part of the variant. After that second the URL answers 410 before any storage is touched; until then `Cache-Control` max-age is clamped to the time left. `/info` takes no `exp`.',
    examples: ['f:opus/exp:1900000000'],
    refused: [
      ['exp:0', 'out_of_range'],
      ['exp:253402300800', 'out_of_range'],
    ],
  },
  {
    key: PRESET_KEY,
    kind: 'preset',
    title: 'Presets',
    values: '`NAME[:NAME…]`: names of `AP_PRESETS`, each at most once',
    default: 'none',
    canonical: 'never: the expansion is what the canonical string holds',
    doc: 'Expands each named preset (`AP_PRESETS`) into its options, in the order named: a later preset overrides an earlier one for a key both set, and an option the URL spells itself overrides every preset, wherever either stands. `pr` may appear once. See [Presets](#presets).',
    examples: [
      'pr:preview',
      'pr:preview/t:60:30',
      'br:96/pr:preview',
      'pr:preview:voice',
      'pr:preview:hq',
      'pr:wave/pk_fmt:dat',
    ],
    refused: [
      ['pr:nope', 'unknown_preset'],
      ['pr:preview:preview', 'duplicate_preset'],
      ['pr:preview/pr:voice', 'duplicate_key'],
      ['pr:preview/q:2', 'mutually_exclusive'],
    ],
  },
]);
