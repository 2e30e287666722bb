/**
 * Loading: `loadConfig` folds the environment over the table, assembles the S3 profiles,
 * checks the rules across variables, and returns one frozen `Config` or throws one
 * `ConfigError` listing every problem. Also the command-line boot path (`configOrExit`) and the
 * boot warnings (`configWarnings`).
 *
 * ## Invariants
 * - **Valid or no boot.** Every value is checked; `ConfigError` (`ERR_CONFIG`) carries every
 *   problem found, each naming its variable and the rule, so one restart fixes them all.
 * - **A loaded config never changes**: it is deeply frozen (the key and salt Buffers aside,
 *   which JavaScript cannot freeze; they are private copies nobody else holds).
 * - **The library never exits the process**; only `configOrExit`, for a command-line host.
 * - **The filesystem is touched where a value is a filesystem claim**, the network never.
 */
import { availableParallelism } from 'node:os';
import { checkCrossRules } from './cross.js';
import { ConfigError, type Env, Ledger } from './fold.js';
import { freezeDeep } from './provider.js';
import { type ConfigFs, nodeConfigFs } from './row.js';
import { signingKeys } from './rows/listeners.js';
import { s3Profiles } from './rows/s3.js';
import { CONFIG_ROWS, KNOWN_NAMES, variableOf } from './table.js';
import type { Config } from './types.js';

export interface LoadConfigOptions {
  /** Default for `AP_MAX_CONCURRENCY`. @default os.availableParallelism() */
  readonly cpuCount?: number;
  /** @default nodeConfigFs */
  readonly fs?: ConfigFs;
}

/**
 * Reads and validates the environment. Throws one `ConfigError` listing every problem.
 *
 * Touches the filesystem where a value is a filesystem claim (`AP_LOCAL_ROOT`, a `file://`
 * store, CA bundles, executables) and never the network. Reads every variable in
 * `CONFIG_VARIABLES` on every call, whatever the others hold, and no other.
 */
export function loadConfig(env: Env, opts: LoadConfigOptions = {}): Config {
  const cpuCount = opts.cpuCount ?? availableParallelism();
  if (!Number.isSafeInteger(cpuCount) || cpuCount < 1) {
    throw new RangeError(`loadConfig: opts.cpuCount must be a positive integer, got ${cpuCount}`);
  }
  const ld = new Ledger(CONFIG_ROWS);
  const fields = ld.fold(env, { fs: opts.fs ?? nodeConfigFs, cpuCount });
  const { s3, variantS3 } = s3Profiles(fields, ld);
  checkCrossRules(fields, variantS3, ld);
  if (ld.problems.length > 0) throw new ConfigError(ld.problems);

  // The pieces the S3 profiles were assembled from are not part of the Config.
  const {
    apPort: _apPort,
    keys: _keys,
    salts: _salts,
    s3Endpoint: _s3Endpoint,
    s3Addressing: _s3Addressing,
    s3CaBundle: _s3CaBundle,
    variantS3Endpoint: _variantS3Endpoint,
    variantS3Addressing: _variantS3Addressing,
    variantS3CaBundle: _variantS3CaBundle,
    variantS3AccessKeyId: _variantS3AccessKeyId,
    variantS3SecretAccessKey: _variantS3SecretAccessKey,
    variantS3Region: _variantS3Region,
    variantS3SessionToken: _variantS3SessionToken,
    awsAccessKeyId: _awsAccessKeyId,
    awsSecretAccessKey: _awsSecretAccessKey,
    awsRegion: _awsRegion,
    awsDefaultRegion: _awsDefaultRegion,
    awsSessionToken: _awsSessionToken,
    ...own
  } = fields;
  return freezeDeep(exactConfig({ ...own, ...signingKeys(fields), s3, variantS3 }));
}

/** `value` as a `Config`; the compiler refuses one that still carries a piece `Config` lacks. */
function exactConfig<T extends Config>(
  value: T & { readonly [K in Exclude<keyof T, keyof Config>]: never },
): Config {
  return value;
}

export interface ConfigOrExitOptions extends LoadConfigOptions {
  /** @default process.exit */
  readonly exit?: (code: number) => never;
  /** @default process.stderr */
  readonly stderr?: { write(chunk: string): unknown };
}

/** Exit code for an unusable configuration (distinct from 1, a crash). */
export const CONFIG_EXIT_CODE = 2;

/**
 * `loadConfig`, or print every problem to stderr and exit with code 2. For a command-line host's
 * boot path only (the CLI is its one caller inside the package; the library never exits the
 * process, so an embedding app calls `loadConfig` and handles `ConfigError`). Any other
 * exception is a bug and propagates.
 */
export function configOrExit(env: Env, opts: ConfigOrExitOptions = {}): Config {
  try {
    return loadConfig(env, opts);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    (opts.stderr ?? process.stderr).write(`audio-proxy: ${err.message}\n`);
    return (opts.exit ?? process.exit)(CONFIG_EXIT_CODE);
  }
}

/**
 * Lines the boot should log as warnings: insecure signatures, missing signing material, and
 * `AP_*` names in the environment that nothing reads (usually typos). Enumerates `env`.
 */
export function configWarnings(config: Config, env: Env): string[] {
  const out: string[] = [];
  if (config.allowInsecure) {
    out.push(
      "AP_ALLOW_INSECURE is on: the literal signature 'insecure' is accepted; never run this in production",
    );
  }
  if (config.key === undefined || config.salt === undefined) {
    const missing = [
      ...(config.key === undefined ? [variableOf('keys')] : []),
      ...(config.salt === undefined ? [variableOf('salts')] : []),
    ];
    out.push(`${missing.join(' and ')} unset: every signed request will be refused with a 401`);
  }
  const unknown = unrecognisedVariables(env);
  if (unknown.length > 0) {
    out.push(`unrecognised variables ignored (check the spelling): ${unknown.join(', ')}`);
  }
  return out;
}

/** `AP_*` names present in `env` that are not in `CONFIG_VARIABLES`, sorted. */
export function unrecognisedVariables(env: Env): string[] {
  return Object.keys(env)
    .filter((k) => k.startsWith('AP_') && !KNOWN_NAMES.has(k))
    .sort();
}
