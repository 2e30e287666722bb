/**
 * HotVariantCache: a `VariantStore` wrapper that keeps the most recently served small variants in
 * memory, bounded in bytes, so a hot HIT costs a `Map` lookup and one socket write instead of a
 * metadata read, a stat, an open and a read stream.
 *
 * Policy: a full-body `get` of a variant no larger than `maxEntryBytes` is loaded whole (one
 * store read, shared by every request that arrives while it loads) and kept; later `head`/`get`
 * for that key never touch the store. Ranges of a kept variant are slices of it. Ranges of a
 * variant not kept, and variants above the entry limit, stream from the store as before.
 *
 * ## Invariants
 * - **Resident plus loading bytes never exceed `maxBytes`.** A load reserves its size before it
 *   starts (evicting least recently used entries to make room) or does not happen.
 * - **Only whole, consistent bodies are kept**: exactly the size the store declared. A short or
 *   failed read is returned as is (the caller tears the response down) and never cached.
 * - **Variants are immutable**, so an entry is never revalidated. A variant deleted from the
 *   store behind this wrapper's back stays servable from memory until evicted; `delete` through
 *   this wrapper (an operator's purge) evicts at once, and a load of that key in flight or
 *   started before the store's delete has finished is served to its waiters but not kept.
 * - **`maxBytes = 0` is a pass-through.**
 * - **A HIT served from memory is still a HIT to the store underneath**: it is told (`touch`),
 *   so a bounded store's recency counts it and never evicts a hot variant for being unread.
 *
 * ## Races
 * - *Many requests for a cold key at once*: one load, every request awaits it.
 * - *A purge while the key loads*: the load's bytes predate the delete, so they are not kept.
 * - *Eviction while a response is still writing a body*: the response holds its own reference to
 *   the Buffer; eviction only drops the cache's, so the write completes.
 *
 * ## Events
 * None; `stats()` reads the counters.
 */
import type { Readable } from 'node:stream';
import { DEFAULT_HIT_CACHE_BYTES } from '../config/index.js';
import type { StoreUsage } from '../telemetry/metrics.js';
import {
  type ByteRange,
  checkKey,
  type PutOptions,
  type StoredBody,
  type StoredVariant,
  StoreError,
  type VariantMetadata,
  type VariantStore,
} from './types.js';

/** Default budget in bytes (`AP_HIT_CACHE_BYTES`): 64 hot 1 MiB variants. */
export { DEFAULT_HIT_CACHE_BYTES };
/** One entry may take at most this fraction of the budget, so one large variant cannot flush it. */
export const HIT_CACHE_ENTRY_DIVISOR = 8;
/** Metadata remembered from `head` for a following `get` to admit (count bound; ~200 B each). */
const RECENT_HEADS_MAX = 1_024;

interface Entry {
  readonly head: StoredVariant;
  readonly data: Buffer;
}

export interface HotVariantCacheOptions {
  /** Byte budget for bodies kept in memory; 0 disables. @default DEFAULT_HIT_CACHE_BYTES */
  readonly maxBytes?: number;
  /** Largest variant kept. @default floor(maxBytes / HIT_CACHE_ENTRY_DIVISOR) */
  readonly maxEntryBytes?: number;
}

export interface HotCacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly loadingBytes: number;
  readonly hits: number;
  readonly loads: number;
  readonly evictions: number;
}

/** Reads `stream` into a Buffer of `length` bytes; returns fewer if the stream ends early. */
async function collect(stream: Readable, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(length);
  let used = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (used + chunk.length > length) {
      stream.destroy();
      throw new StoreError('ERR_STORE_UNAVAILABLE', 'size_mismatch', 'body longer than declared');
    }
    chunk.copy(out, used);
    used += chunk.length;
  }
  return used === length ? out : out.subarray(0, used);
}

export class HotVariantCache implements VariantStore {
  readonly inner: VariantStore;
  readonly kind: VariantStore['kind'];
  readonly canPresign: boolean;
  readonly maxBytes: number;
  readonly maxEntryBytes: number;
  /** Insertion order is recency order: a hit re-inserts its key at the end. */
  readonly #entries = new Map<string, Entry>();
  readonly #recentHeads = new Map<string, StoredVariant>();
  readonly #loading = new Map<string, Promise<Buffer>>();
  /** Loads in flight that a delete overtook: their bytes are served to waiters, not kept. */
  readonly #stale = new Set<string>();
  #bytes = 0;
  #loadingBytes = 0;
  #hits = 0;
  #loads = 0;
  #evictions = 0;

  constructor(inner: VariantStore, options: HotVariantCacheOptions = {}) {
    this.inner = inner;
    this.kind = inner.kind;
    this.canPresign = inner.canPresign;
    const maxBytes = options.maxBytes ?? DEFAULT_HIT_CACHE_BYTES;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
      throw new RangeError(`maxBytes must be an integer >= 0, got ${maxBytes}`);
    }
    const maxEntryBytes = options.maxEntryBytes ?? Math.floor(maxBytes / HIT_CACHE_ENTRY_DIVISOR);
    if (!Number.isSafeInteger(maxEntryBytes) || maxEntryBytes < 0 || maxEntryBytes > maxBytes) {
      throw new RangeError(`maxEntryBytes must be an integer in 0..maxBytes, got ${maxEntryBytes}`);
    }
    this.maxBytes = maxBytes;
    this.maxEntryBytes = maxEntryBytes;
  }

  stats(): HotCacheStats {
    return {
      entries: this.#entries.size,
      bytes: this.#bytes,
      loadingBytes: this.#loadingBytes,
      hits: this.#hits,
      loads: this.#loads,
      evictions: this.#evictions,
    };
  }

  /**
   * The entry for `key`, moved to the most recent position; the store underneath is told too,
   * so a bounded store does not evict what is served from here.
   */
  #touch(key: string): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    this.inner.touch?.(key);
    return entry;
  }

  #evict(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= entry.data.length;
    this.#evictions += 1;
  }

  /** Evicts least recently used entries until `need` more bytes fit; false if they cannot. */
  #makeRoom(need: number): boolean {
    for (const key of this.#entries.keys()) {
      if (this.#bytes + this.#loadingBytes + need <= this.maxBytes) break;
      this.#evict(key);
    }
    return this.#bytes + this.#loadingBytes + need <= this.maxBytes;
  }

  #rememberHead(head: StoredVariant): void {
    this.#recentHeads.delete(head.key);
    this.#recentHeads.set(head.key, head);
    if (this.#recentHeads.size > RECENT_HEADS_MAX) {
      const oldest = this.#recentHeads.keys().next().value as string;
      this.#recentHeads.delete(oldest);
    }
  }

  async head(key: string): Promise<StoredVariant | undefined> {
    const entry = this.#entries.get(key);
    if (entry !== undefined) {
      this.inner.touch?.(key);
      return entry.head;
    }
    const head = await this.inner.head(key);
    if (head !== undefined && this.maxBytes > 0 && head.size <= this.maxEntryBytes) {
      this.#rememberHead(head);
    }
    return head;
  }

  /** Synchronous lookup for the hot path: the kept entry, or undefined. */
  peek(key: string): { readonly head: StoredVariant; readonly data: Buffer } | undefined {
    const entry = this.#touch(key);
    if (entry !== undefined) this.#hits += 1;
    return entry;
  }

  async get(key: string, range?: ByteRange): Promise<StoredBody | undefined> {
    const entry = this.#touch(key);
    if (entry !== undefined) {
      this.#hits += 1;
      return { type: 'buffer', data: slice(entry.data, range) };
    }
    const pending = this.#loading.get(key);
    if (pending !== undefined) {
      const data = await pending;
      return { type: 'buffer', data: slice(data, range) };
    }
    const head = this.#recentHeads.get(key);
    if (range !== undefined || head === undefined || head.size > this.maxEntryBytes) {
      return this.inner.get(key, range);
    }
    if (!this.#makeRoom(head.size)) return this.inner.get(key, range);
    const body = await this.#load(key, head);
    return body === undefined ? undefined : { type: 'buffer', data: body };
  }

  async #load(key: string, head: StoredVariant): Promise<Buffer | undefined> {
    const size = head.size;
    this.#loadingBytes += size;
    let release = true;
    const load = (async () => {
      const body = await this.inner.get(key);
      if (body === undefined) return undefined;
      if (body.type === 'buffer') return body.data;
      return collect(body.stream, size);
    })();
    // Joiners await the Buffer; "vanished" is reported to them as an error (they re-render).
    const shared = load.then((data) => {
      if (data === undefined) throw new StoreError('ERR_STORE_UNAVAILABLE', 'vanished', 'gone');
      return data;
    });
    shared.catch(() => {});
    this.#loading.set(key, shared);
    try {
      const data = await load;
      this.#loadingBytes -= size;
      release = false;
      const stale = this.#stale.delete(key);
      if (data !== undefined && data.length === size && !stale) {
        this.#loads += 1;
        this.#recentHeads.delete(key);
        if (this.#makeRoom(size)) {
          this.#entries.set(key, { head, data });
          this.#bytes += size;
        }
      }
      return data;
    } finally {
      if (release) this.#loadingBytes -= size;
      this.#loading.delete(key);
    }
  }

  put(
    key: string,
    chunks: AsyncIterable<Buffer>,
    metadata: VariantMetadata,
    options?: PutOptions,
  ): Promise<StoredVariant> {
    return this.inner.put(key, chunks, metadata, options);
  }

  presign(key: string, ttlS: number): Promise<string> {
    return this.inner.presign(key, ttlS);
  }

  touch(key: string): void {
    this.inner.touch?.(key);
  }

  usage(): StoreUsage | undefined {
    return this.inner.usage?.();
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    this.#forget(key);
    try {
      await this.inner.delete(key);
    } finally {
      // A load that began while the store deleted may have read the old bytes: drop those too.
      this.#forget(key);
    }
  }

  /** Drops `key` from memory, and marks a load of it in flight so it does not keep its bytes. */
  #forget(key: string): void {
    this.#evict(key);
    this.#recentHeads.delete(key);
    if (this.#loading.has(key)) this.#stale.add(key);
  }

  async close(): Promise<void> {
    this.#entries.clear();
    this.#recentHeads.clear();
    this.#bytes = 0;
    await this.inner.close();
  }
}

function slice(data: Buffer, range: ByteRange | undefined): Buffer {
  if (range === undefined) return data;
  return data.subarray(range.start, Math.min(range.end, data.length - 1) + 1);
}
