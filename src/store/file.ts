/**
 * The `file:///abs/path` variant store: one directory, committed by rename.
 *
 * Layout under the root: `tmp/` holds staging files (`<key>.<pid>-<random>.data|.meta`);
 * committed variants live in a two-character fan-out directory, `ab/<key>` (the bytes) and
 * `ab/<key>.meta` (JSON: size, content type, cache control, disposition).
 *
 * ## Invariants
 * - **The data file's rename is the commit point.** A put writes and syncs both staging files,
 *   renames the metadata into place, then the data. `head` requires both, and a size that agrees,
 *   so an interrupted commit (metadata without data) reads as a miss.
 * - **Staging is private.** Names carry the pid and 48 random bits and are created exclusively
 *   (`wx`), so concurrent writers of one key never share a file; the last rename wins and both
 *   wrote the same bytes.
 * - **Every failure path removes its own staging**; a process killed mid-write leaves staging
 *   that no reader looks at, and the boot sweep removes it.
 * - **Reads stream from an open descriptor**, so an entry deleted after `get` opened it is still
 *   read whole (POSIX: an unlinked file lives on while a descriptor is open; its space is freed
 *   at the last close).
 *
 * ## The bound (`maxBytes`, `AP_VARIANT_STORE_MAX_BYTES`; 0: unbounded, no index, as before)
 * A bounded store keeps an index (`fileIndex.ts`) of its variants' bytes (data plus metadata file)
 * in least-recently-used order, rebuilt at boot by a scan of the directory, moved by each commit
 * and each HIT (`head`, `get`, and `touch` from the hot cache; memory only, no disk write).
 * - **Committed bytes on disk never exceed the bound** (those this store knows of). Commits, evictions and deletes run one
 *   at a time under the commit lock; a commit first removes its victims (least recently used
 *   first, data file then metadata, as `delete` does) and only then renames its own files in.
 *   Staging is outside the bound (it is bounded by the renders in flight).
 * - **A variant being read is never evicted.** `get` pins its key before it opens the file and
 *   unpins when the stream closes; victims skip pinned keys. A `get` of a key already chosen as a
 *   victim is a miss, so no read we serve ever holds an evicted file open, and the space an
 *   eviction frees is free at once. (Deletes we do not decide, `delete` and other nodes, still
 *   rely on the descriptor guarantee above.) When the pinned variants alone leave no room, the
 *   commit fails (`ERR_STORE_WRITE`, `store_full`) and nothing is evicted.
 * - **A variant larger than the whole bound is never stored**: its put stops writing as soon as
 *   its data passes the bound, removes its staging and rejects with `ERR_STORE_TOO_LARGE`,
 *   published on `audio_proxy.variant_store.oversize` (not a write failure).
 * - **Concurrent puts of one key**: both stage privately; their commits run in turn under the
 *   lock, the second replaces the first (same bytes) and the index counts the key once. A key
 *   being committed is never its own victim.
 *
 * ## Races
 * - *Two nodes sharing one directory*: a booting node's sweep removes only staging whose writer
 *   is gone from this host, or that is older than an hour, so a node booting beside a live one
 *   neither breaks its writes nor its boot probe. A sweep that still removes a live writer's file
 *   (another host, an hour-long stall) fails that put; it never commits a torn file.
 * - *Delete racing head/get*: data goes first, so a reader sees "absent", never data without meta.
 * - *A HIT in the instant between a commit's rename and its index record* (readers may see the
 *   file a moment before the rename's continuation runs): the commit counts as the more recent
 *   of the two. Recency is approximate at that scale, never the bound.
 * - *A bounded directory shared by several nodes*: each node bounds what it knows (its boot scan
 *   and its own commits) and forgets a variant it finds gone, so N nodes may hold up to N times
 *   the bound between them; give each node its share.
 *
 * ## Events
 * | Event | Fields | When |
 * |---|---|---|
 * | `audio_proxy.variant_store.eviction` | `key`, `bytes`, `heldBytes`, `maxBytes` | a variant was removed to make room (also at boot, after the bound was lowered) |
 * | `audio_proxy.variant_store.oversize` | `key`, `bytes`, `maxBytes`, `first` | a put was refused for exceeding the whole bound |
 *
 * The Tee reports write failures.
 */
import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { publish, VARIANT_STORE_CHANNELS } from '../telemetry/channels.js';
import type { StoreUsage } from '../telemetry/metrics.js';
import { pullChunks } from './channel.js';
import { fanOutOf, META_SUFFIX, scanVariants, VariantIndex } from './fileIndex.js';
import {
  type ByteRange,
  checkKey,
  checkMetadata,
  checkRange,
  headPatch,
  type PutOptions,
  reasonOf,
  type StoredBody,
  type StoredVariant,
  StoreError,
  TOO_LARGE_REASON,
  type VariantMetadata,
  type VariantStore,
} from './types.js';

/** Staging directory name under the root (the config's own boot probe writes there too). */
export const STAGING_DIR = 'tmp';
/** Read buffer per stream, in bytes: four default pages per syscall; a HIT is read sequentially. */
const READ_CHUNK_BYTES = 256 * 1024;
/** Random bits in a staging name: collision-free across pids that may all be 1 in containers. */
const STAGING_RANDOM_BYTES = 6;
const META_VERSION = 1;
/**
 * Staging untouched this long is an orphan whatever its pid says: a live writer appends as the
 * render produces bytes, and no render outlives `AP_RENDER_TIMEOUT`'s ceiling by this much.
 */
export const STAGING_ORPHAN_AGE_MS = 60 * 60 * 1000;

/** The writer's pid in a staging name (`<key>.<pid>-<random>.data|.meta`), if it has one. */
function stagingPid(name: string): number | undefined {
  const m = /\.(\d+)-[0-9a-f]+\.(?:data|meta)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** Whether a process with this pid exists on this host (EPERM: it exists, it is not ours). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

interface MetaFile extends VariantMetadata {
  readonly v: number;
  readonly size: number;
}

function metaRecord(size: number, metadata: VariantMetadata): MetaFile {
  return {
    v: META_VERSION,
    size,
    contentType: metadata.contentType,
    cacheControl: metadata.cacheControl,
    ...(metadata.contentDisposition !== undefined
      ? { contentDisposition: metadata.contentDisposition }
      : {}),
  };
}

/**
 * The bytes a committed variant of `size` data bytes takes on disk, as the bound counts them:
 * its data file plus its metadata file.
 */
export function storedBytes(size: number, metadata: VariantMetadata): number {
  return size + Buffer.byteLength(JSON.stringify(metaRecord(size, metadata)));
}

function isMissing(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function aborted(cause?: unknown): StoreError {
  return new StoreError('ERR_STORE_ABORTED', 'aborted', 'variant write abandoned', { cause });
}

async function writeAll(handle: FileHandle, data: Buffer): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await handle.write(data, offset, data.length - offset);
    offset += bytesWritten;
  }
}

export interface FileVariantStoreOptions {
  /** Absolute directory (already validated by the config). */
  readonly root: string;
  /**
   * Bytes the committed variants may take together (data and metadata files); least recently
   * used variants are evicted past it. 0: unbounded, no index kept. @default 0
   */
  readonly maxBytes?: number;
}

export class FileVariantStore implements VariantStore {
  readonly kind = 'file' as const;
  readonly canPresign = false;
  readonly root: string;
  readonly stagingDir: string;
  /** The bound; 0 when unbounded. */
  readonly maxBytes: number;
  /** Present when bounded. */
  readonly #index: VariantIndex | undefined;
  /** Keys chosen as victims whose files are being removed: a `get` of one is a miss. */
  readonly #evicting = new Set<string>();
  /** The commit lock: commits, evictions and deletes of a bounded store, one at a time. */
  #tail: Promise<unknown> = Promise.resolve();
  #scanned: Promise<void> | undefined;
  #oversizeSeen = false;
  /** The size that made each oversize refusal, for its event. */
  readonly #oversizeBytes = new WeakMap<StoreError, number>();

  constructor(options: FileVariantStoreOptions) {
    if (typeof options?.root !== 'string' || !options.root.startsWith('/')) {
      throw new TypeError('FileVariantStore: root must be an absolute path');
    }
    const maxBytes = options.maxBytes ?? 0;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
      throw new RangeError(`FileVariantStore: maxBytes must be an integer >= 0, got ${maxBytes}`);
    }
    this.root = options.root;
    this.stagingDir = join(options.root, STAGING_DIR);
    this.maxBytes = maxBytes;
    this.#index = maxBytes > 0 ? new VariantIndex(maxBytes) : undefined;
  }

  #dir(key: string): string {
    return join(this.root, fanOutOf(key));
  }

  /** Where a committed variant's bytes and metadata live. */
  paths(key: string): { data: string; meta: string } {
    checkKey(key);
    const dir = this.#dir(key);
    return { data: join(dir, key), meta: join(dir, `${key}${META_SUFFIX}`) };
  }

  /** What a bounded store holds now; `undefined` when unbounded. */
  usage(): StoreUsage | undefined {
    const index = this.#index;
    if (index === undefined) return undefined;
    return { bytes: index.bytes, maxBytes: index.maxBytes, variants: index.size };
  }

  /** Keys held, least recently used first (a bounded store; tests and diagnostics). */
  heldKeys(): string[] {
    return this.#index?.keys() ?? [];
  }

  /** A HIT served from elsewhere (the hot cache): `key` becomes the most recently used. */
  touch(key: string): void {
    this.#index?.touch(key);
  }

  /**
   * Builds a bounded store's index from the directory (once; later calls await the first) and
   * evicts down to the bound if the directory holds more (the bound was lowered). Commits and
   * deletes wait for it; `createVariantStore` awaits it at boot so a failure refuses the boot.
   * Resolves at once for an unbounded store.
   */
  scan(): Promise<void> {
    this.#scanned ??= this.#index
      ? this.#exclusive(() => this.#build(this.#index!))
      : Promise.resolve();
    return this.#scanned;
  }

  async #build(index: VariantIndex): Promise<void> {
    for (const found of await scanVariants(this.root)) {
      if (!index.has(found.key)) index.set(found.key, found.bytes);
    }
    await this.#evict(index, index.victims(undefined) ?? []);
  }

  /** Runs `fn` once every earlier holder of the commit lock has finished. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(fn, fn);
    this.#tail = run.catch(() => {});
    return run;
  }

  /**
   * Removes `victims` (under the commit lock), each before the next: data, then metadata, then
   * the fan-out directory if now empty. All are marked first, in the same turn as their choice,
   * so a `get` arriving while an earlier one is being removed cannot pin and open a later one.
   * A removal that fails puts its key back (it is still on disk) and rejects.
   */
  async #evict(index: VariantIndex, victims: readonly string[]): Promise<void> {
    for (const key of victims) this.#evicting.add(key);
    try {
      for (const key of victims) {
        const bytes = index.delete(key);
        if (bytes === undefined) continue; // found gone meanwhile and forgotten
        try {
          await this.#remove(key);
        } catch (error) {
          index.set(key, bytes);
          throw error;
        }
        publish(VARIANT_STORE_CHANNELS.eviction, () => ({
          key,
          bytes,
          heldBytes: index.bytes,
          maxBytes: index.maxBytes,
        }));
      }
    } finally {
      for (const key of victims) this.#evicting.delete(key);
    }
  }

  async #remove(key: string): Promise<void> {
    const { data, meta } = this.paths(key);
    await rm(data, { force: true });
    await rm(meta, { force: true });
    await rmdir(this.#dir(key)).catch(() => {}); // only if now empty; busy or shared is fine
  }

  /** A variant the index holds turned out gone (an operator, another node): stop counting it. */
  #forget(key: string): void {
    if (!this.#evicting.has(key)) this.#index?.delete(key);
  }

  /** The refusal of an oversize put; published by `#oversize` once its staging is gone. */
  #tooLarge(key: string, bytes: number): StoreError {
    const error = new StoreError(
      'ERR_STORE_TOO_LARGE',
      TOO_LARGE_REASON,
      `variant ${key} is larger than the store's bound (${this.maxBytes} bytes); not stored`,
    );
    this.#oversizeBytes.set(error, bytes);
    return error;
  }

  #oversize(key: string, error: StoreError): void {
    const first = !this.#oversizeSeen;
    this.#oversizeSeen = true;
    const bytes = this.#oversizeBytes.get(error) ?? 0;
    publish(VARIANT_STORE_CHANNELS.oversize, () => ({
      key,
      bytes,
      maxBytes: this.maxBytes,
      first,
    }));
  }

  async head(key: string): Promise<StoredVariant | undefined> {
    const { data, meta } = this.paths(key);
    const [metaText, info] = await Promise.allSettled([readFile(meta, 'utf8'), stat(data)]);
    if (info.status === 'rejected' && isMissing(info.reason)) this.#forget(key);
    for (const r of [metaText, info]) {
      if (r.status === 'rejected') {
        if (isMissing(r.reason)) return undefined;
        throw new StoreError('ERR_STORE_UNAVAILABLE', reasonOf(r.reason), 'variant head failed', {
          cause: r.reason,
        });
      }
    }
    const text = (metaText as PromiseFulfilledResult<string>).value;
    const size = (info as PromiseFulfilledResult<Awaited<ReturnType<typeof stat>>>).value.size;
    let parsed: MetaFile;
    try {
      parsed = JSON.parse(text) as MetaFile;
    } catch {
      return undefined; // a torn or foreign metadata file is a miss, never a 500
    }
    if (
      parsed?.v !== META_VERSION ||
      parsed.size !== size ||
      typeof parsed.contentType !== 'string' ||
      typeof parsed.cacheControl !== 'string'
    ) {
      return undefined;
    }
    this.#index?.touch(key);
    return {
      key,
      size,
      contentType: parsed.contentType,
      cacheControl: parsed.cacheControl,
      ...(typeof parsed.contentDisposition === 'string'
        ? { contentDisposition: parsed.contentDisposition }
        : {}),
    };
  }

  async get(key: string, range?: ByteRange): Promise<StoredBody | undefined> {
    checkRange(range);
    const { data } = this.paths(key);
    const index = this.#index;
    if (index === undefined) return this.#open(key, data, range);
    // Pinned before the open, so no victim is chosen among open files; a victim already chosen
    // is a miss rather than a read of a file about to go.
    if (this.#evicting.has(key)) return undefined;
    index.pin(key);
    let unpin: (() => void) | undefined = () => {
      unpin = undefined;
      index.unpin(key);
    };
    try {
      const body = await this.#open(key, data, range);
      if (body === undefined) {
        this.#forget(key);
      } else {
        index.touch(key);
        if (body.length > 0) {
          body.stream.once('close', () => unpin?.());
          return body;
        }
      }
      unpin();
      return body;
    } catch (error) {
      unpin?.();
      throw error;
    }
  }

  async #open(
    key: string,
    data: string,
    range: ByteRange | undefined,
  ): Promise<(StoredBody & { type: 'stream' }) | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(data, 'r');
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw new StoreError('ERR_STORE_UNAVAILABLE', reasonOf(error), 'variant open failed', {
        cause: error,
      });
    }
    try {
      const { size } = await handle.stat();
      const start = range?.start ?? 0;
      const end = Math.min(range?.end ?? size - 1, size - 1);
      const length = Math.max(end - start + 1, 0);
      if (length === 0) {
        // An empty selection reads nothing (createReadStream's `end` is inclusive).
        await handle.close();
        return { type: 'stream', stream: Readable.from([]), length: 0 };
      }
      const stream = handle.createReadStream({
        start,
        end,
        highWaterMark: READ_CHUNK_BYTES,
        autoClose: true,
      });
      return { type: 'stream', stream, length };
    } catch (error) {
      await handle.close().catch(() => {});
      throw new StoreError('ERR_STORE_UNAVAILABLE', reasonOf(error), `variant ${key} read failed`, {
        cause: error,
      });
    }
  }

  async put(
    key: string,
    chunks: AsyncIterable<Buffer>,
    metadata: VariantMetadata,
    options: PutOptions = {},
  ): Promise<StoredVariant> {
    checkMetadata(metadata);
    const { data, meta } = this.paths(key);
    const { signal } = options;
    if (signal?.aborted) throw aborted(signal.reason);
    const index = this.#index;
    const stem = join(
      this.stagingDir,
      `${key}.${process.pid}-${randomBytes(STAGING_RANDOM_BYTES).toString('hex')}`,
    );
    const dataTmp = `${stem}.data`;
    const metaTmp = `${stem}.meta`;
    let handle: FileHandle | undefined;
    try {
      handle = await open(dataTmp, 'wx');
      let size = 0;
      for await (const chunk of pullChunks(chunks, signal)) {
        await writeAll(handle, chunk);
        size += chunk.length;
        if (index !== undefined && size > index.maxBytes) throw this.#tooLarge(key, size);
      }
      if (signal?.aborted) throw aborted(signal.reason);
      const patch = headPatch(options, size);
      if (patch !== undefined) {
        const { bytesWritten } = await handle.write(patch.data, 0, patch.data.length, patch.offset);
        if (bytesWritten !== patch.data.length) throw new Error('short patch write');
      }
      await handle.datasync();
      await handle.close();
      handle = undefined;
      const record = Buffer.from(JSON.stringify(metaRecord(size, metadata)));
      const bytes = size + record.length;
      if (index !== undefined && bytes > index.maxBytes) throw this.#tooLarge(key, bytes);
      handle = await open(metaTmp, 'wx');
      await writeAll(handle, record);
      await handle.datasync();
      await handle.close();
      handle = undefined;
      if (signal?.aborted) throw aborted(signal.reason);
      if (index === undefined) {
        await this.#placeMeta(key, metaTmp, meta);
        await rename(dataTmp, data); // the commit point
      } else {
        await this.scan();
        await this.#exclusive(async () => {
          if (signal?.aborted) throw aborted(signal.reason);
          const victims = index.victims(key, bytes);
          if (victims === undefined) {
            throw new StoreError(
              'ERR_STORE_WRITE',
              'store_full',
              `variant ${key} (${bytes} bytes) does not fit: the variants being read fill the bound`,
            );
          }
          await this.#evict(index, victims);
          await this.#placeMeta(key, metaTmp, meta);
          await rename(dataTmp, data); // the commit point
          index.set(key, bytes);
        });
      }
      return { key, size, ...metadata };
    } catch (error) {
      await handle?.close().catch(() => {});
      await Promise.all([rm(dataTmp, { force: true }), rm(metaTmp, { force: true })]).catch(
        () => {},
      );
      // Counted once nothing of it is left on disk: whoever sees the count finds no staging.
      if (error instanceof StoreError && error.code === 'ERR_STORE_TOO_LARGE')
        this.#oversize(key, error);
      if (error instanceof StoreError) throw error;
      throw new StoreError('ERR_STORE_WRITE', reasonOf(error), 'variant write failed', {
        cause: error,
      });
    }
  }

  /** Renames the metadata into its fan-out directory, re-creating it if a delete just removed it. */
  async #placeMeta(key: string, from: string, to: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      await mkdir(this.#dir(key), { recursive: true });
      try {
        await rename(from, to);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOENT' || attempt >= 3) throw error;
      }
    }
  }

  presign(): Promise<string> {
    return Promise.reject(
      new StoreError('ERR_STORE_UNSUPPORTED', 'unsupported', 'a file:// store cannot presign'),
    );
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    const index = this.#index;
    if (index === undefined) return this.#remove(key);
    await this.scan();
    await this.#exclusive(async () => {
      const bytes = index.delete(key);
      try {
        await this.#remove(key);
      } catch (error) {
        if (bytes !== undefined) index.set(key, bytes); // still on disk
        throw error;
      }
    });
  }

  async close(): Promise<void> {}

  /** Staging entries present now (tests and the boot sweep). */
  async staging(): Promise<string[]> {
    try {
      return await readdir(this.stagingDir);
    } catch (error) {
      if (isMissing(error)) return [];
      throw error;
    }
  }

  /**
   * Boot: removes the staging a killed write left behind, creating the staging directory if
   * needed. An entry is an orphan when the process named in it is gone from this host, or when
   * it is older than `STAGING_ORPHAN_AGE_MS` (a writer on another host sharing the directory, or
   * a reused pid). Entries of live processes (another node booting or writing beside this one,
   * another store in this process) are left alone. Returns how many entries were removed.
   */
  async sweepStaging(nowMs: number = Date.now()): Promise<number> {
    await mkdir(this.stagingDir, { recursive: true });
    const names = await this.staging();
    const orphans = await Promise.all(
      names.map(async (name) => {
        const path = join(this.stagingDir, name);
        const pid = stagingPid(name);
        if (pid !== undefined && pid !== process.pid && !processExists(pid)) return path;
        try {
          const { mtimeMs } = await stat(path);
          return nowMs - mtimeMs > STAGING_ORPHAN_AGE_MS ? path : undefined;
        } catch {
          return undefined; // gone already: its writer finished or failed
        }
      }),
    );
    const doomed = orphans.filter((p): p is string => p !== undefined);
    await Promise.all(doomed.map((p) => rm(p, { force: true, recursive: true })));
    return doomed.length;
  }
}
