/**
 * Configuration: the environment, read once at boot into one frozen, typed `Config`, and the
 * single injectable source (`ConfigProvider`) that actors read it from on every operation.
 * This file is the folder's face: everything outside `config/` imports from here.
 *
 * ## How it is built
 * Each environment variable is one row (`row.ts`): its documentation and the reader that turns
 * its value into one field. The rows live by concern in `rows/` (listeners and signing, presets,
 * sources, store, limits, waiting room, telemetry, S3, executables, cluster); `table.ts` lists
 * them in documentation order. `loadConfig` (`load.ts`) folds over the table (`fold.ts`),
 * assembles the S3 profiles and the signing pairs, checks the rules across variables
 * (`cross.ts`) and freezes the result; the
 * operator documentation is generated from the same table (`docs.ts`). A variable's name is
 * written once, in its row.
 *
 * ## Invariants
 * - **The published list is the read list.** `CONFIG_VARIABLES` names every variable
 *   `loadConfig` reads and nothing else; only the fold reads the environment, one row at a time.
 * - **Valid or no boot.** Every value is checked; `ConfigError` (`ERR_CONFIG`) carries every
 *   problem found, each naming its variable and the rule, so one restart fixes them all.
 * - **Unset means default.** Values are trimmed; empty or all-whitespace is the same as absent.
 * - **No secret is echoed.** `AP_KEY`, `AP_SALT`, AWS secrets and URL userinfo never appear in a
 *   message, so a boot failure cannot put a credential in a log.
 * - **A loaded config never changes.** Everything is frozen except the key and salt Buffers
 *   (`key`, `salt`, `rotatedKeys`), which JavaScript cannot freeze; they are private copies
 *   nobody else holds.
 * - **Filesystem claims are proved, not assumed.** Directories are stat'ed, a `file://` store is
 *   written to, a CA bundle is read, an executable is `access(X_OK)`-checked.
 *
 * ## Events
 * | Event | Fields | When |
 * |---|---|---|
 * | (none) | | Config publishes nothing; failure is one thrown `ConfigError` before any actor starts |
 *
 * Not here: the live PUT+DELETE probe of an `s3://` store (the store module owns the S3
 * client); the boot log lines (`configWarnings()` supplies their text).
 */
export { CONFIG_CROSS_RULES } from './cross.js';
export {
  BUCKET_NAME_MAX_CHARS,
  BUCKET_NAME_MIN_CHARS,
  DEFAULT_BACKLOG_BUDGET_BYTES,
  DEFAULT_BIND,
  DEFAULT_CLUSTER_LEASE_MS,
  DEFAULT_FFMPEG_NICE,
  DEFAULT_HIT_CACHE_BYTES,
  DEFAULT_MAX_DURATION_S,
  DEFAULT_MAX_PROBES_PER_WORKER_POOL,
  DEFAULT_MAX_RENDERS_PER_WORKER_POOL,
  DEFAULT_MAX_SRC_BYTES,
  DEFAULT_METRICS_BIND,
  DEFAULT_METRICS_PORT,
  DEFAULT_PORT,
  DEFAULT_PRESIGN_TTL_S,
  DEFAULT_PROBE_TIMEOUT_S,
  DEFAULT_QUEUE_SIZE,
  DEFAULT_WAITING_ROOM_HEARTBEAT_S,
  DEFAULT_WAITING_ROOM_MAX_LENGTH,
  DEFAULT_WAITING_ROOM_RESERVATION_S,
  DEFAULT_WAITING_ROOM_SLOT_SHARE,
  FALSY_WORDS,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
  MAX_CLUSTER_LEASE_MS,
  MAX_CLUSTER_NAME_CHARS,
  MAX_NICE,
  MAX_PORT,
  MAX_PRESET_NAME_CHARS,
  MAX_PRESIGN_TTL_S,
  MAX_TIMEOUT_S,
  MIN_CLUSTER_LEASE_MS,
  MIN_KEY_BYTES,
  MIN_VARIANT_STORE_MAX_BYTES,
  PROBE_CONCURRENCY_FACTOR,
  S3_ADDRESSING_STYLES,
  type S3Addressing,
  SERVE_MODES,
  type ServeMode,
  TRUTHY_WORDS,
} from './defaults.js';
export { CONFIG_GENERAL_RULES, markdownTable, renderConfigDocs } from './docs.js';
export { ConfigError, type ConfigProblem } from './fold.js';
export {
  CONFIG_EXIT_CODE,
  type ConfigOrExitOptions,
  configOrExit,
  configWarnings,
  type LoadConfigOptions,
  loadConfig,
  unrecognisedVariables,
} from './load.js';
export {
  type ConfigProvider,
  type MutableConfigProvider,
  mutableConfig,
  staticConfig,
} from './provider.js';
export { type ConfigFs, type ConfigVariable, nodeConfigFs } from './row.js';
export { defaultReadyQueueThreshold } from './rows/limits.js';
export { CONFIG_VARIABLES, type ConfigVariableName, variableOf } from './table.js';
export type {
  Config,
  PresetDefinition,
  S3Credentials,
  S3Endpoint,
  S3Profile,
  SigningPair,
  VariantStoreConfig,
} from './types.js';
