/**
 * The providers: the one injectable source actors read the configuration from, once per
 * operation. Production uses a fixed snapshot (`staticConfig`); tests use one whose limits they
 * can change between operations (`mutableConfig`).
 *
 * ## Invariants
 * - **A snapshot never changes**: `get()` returns a deeply frozen `Config`, and `set()` makes a
 *   new one instead of editing the old.
 * - **`set()` checks each field's own type** (positive or non-negative integer) and throws
 *   `TypeError`/`RangeError` at the boundary; the rules across variables are not applied, so a
 *   test can lower `queueSize` without also touching `readyQueueThreshold`.
 *
 * ## Races
 * - **A limit changed mid-operation (tests).** `provider.get()` returns a whole frozen snapshot;
 *   an operation that reads once sees one consistent config, never half of a `set()`.
 */
import type { Config } from './types.js';

/** Freezes `value` and everything it holds, except typed arrays (Buffers cannot be frozen). */
export function freezeDeep<T>(value: T): T {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return value;
  if (Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) freezeDeep(v);
  return Object.freeze(value);
}

/** The one injectable config source. Actors call `get()` once per operation. */
export interface ConfigProvider {
  get(): Config;
}

/** A provider for a fixed config (production). */
export function staticConfig(config: Config): ConfigProvider {
  const frozen = freezeDeep(config);
  return { get: () => frozen };
}

/** A provider whose limits tests can change between operations. */
export interface MutableConfigProvider extends ConfigProvider {
  /** Replaces the named fields and returns the new snapshot; earlier snapshots are untouched. */
  set(partial: Partial<Config>): Config;
}

const POSITIVE_FIELDS = [
  'port',
  'maxConcurrency',
  'maxProbeConcurrency',
  'maxSrcBytes',
  'maxVariantBytes',
  'renderTimeoutS',
  'probeTimeoutS',
  'maxDurationS',
  'presignTtlS',
  'metricsPort',
] as const;
const NON_NEGATIVE_FIELDS = ['queueSize', 'readyQueueThreshold', 'prefetchHlsSegments'] as const;

/**
 * A provider for tests. `set()` checks each field's own type (positive or non-negative integer)
 * and throws `TypeError`/`RangeError`; cross-field rules are not applied, so a test can lower
 * `queueSize` without also touching `readyQueueThreshold`.
 */
export function mutableConfig(config: Config): MutableConfigProvider {
  let current = freezeDeep({ ...config });
  return {
    get: () => current,
    set(partial) {
      for (const field of Object.keys(partial)) {
        if (!(field in current)) throw new TypeError(`mutableConfig.set: unknown field "${field}"`);
      }
      for (const field of POSITIVE_FIELDS) checkField(partial, field, 1);
      for (const field of NON_NEGATIVE_FIELDS) checkField(partial, field, 0);
      current = freezeDeep({ ...current, ...partial });
      return current;
    },
  };
}

function checkField(partial: Partial<Config>, field: keyof Config, min: 0 | 1): void {
  if (!(field in partial)) return;
  const v = partial[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new RangeError(
      `mutableConfig.set: ${field} must be an integer ≥ ${min}, got ${String(v)}`,
    );
  }
}
