/**
 * What the running ffmpeg can do, read once at boot, and what each option needs of it.
 *
 * `readCapabilities` asks the binary for its `-filters`, `-encoders`, `-decoders` and `-formats`;
 * `EncoderCapabilities` answers, per request, whether the options need a part this ffmpeg lacks,
 * and which option asked for it (`refusal`: the request path's 501 `unsupported_option`, before
 * any probe or slot), whether it can read a source ffprobe described (`canRead`: the probe
 * gate's 415), and what is missing option by option (`missing`: `/health` and the boot log).
 *
 * ## Invariants
 * - **What an option needs is read off the argv builder, never listed twice.** The requirements
 *   of a render are the encoders (`-c:a`), muxers (`-f`) and filters (`-af`) of the argv
 *   `argv.ts` builds for it over `SAMPLE_SOURCES`, which span every branch that depends on the
 *   source (no probe; stereo 16-bit; 12 channels, 24-bit, at a rate flac cannot code). A preset
 *   or format added there is checked here with no edit.
 * - **Unknown is permissive.** A listing that fails, times out, overflows `MAX_LISTING_BYTES` or
 *   parses to no entry leaves the capabilities unknown: nothing is refused on their account, and
 *   `/health` and the boot log say they were not checked.
 * - **Read once per path**: four children in parallel, each bounded by `CAPABILITY_TIMEOUT_MS`
 *   and `MAX_LISTING_BYTES`, argv only (no shell); the promise is cached, a failure is not.
 * - **A refusal names one option and one component**, in the URL's spelling (`enhance:voice`,
 *   `f:opus`): the first option whose removal drops the missing part, else the format.
 * - **The request path pays nothing when nothing is missing**: `refusal` answers at once.
 *
 * ## Races
 * - *The binary is replaced after boot*: the listing describes the one read at boot; a render
 *   that then fails is a 500 like any other failure of a changed binary.
 *
 * ## Events
 * None. The reading is data (`CapabilityReading`), never a throw.
 */
import { execFile } from 'node:child_process';
import {
  type BitDepth,
  DEFAULT_NORM,
  ENHANCE_PRESETS,
  FORMATS,
  type RenderOptions,
  renderNumber,
} from '../core/variant.js';
import {
  ARGV_FLAGS,
  type ArgvInput,
  buildPeaksDecodeArgv,
  buildRenderArgv,
  FD_INPUT_PATH,
} from './argv.js';

/** How long one listing may take: the 68 MB static build lists in well under a second. */
export const CAPABILITY_TIMEOUT_MS = 10_000;
/** The largest listing read: ffmpeg 5.1's longest (`-filters`) is about 40 KB. */
export const MAX_LISTING_BYTES = 1_048_576;
/** The listings asked for, one child each (ffmpeg exits after the first such flag). */
export const CAPABILITY_LISTINGS = ['-filters', '-encoders', '-decoders', '-formats'] as const;

export type ComponentKind = 'filter' | 'encoder' | 'muxer' | 'decoder' | 'demuxer';

/** One part of ffmpeg a render needs: `filter deesser`, `encoder libopus`, `muxer adts`. */
export interface Component {
  readonly kind: ComponentKind;
  readonly name: string;
}

/** What one ffmpeg binary listed about itself. */
export interface CapabilityListing {
  /** From the banner: `5.1.9-0+deb12u1`, `N-47683-g0e8eb07980-static`. */
  readonly version?: string;
  readonly filters: ReadonlySet<string>;
  readonly encoders: ReadonlySet<string>;
  readonly muxers: ReadonlySet<string>;
  /** Codecs some decoder takes: a decoder's `(codec X)`, else its own name (`dca` decodes `dts`). */
  readonly decoders: ReadonlySet<string>;
  /** Every name of every demuxer: `mov,mp4,m4a,3gp,3g2,mj2` is six. */
  readonly demuxers: ReadonlySet<string>;
}

export type CapabilityReading =
  | { readonly ok: true; readonly listing: CapabilityListing }
  | { readonly ok: false; readonly reason: string };

/** A render this ffmpeg cannot do: the option at fault, the part it lacks, and the words for it. */
export interface Refusal {
  readonly option: string;
  readonly component: Component;
  readonly message: string;
}

/** Entries of `-filters`: ` ..C acompressor  A->A  Audio compressor.` (flags vary by version). */
const FILTER_LINE = /^\s*(?:[A-Z.|]{1,4}\s+)?([A-Za-z0-9_]+)\s+[AVN|]*->[AVN|]*\s/;
/** Entries of `-encoders`/`-decoders`: ` A....D dca  DCA (DTS Coherent Acoustics) (codec dts)`. */
const CODEC_LINE = /^\s*[A-Z.]{6}\s+([A-Za-z0-9_-]+)\s+(.*)$/;
const CODEC_OF = /\(codec ([A-Za-z0-9_]+)\)\s*$/;
/** Entries of `-formats`: ` D  aac`, `  E adts`, ` DE wav` (6.1 and later add a device column). */
const FORMAT_LINE = /^ ([D ])([E ])[d ]?\s*([A-Za-z0-9_,]+)\s/;
const VERSION_LINE = /^\s*ffmpeg version (\S+)/m;

/** The filter names of a `-filters` listing. */
export function parseFilters(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = FILTER_LINE.exec(line);
    if (m) names.add(m[1]!);
  }
  return names;
}

/** The names of a `-encoders`/`-decoders` listing, and the codec each one codes. */
export function parseCodecs(text: string): { names: Set<string>; codecs: Set<string> } {
  const names = new Set<string>();
  const codecs = new Set<string>();
  for (const line of text.split('\n')) {
    const m = CODEC_LINE.exec(line);
    if (!m || m[2]!.startsWith('=')) continue; // a legend line: ` A..... = Audio`
    names.add(m[1]!);
    codecs.add(CODEC_OF.exec(m[2]!)?.[1] ?? m[1]!);
  }
  return { names, codecs };
}

/** The demuxer names (each name of a comma list) and muxer names of a `-formats` listing. */
export function parseFormats(text: string): { demuxers: Set<string>; muxers: Set<string> } {
  const demuxers = new Set<string>();
  const muxers = new Set<string>();
  for (const line of text.split('\n')) {
    const m = FORMAT_LINE.exec(line);
    if (!m) continue;
    const names = m[3]!.split(',').filter(Boolean);
    if (m[1] === 'D') for (const n of names) demuxers.add(n);
    if (m[2] === 'E') for (const n of names) muxers.add(n);
  }
  return { demuxers, muxers };
}

/** The version in ffmpeg's banner (stderr), if it printed one. */
export function parseVersion(banner: string): string | undefined {
  return VERSION_LINE.exec(banner)?.[1];
}

const readings = new Map<string, Promise<CapabilityReading>>();

/**
 * Lists what the ffmpeg at `path` can do: spawned once per path (the promise is cached, a
 * failure is not). Never rejects: a failure is `{ ok: false, reason }`.
 */
export function readCapabilities(
  path: string,
  options: { readonly timeoutMs?: number } = {},
): Promise<CapabilityReading> {
  let pending = readings.get(path);
  if (pending === undefined) {
    pending = readAll(path, options.timeoutMs ?? CAPABILITY_TIMEOUT_MS);
    readings.set(path, pending);
    void pending.then((r) => {
      if (!r.ok) readings.delete(path); // a later boot may find the binary fixed
    });
  }
  return pending;
}

async function readAll(path: string, timeoutMs: number): Promise<CapabilityReading> {
  try {
    const [filters, encoders, decoders, formats] = await Promise.all(
      CAPABILITY_LISTINGS.map((flag) => list(path, flag, timeoutMs)),
    );
    const f = parseFilters(filters!.stdout);
    const e = parseCodecs(encoders!.stdout);
    const d = parseCodecs(decoders!.stdout);
    const x = parseFormats(formats!.stdout);
    const empty = [
      ['-filters', f.size],
      ['-encoders', e.names.size],
      ['-decoders', d.names.size],
      ['-formats', x.demuxers.size + x.muxers.size],
    ].find(([, size]) => size === 0);
    if (empty) return { ok: false, reason: `${path} ${empty[0]} listed nothing` };
    const version = parseVersion(filters!.stderr);
    return {
      ok: true,
      listing: {
        ...(version === undefined ? {} : { version }),
        filters: f,
        encoders: e.names,
        muxers: x.muxers,
        decoders: d.codecs,
        demuxers: x.demuxers,
      },
    };
  } catch (error) {
    return { ok: false, reason: (error as Error).message.split('\n', 1)[0]! };
  }
}

function list(
  path: string,
  flag: string,
  timeoutMs: number,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      path,
      [flag],
      { timeout: timeoutMs, maxBuffer: MAX_LISTING_BYTES, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${path} ${flag}: ${error.message}`, { cause: error }));
        else resolve({ stdout, stderr });
      },
    );
  });
}

// ---------------------------------------------------------------------------------------------
// What options need

const PROBED = { url: FD_INPUT_PATH, kind: 'local' } as const;
/**
 * Sources spanning every branch of the argv that depends on the probe: none (no probe), plain
 * stereo 16-bit, and a wide 24-bit one at a rate flac cannot code (a fold, a 24-bit PCM, a pin).
 */
const SAMPLE_SOURCES: readonly ArgvInput[] = Object.freeze([
  PROBED,
  { ...PROBED, sampleRate: 44_100, channels: 2, bitDepth: 16 },
  { ...PROBED, sampleRate: 96_001, channels: 12, bitDepth: 24 },
]);
/** The rate peaks decode at when the probe named none (as `services/renderInput.ts`). */
const PEAKS_SAMPLE_RATE_HZ = 44_100;

const key = (c: Component) => `${c.kind} ${c.name}`;

/** The encoders, muxers and filters an argv names. */
export function componentsOf(argv: readonly string[]): Component[] {
  const out: Component[] = [];
  for (let i = 0; i < argv.length; i += 1 + (ARGV_FLAGS[argv[i]!] ?? 0)) {
    const value = argv[i + 1];
    if (value === undefined) break;
    if (argv[i] === '-c:a') out.push({ kind: 'encoder', name: value });
    else if (argv[i] === '-f') out.push({ kind: 'muxer', name: value });
    else if (argv[i] === '-af') {
      for (const filter of value.split(',')) {
        out.push({ kind: 'filter', name: filter.split('=', 1)[0]! });
      }
    }
  }
  return out;
}

/** Every component a render of `options` may need, whatever its source turns out to be. */
export function requiredComponents(options: RenderOptions): Component[] {
  const found = new Map<string, Component>();
  for (const input of SAMPLE_SOURCES) {
    let argv: string[];
    try {
      argv =
        options.format === 'peaks'
          ? buildPeaksDecodeArgv(options, input, {
              sampleRate: input.sampleRate ?? PEAKS_SAMPLE_RATE_HZ,
              channels: options.channels ?? 1,
            })
          : buildRenderArgv(options, input);
    } catch {
      continue; // a combination the grammar refuses; nothing to require
    }
    for (const c of componentsOf(argv)) found.set(key(c), c);
  }
  return [...found.values()];
}

type Field = keyof RenderOptions;

/**
 * The options a refusal may blame, in order, each with the fields whose removal tests it (a trim
 * takes its fade along: a fade-out needs a bounded trim) and its label in the URL's spelling.
 */
const BLAME: ReadonlyArray<readonly [readonly Field[], (o: RenderOptions) => string]> = [
  [['enhance'], (o) => `enhance:${o.enhance}`],
  [['norm'], () => 'norm'],
  [['gainDb'], (o) => `gain:${renderNumber(o.gainDb!)}`],
  [['fade'], () => 'fade'],
  [['trim', 'fade'], () => 't'],
  [['sampleRate'], (o) => `sr:${o.sampleRate}`],
  [['channels'], (o) => `ch:${o.channels}`],
  [['bitDepth'], (o) => `bd:${o.bitDepth}`],
  [['bitrateK'], (o) => `br:${o.bitrateK}`],
  [['quality'], (o) => `q:${renderNumber(o.quality!)}`],
];

const BIT_DEPTHS: readonly BitDepth[] = ['16', '24', '32f'];
const WAV: RenderOptions = { format: 'wav' }; // PCM in wav: what any ffmpeg has
const TRIMMED: RenderOptions = { ...WAV, trim: { start: 0, duration: 10 } };

interface Sample {
  readonly label: string;
  readonly options: RenderOptions;
  /** What `options` adds to: its needs are not the option's. */
  readonly base?: RenderOptions;
}

/**
 * One sample per option value: what `missing()` reports. Formats stand alone; every other option
 * is tried on wav (or the format it applies to), whose own needs are subtracted.
 */
function catalogue(): readonly Sample[] {
  const on = (label: string, extra: Partial<RenderOptions>, base: RenderOptions = WAV): Sample => ({
    label,
    options: { ...base, ...extra },
    base,
  });
  return [
    ...FORMATS.map(
      (format): Sample => ({
        label: `f:${format}`,
        options:
          format === 'peaks' ? { format, channels: 1, pts: 800, peaksFormat: 'json' } : { format },
      }),
    ),
    ...ENHANCE_PRESETS.map((p) => on(`enhance:${p}`, { enhance: p })),
    on('norm', { norm: DEFAULT_NORM }),
    on('gain', { gainDb: 3 }),
    on('sr', { sampleRate: 22_050 }),
    on('fade', { fade: { in: 1, out: 1 } }, TRIMMED),
    on('t', TRIMMED),
    on('ch', { channels: 1 }),
    ...BIT_DEPTHS.map((bd) => on(`bd:${bd}`, { bitDepth: bd })),
    on('br', { bitrateK: 64 }, { format: 'ogg' }),
    on('q', { quality: 2 }, { format: 'mp3' }),
  ];
}

/** What this ffmpeg can do, as the request path, the probe gate and `/health` ask it. */
export class EncoderCapabilities {
  /** The listing, or undefined when it could not be read (then nothing is refused). */
  readonly listing: CapabilityListing | undefined;
  /** Why the listing could not be read. */
  readonly unknownReason: string | undefined;
  readonly #missing: Readonly<Record<string, readonly string[]>>;
  readonly #complete: boolean;

  constructor(reading: CapabilityReading) {
    this.listing = reading.ok ? reading.listing : undefined;
    this.unknownReason = reading.ok ? undefined : reading.reason;
    const missing: Record<string, string[]> = {};
    for (const { label, options, base } of catalogue()) {
      const inBase = new Set(base ? requiredComponents(base).map(key) : []);
      const lacking = requiredComponents(options)
        .filter((c) => !inBase.has(key(c)) && !this.has(c))
        .map(key);
      if (lacking.length > 0) missing[label] = lacking;
    }
    this.#missing = Object.freeze(missing);
    this.#complete = Object.keys(missing).length === 0;
  }

  /** True when the listing was read. */
  get known(): boolean {
    return this.listing !== undefined;
  }

  /** Whether this ffmpeg has `component` (always, when the listing is unknown). */
  has(component: Component): boolean {
    const l = this.listing;
    if (l === undefined) return true;
    const set = {
      filter: l.filters,
      encoder: l.encoders,
      muxer: l.muxers,
      decoder: l.decoders,
      demuxer: l.demuxers,
    }[component.kind];
    return set.has(component.name);
  }

  /** The first part a render of `options` needs and this ffmpeg lacks, blamed on an option. */
  refusal(options: RenderOptions): Refusal | undefined {
    if (this.#complete) return undefined;
    const absent = requiredComponents(options).find((c) => !this.has(c));
    if (absent === undefined) return undefined;
    let option = `f:${options.format}`;
    for (const [fields, label] of BLAME) {
      if (options[fields[0]!] === undefined) continue;
      const without = Object.fromEntries(
        Object.entries(options).filter(([k]) => !fields.includes(k as Field)),
      ) as RenderOptions;
      const still = requiredComponents(without);
      if (!still.some((c) => key(c) === key(absent))) {
        option = label(options);
        break;
      }
    }
    return {
      option,
      component: absent,
      message: `${option} needs the ffmpeg ${absent.kind} "${absent.name}", which this server's ffmpeg does not have`,
    };
  }

  /**
   * Whether this ffmpeg can demux and decode a source as ffprobe described it: its `format_name`
   * (a comma list, any name will do) and its audio codec. Unknown facts pass.
   */
  canRead(source: { readonly demuxer?: string; readonly codec?: string }): boolean {
    const l = this.listing;
    if (l === undefined) return true;
    if (source.codec !== undefined && !l.decoders.has(source.codec)) return false;
    if (source.demuxer === undefined) return true;
    return source.demuxer.split(',').some((name) => l.demuxers.has(name));
  }

  /** Per option (`enhance:voice`), what it needs that this ffmpeg lacks (`filter deesser`). */
  missing(): Readonly<Record<string, readonly string[]>> {
    return this.#missing;
  }

  /** One line for the boot log: what is missing, or that nothing is, or that it is unknown. */
  summary(): string {
    if (!this.known) return `capabilities unknown (${this.unknownReason}): options are not checked`;
    const entries = Object.entries(this.#missing);
    if (entries.length === 0) return 'every option is supported';
    const list = entries.map(([option, parts]) => `${option} (${parts.join(', ')})`).join('; ');
    return `unsupported here, answered 501 unsupported_option: ${list}`;
  }
}
