/**
 * The row: one environment variable, written once. A row carries what the documentation says
 * about its variable (section, default, rule, what it does) and the reader that turns the
 * variable's value into one field of the draft config. The table of rows (`table.ts`) is both
 * the published variable list and what `loadConfig` folds over.
 *
 * ## Contract
 * - **A reader sees its own value only** (`Reading.raw`, already trimmed, empty meaning unset).
 *   The fold reads the environment; a reader never does, so the variables read are exactly the
 *   table's names.
 * - **A reader may depend on an earlier row's field** (`Reading.get`), for a derived default:
 *   `AP_MAX_PROBE_CONCURRENCY` defaults to a multiple of the *effective* `AP_MAX_CONCURRENCY`.
 *   Asking for a field the table has not produced yet is a programmer error and throws.
 * - **A reader never throws for a bad value.** It records a problem (`Reading.fail`, which names
 *   its variable) and returns a fallback, so every problem is found in one load.
 * - **Each field has exactly one row** (`table.ts` checks it when it builds the table, and the
 *   compiler checks that no field is left without one).
 *
 * Not here: rules between several variables (`cross.ts`, `rows/s3.ts`), which run after the fold.
 */
import * as nodeFs from 'node:fs';
import type { S3Addressing } from './defaults.js';
import type { Config, S3Endpoint } from './types.js';

/** The documentation sections, in the order `docs/configuration.md` lists them. */
export const SECTIONS = {
  listen: 'Listeners and signing',
  presets: 'Presets',
  sources: 'Sources',
  store: 'Variant store and serving',
  limits: 'Limits and timeouts',
  observability: 'Observability and CORS',
  s3: 'S3 connection',
  executables: 'Executables',
  cluster: 'Cluster',
  aws: 'AWS credentials',
} as const;

/** What the documentation says about one variable; the published half of a row. */
export interface ConfigVariable {
  readonly name: string;
  /** The documentation section the variable is listed under. */
  readonly section: string;
  /** What applies when it is unset (prose; several defaults are derived). */
  readonly default: string;
  /** What a valid value is. */
  readonly rule: string;
  /** One line on what it does. */
  readonly doc: string;
}

/**
 * What the rows yield, one field per row: the `Config` fields, except the two S3 profiles, which
 * are assembled after the fold from the pieces below (they need the `AWS_*` identity, listed
 * last), the signing pairs, which are paired from `AP_KEY`'s and `AP_SALT`'s lists after the
 * fold, and `AP_PORT`'s own value, which the effective `port` is derived from.
 */
export interface Fields extends Omit<Config, 's3' | 'variantS3' | 'key' | 'salt' | 'rotatedKeys'> {
  /** `AP_KEY`'s entries, in order; `Config.key` is the first, the rest pair into `rotatedKeys`. */
  readonly keys: readonly Buffer[] | undefined;
  /** `AP_SALT`'s entries, paired with `keys` by position. */
  readonly salts: readonly Buffer[] | undefined;
  /** `AP_PORT` when set (its fallback when invalid); `port` is the effective listener port. */
  readonly apPort: number | undefined;
  readonly s3Endpoint: S3Endpoint | undefined;
  readonly s3Addressing: S3Addressing;
  readonly s3CaBundle: string | undefined;
  /** The variant store's own endpoint and bundle; the profile falls back to the source's. */
  readonly variantS3Endpoint: S3Endpoint | undefined;
  readonly variantS3Addressing: S3Addressing;
  readonly variantS3CaBundle: string | undefined;
  readonly variantS3AccessKeyId: string | undefined;
  readonly variantS3SecretAccessKey: string | undefined;
  readonly variantS3Region: string | undefined;
  readonly variantS3SessionToken: string | undefined;
  readonly awsAccessKeyId: string | undefined;
  readonly awsSecretAccessKey: string | undefined;
  readonly awsRegion: string | undefined;
  readonly awsDefaultRegion: string | undefined;
  readonly awsSessionToken: string | undefined;
}
export type FieldName = keyof Fields;

/** The filesystem operations config performs; injectable so tests can refuse a write as root. */
export interface ConfigFs {
  /** Follows symlinks; throws an errno error (`code`) when the path cannot be stat'ed. */
  stat(path: string): { isDirectory(): boolean; isFile(): boolean };
  /** Throws when `mode` (an `fs.constants` mask) is not granted. */
  access(path: string, mode: number): void;
  /** `mkdir -p`. */
  mkdirp(path: string): void;
  /** Creates the file exclusively (fails if it exists). */
  createExclusive(path: string, data: string): void;
  unlink(path: string): void;
  readFile(path: string): Buffer;
}

/** The real filesystem. */
export const nodeConfigFs: ConfigFs = {
  stat: (p) => nodeFs.statSync(p),
  access: (p, mode) => nodeFs.accessSync(p, mode),
  mkdirp: (p) => {
    nodeFs.mkdirSync(p, { recursive: true });
  },
  createExclusive: (p, data) => nodeFs.writeFileSync(p, data, { flag: 'wx' }),
  unlink: (p) => nodeFs.unlinkSync(p),
  readFile: (p) => nodeFs.readFileSync(p),
};

/** What a reader is handed: its variable, its value, the host, and the load's ledger. */
export interface Reading {
  /** The row's variable, for messages. */
  readonly name: string;
  /** The value, trimmed; `undefined` when unset, empty or all whitespace. */
  readonly raw: string | undefined;
  readonly fs: ConfigFs;
  /** The default render slot count (`LoadConfigOptions.cpuCount`). */
  readonly cpuCount: number;
  /** Records a problem against this row's variable; returns `undefined` for `return v.fail(…)`. */
  fail(message: string): undefined;
  /** Whether the variables behind these fields have no problem so far. */
  ok(...fields: readonly FieldName[]): boolean;
  /** An earlier row's field; throws when the table has not produced it yet. */
  get<K extends FieldName>(field: K): Fields[K];
}

/** One variable: its documentation, the field it yields, and the reader that yields it. */
export interface ConfigRow<K extends FieldName = FieldName, N extends string = string>
  extends ConfigVariable {
  readonly name: N;
  readonly field: K;
  readonly read: (v: Reading) => Fields[K];
}

/** Declares a row (frozen), keeping its name and field as literal types. */
export function row<const N extends string, K extends FieldName>(
  spec: ConfigRow<K, N>,
): ConfigRow<K, N> {
  return Object.freeze(spec);
}
