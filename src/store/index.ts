/**
 * `createVariantStore(config)`: the configured variant store, proved usable before the first
 * request, wrapped in the bounded hot-variant cache.
 *
 * Boot checks, in order:
 * - `file://`: sweep `<root>/tmp` of staging left by a write that was killed, then prove the whole
 *   write path by committing, reading back and deleting a probe variant (staging, fan-out
 *   directory creation, both renames, metadata parse). With `AP_VARIANT_STORE_MAX_BYTES`, then
 *   scan the directory into the store's index (evicting down to the bound if it was lowered).
 *   The probe goes through an unbounded store on the same directory, before the scan, so it
 *   never evicts a variant and is never counted.
 * - `s3://`: a live PUT then DELETE of `.audio-proxy-boot-probe/<pid>-<random>` with the variant
 *   identity, proving endpoint, trust, credentials, bucket and write permission.
 * - `AP_SERVE_MODE=redirect` needs a store that can presign (the config refuses it already; this
 *   re-checks, so an embedder building a Config by hand gets the same answer).
 *
 * ## Invariants
 * - **A store that fails its boot check never serves**: `createVariantStore` throws a
 *   `StoreError` with code `ERR_STORE_BOOT` naming `AP_VARIANT_STORE`, and releases what it built.
 * - **No store configured, no store**: the result is `undefined` and nothing is touched.
 *
 * ## Races
 * - *Two nodes booting on one directory*: probe keys carry the pid and 48 random bits, so neither
 *   reads or deletes the other's probe; see `file.ts` for the staging sweep.
 *
 * ## Events
 * None.
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/index.js';
import { FileVariantStore } from './file.js';
import { DEFAULT_HIT_CACHE_BYTES, HotVariantCache } from './hotCache.js';
import { S3VariantStore } from './s3.js';
import { createS3Client } from './s3client.js';
import { reasonOf, StoreError, type VariantStore } from './types.js';

export { ChunkChannel } from './channel.js';
export { FileVariantStore } from './file.js';
export { DEFAULT_HIT_CACHE_BYTES, HotVariantCache } from './hotCache.js';
export { S3VariantStore } from './s3.js';
export * from './types.js';

/** S3 sockets per render slot: one tee upload plus one HIT or source read each. */
export const S3_SOCKETS_PER_SLOT = 2;
/** Floor of the S3 socket pool: HITs do not take slots, so a 1-slot node still serves many. */
const MIN_S3_SOCKETS = 16;

export interface CreateVariantStoreOptions {
  /** Bytes of hot variants kept in memory; 0 disables. @default config.hitCacheBytes */
  readonly hitCacheBytes?: number;
}

function bootError(config: Config, reason: string, detail: string, cause?: unknown): StoreError {
  const where =
    config.variantStore?.kind === 's3'
      ? `s3://${config.variantStore.bucket}`
      : `file://${config.variantStore?.kind === 'file' ? config.variantStore.root : ''}`;
  return new StoreError('ERR_STORE_BOOT', reason, `AP_VARIANT_STORE=${where}: ${detail}`, {
    cause,
  });
}

/** Commits, reads back and deletes one probe variant: the whole write path, proved. */
export async function proveWritable(store: VariantStore): Promise<void> {
  const key = `_boot-probe-${process.pid}-${randomBytes(6).toString('hex')}`;
  const body = Buffer.from(`audio-proxy boot probe ${key}\n`);
  async function* one() {
    yield body;
  }
  try {
    await store.put(key, one(), { contentType: 'text/plain', cacheControl: 'no-store' });
    const head = await store.head(key);
    if (head?.size !== body.length) {
      throw new StoreError('ERR_STORE_BOOT', 'readback', 'the probe variant did not read back');
    }
  } finally {
    await store.delete(key).catch(() => {});
  }
}

/**
 * Builds the configured store and runs its boot checks. Resolves `undefined` when no store is
 * configured; rejects with `ERR_STORE_BOOT` when the store cannot be used.
 */
export async function createVariantStore(
  config: Config,
  options: CreateVariantStoreOptions = {},
): Promise<VariantStore | undefined> {
  const spec = config.variantStore;
  if (spec === undefined) return undefined;
  const hitCacheBytes = options.hitCacheBytes ?? config.hitCacheBytes ?? DEFAULT_HIT_CACHE_BYTES;
  if (!Number.isSafeInteger(hitCacheBytes) || hitCacheBytes < 0) {
    throw new RangeError(`hitCacheBytes must be an integer >= 0, got ${hitCacheBytes}`);
  }
  let store: FileVariantStore | S3VariantStore;
  if (spec.kind === 'file') {
    const maxBytes = config.variantStoreMaxBytes ?? 0;
    const probe = new FileVariantStore({ root: spec.root });
    store = maxBytes > 0 ? new FileVariantStore({ root: spec.root, maxBytes }) : probe;
    try {
      await probe.sweepStaging();
      await proveWritable(probe);
    } catch (error) {
      throw bootError(
        config,
        reasonOf(error),
        `the store is not writable (${reasonOf(error)}); it must be a directory this process can create files in`,
        error,
      );
    }
    try {
      await store.scan();
    } catch (error) {
      throw bootError(
        config,
        reasonOf(error),
        `its variants could not be counted for AP_VARIANT_STORE_MAX_BYTES (${reasonOf(error)}); the directory must be readable`,
        error,
      );
    }
  } else {
    if (config.variantS3.credentials === undefined) {
      throw bootError(config, 'no_credentials', 'an s3:// store needs S3 credentials');
    }
    const client = createS3Client(config.variantS3, {
      maxSockets: Math.max(MIN_S3_SOCKETS, S3_SOCKETS_PER_SLOT * config.maxConcurrency),
    });
    store = new S3VariantStore({ client, bucket: spec.bucket });
    try {
      await store.probe();
    } catch (error) {
      await store.close();
      throw error;
    }
  }
  if (config.serveMode === 'redirect' && !store.canPresign) {
    await store.close();
    throw bootError(
      config,
      'cannot_presign',
      'AP_SERVE_MODE=redirect needs a store that can presign (s3://); set AP_SERVE_MODE=proxy',
    );
  }
  return hitCacheBytes > 0 ? new HotVariantCache(store, { maxBytes: hitCacheBytes }) : store;
}
