/**
 * The rules across variables: combinations of values that are each valid alone but do not make
 * a bootable proxy together, checked after the fold and the S3 profiles. `CONFIG_CROSS_RULES`
 * states them for the documentation.
 *
 * ## Invariants
 * - **A rule runs only between values that are themselves valid** (`Ledger.ok`), so one typo is
 *   reported once and not again as a confusing consequence.
 * - **A rule blames the variable to change first**, and its message names every variable in it.
 * - **Rules run in a fixed order** and report after every single-variable problem.
 */
import { DEFAULT_PORT } from './defaults.js';
import type { Ledger } from './fold.js';
import type { Fields } from './row.js';
import { listenerPortSource } from './rows/listeners.js';
import { CREDENTIAL_FIELDS, VARIANT_IDENTITY_FIELDS } from './rows/s3.js';
import type { S3Profile } from './types.js';

/** Rules that tie several variables together, as documented. */
export const CONFIG_CROSS_RULES: readonly string[] = [
  '`AP_KEY` and `AP_SALT` list as many values each when both are set: they pair by position (the first pair signs, every pair verifies).',
  '`AP_ONLY_PRESETS` needs `AP_PRESETS` (with no preset, no render URL could be served).',
  '`AP_READY_QUEUE_THRESHOLD` must not exceed `AP_QUEUE_SIZE` (queue depth could never reach it).',
  '`AP_CLUSTER_ADVERTISE_URL` is required when `AP_CLUSTER_REDIS_URL` is set.',
  '`AP_METRICS_PORT` must differ from the listener port (`AP_PORT`, else `PORT`, else 4000).',
  '`AP_SERVE_MODE=redirect` (the default) is refused with a `file://` store, which cannot presign; with no store at all, the serve mode is irrelevant and accepted.',
  'An `s3://` store needs credentials: the full `AP_VARIANT_S3_*` group, or the `AWS_*` key pair with a region.',
  'The `AP_VARIANT_S3_*` credential group is all or nothing; the error lists every missing name.',
  'A session token belongs to the identity that minted it: `AWS_SESSION_TOKEN` needs the `AWS_*` key pair, `AP_VARIANT_S3_SESSION_TOKEN` needs the full variant group, and neither crosses over.',
];

/** Checks every rule across variables; problems go to the ledger. */
export function checkCrossRules(f: Fields, variantS3: S3Profile, ld: Ledger): void {
  if (f.keys !== undefined && f.salts !== undefined && f.keys.length !== f.salts.length) {
    if (ld.ok('keys', 'salts')) {
      ld.fail(
        'salts',
        `AP_SALT has ${f.salts.length} ${f.salts.length === 1 ? 'value' : 'values'} and AP_KEY has ${f.keys.length}: they pair by position (key rotation: the first pair signs, every pair verifies), so each key needs its salt`,
      );
    }
  }
  if (f.onlyPresets && f.presets.length === 0 && ld.ok('onlyPresets', 'presets')) {
    ld.fail(
      'onlyPresets',
      'AP_ONLY_PRESETS needs AP_PRESETS: with only presets allowed and none defined, no render URL could be served',
    );
  }
  if (ld.ok('queueSize', 'readyQueueThreshold') && f.readyQueueThreshold > f.queueSize) {
    ld.fail(
      'readyQueueThreshold',
      `AP_READY_QUEUE_THRESHOLD (${f.readyQueueThreshold}) must not exceed AP_QUEUE_SIZE (${f.queueSize}): queue depth could never reach it, so /ready could never report the node unready`,
    );
  }
  if (f.waitingRoom && ld.ok('waitingRoom', 'maxConcurrency', 'waitingRoomSlots')) {
    if (f.maxConcurrency < 2) {
      ld.fail(
        'waitingRoom',
        `AP_WAITING_ROOM needs AP_MAX_CONCURRENCY ≥ 2 (it is ${f.maxConcurrency}): the room reserves at most AP_MAX_CONCURRENCY − 1 render slots, so that signed requests without a ticket always keep one`,
      );
    } else if (f.waitingRoomSlots > f.maxConcurrency - 1) {
      ld.fail(
        'waitingRoomSlots',
        `AP_WAITING_ROOM_SLOTS (${f.waitingRoomSlots}) must be at most AP_MAX_CONCURRENCY − 1 (${f.maxConcurrency - 1}): at least one render slot is always left to signed requests without a ticket`,
      );
    }
  }
  if (ld.ok('apPort', 'port', 'metricsPort') && f.metricsPort === f.port) {
    ld.fail(
      'metricsPort',
      `AP_METRICS_PORT (${f.metricsPort}) must differ from the listener port (${f.port}, from ${listenerPortSource(ld)}; the listener port is AP_PORT, else PORT, else ${DEFAULT_PORT}): two listeners cannot share a port`,
    );
  }
  const store = f.variantStore;
  if (store?.kind === 'file' && f.serveMode === 'redirect' && ld.ok('serveMode')) {
    const how = ld.isSet('serveMode') ? '' : ' (the default)';
    ld.fail(
      'serveMode',
      `AP_SERVE_MODE=redirect${how} serves cache hits through presigned URLs, which a file:// AP_VARIANT_STORE cannot produce; set AP_SERVE_MODE=proxy, or use an s3:// store`,
    );
  }
  if (store?.kind === 's3' && variantS3.credentials === undefined && ld.ok(...CREDENTIAL_FIELDS)) {
    const group = VARIANT_IDENTITY_FIELDS.map((field) => ld.nameOf(field)).join(', ');
    ld.fail(
      'variantStore',
      `AP_VARIANT_STORE=s3://${store.bucket} needs S3 credentials: set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION, or ${group}; or use a file:/// store`,
    );
  }
  if (f.clusterRedisUrl !== undefined && (f.keys === undefined || f.salts === undefined)) {
    if (ld.ok('keys', 'salts')) {
      ld.fail(
        'clusterRedisUrl',
        'AP_CLUSTER_REDIS_URL needs AP_KEY and AP_SALT (the same on every node): nodes authenticate the requests they forward to each other with a key derived from them, and a request claiming to be forwarded without it is served as a client’s',
      );
    }
  }
  if (f.clusterRedisUrl !== undefined && f.clusterAdvertiseUrl === undefined) {
    if (ld.ok('clusterAdvertiseUrl')) {
      ld.fail(
        'clusterAdvertiseUrl',
        'AP_CLUSTER_ADVERTISE_URL is required when AP_CLUSTER_REDIS_URL is set: peers forward renders and hand requests over to this node at that origin',
      );
    }
  }
}
