/**
 * The variant store's one interface, shared by the `file://` and `s3://` implementations and by
 * the in-memory hot-variant cache that wraps either.
 *
 * A variant is immutable: its key is a hash of everything that determines its bytes, so an entry
 * is written once and never changes. That is what lets a HIT skip every check a render makes,
 * lets two writers of one key race harmlessly (identical bytes; the last commit wins), and lets a
 * cache keep an entry without revalidating it.
 *
 * ## Invariants
 * - **Atomic or absent.** `put` either commits the whole variant with its metadata, or leaves
 *   nothing `head` or `get` can see. A put that fails, is aborted, or whose process dies leaves at
 *   most unreadable staging (swept at boot, or an incomplete multipart upload).
 * - **`head` answers "servable or not".** Not found, metadata missing or inconsistent: all
 *   `undefined`. Only a store it could not ask (network, permissions) throws a `StoreError`.
 * - **`get` streams.** A body is a stream of exactly the requested bytes, or (from the hot cache)
 *   a Buffer holding them; nothing else loads a whole object into memory.
 * - **Failures carry a stable `code`** (`StoreErrorCode`) and a short lowercase `reason`
 *   (`eacces`, `enospc`, `accessdenied`…) that telemetry can publish as is.
 *
 * ## Races
 * - *Entry vanishes between `head` and `get`*: `get` answers `undefined` and the caller renders.
 * - *Entry replaced between `head` and `get`*: identical bytes by construction; a body shorter than
 *   the length `head` declared is the caller's signal to tear the response down.
 *
 * ## Events
 * None here; the Tee publishes write failures.
 */
import type { Readable } from 'node:stream';
import type { StoreUsage } from '../telemetry/metrics.js';

/** What is stored with a variant and replayed on every HIT. */
export interface VariantMetadata {
  /** e.g. `audio/mpeg`. */
  readonly contentType: string;
  /** The unclamped policy; a response clamps it to its URL's `exp`. */
  readonly cacheControl: string;
  /** From `dl`, which is part of the key, so it is a property of the variant. */
  readonly contentDisposition?: string;
}

/** A committed variant as `head` reports it. */
export interface StoredVariant extends VariantMetadata {
  readonly key: string;
  /** Bytes. */
  readonly size: number;
}

/** Inclusive byte positions, `0 <= start <= end < size`. */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

/** A body: exactly the requested bytes, streamed, or already in memory (hot cache). */
export type StoredBody =
  | { readonly type: 'buffer'; readonly data: Buffer }
  | { readonly type: 'stream'; readonly stream: Readable; readonly length: number };

/** Bytes that replace the same number of staged bytes at `offset`, written before the commit. */
export interface HeadPatch {
  readonly offset: number;
  readonly data: Uint8Array;
}

export interface PutOptions {
  /** Aborting discards whatever was staged; `put` then rejects with `ERR_STORE_ABORTED`. */
  readonly signal?: AbortSignal;
  /**
   * Called once, after `chunks` ended and before the commit: bytes to write over what was
   * streamed at their offset (an mp3's info frame, `workers/xingFrame.ts`), or `undefined` to
   * keep the bytes as streamed. The size never changes. A patch that does not lie inside the
   * variant (or, in `s3://`, inside its first part) fails the put (`ERR_STORE_WRITE`).
   */
  readonly patch?: () => HeadPatch | undefined;
}

export interface VariantStore {
  readonly kind: 'file' | 's3';
  /** Whether `presign` can produce a URL (only `s3://`). */
  readonly canPresign: boolean;
  /** The committed variant, or `undefined` when there is none (or it is incomplete). */
  head(key: string): Promise<StoredVariant | undefined>;
  /** Its bytes (a range of them), or `undefined` when it vanished since `head`. */
  get(key: string, range?: ByteRange): Promise<StoredBody | undefined>;
  /**
   * Consumes `chunks` to the end and commits them with `metadata`, atomically. Rejects with a
   * `StoreError` (and leaves nothing readable) if `chunks` throws, the signal aborts, or a write
   * fails.
   */
  put(
    key: string,
    chunks: AsyncIterable<Buffer>,
    metadata: VariantMetadata,
    options?: PutOptions,
  ): Promise<StoredVariant>;
  /** A time-limited URL that GETs the variant. Throws `ERR_STORE_UNSUPPORTED` without presigning. */
  presign(key: string, ttlS: number): Promise<string>;
  /** Removes a variant (operators' purge, tests). Absent is not an error. */
  delete(key: string): Promise<void>;
  /** Releases sockets and handles. */
  close(): Promise<void>;
  /**
   * Tells a bounded store that `key` was just served without reading it (the hot cache served it
   * from memory), so its recency counts that HIT. In memory only; optional.
   */
  touch?(key: string): void;
  /** What a bounded store holds now (the metrics gauges); `undefined` when it keeps no index. */
  usage?(): StoreUsage | undefined;
}

export type StoreErrorCode =
  /** The store could not be asked: network, refused, timed out, 5xx. */
  | 'ERR_STORE_UNAVAILABLE'
  /** The store refused a write (permissions, space, a part rejected). */
  | 'ERR_STORE_WRITE'
  /** The put was abandoned by its caller (render failed, stopped, deadline). */
  | 'ERR_STORE_ABORTED'
  /** The operation is not something this store can do (presigning a file store). */
  | 'ERR_STORE_UNSUPPORTED'
  /** Boot: the store is not usable (not writable, probe failed, its directory unreadable). */
  | 'ERR_STORE_BOOT'
  /** The variant is larger than the store's whole bound (`AP_VARIANT_STORE_MAX_BYTES`): not kept. */
  | 'ERR_STORE_TOO_LARGE';

/** Why a store operation failed. Match on `code`; `reason` is a short lowercase token. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly code: StoreErrorCode;
  readonly reason: string;
  constructor(
    code: StoreErrorCode,
    reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = code;
    this.reason = reason;
  }
}

/** Keys name files and objects: hex digests in practice; anything path-like is refused. */
const KEY_RE = /^[A-Za-z0-9_-]{1,200}$/;

/** Whether `key` is a well-formed variant key (one that names a file, never a path). */
export function isVariantKey(key: string): boolean {
  return typeof key === 'string' && KEY_RE.test(key);
}

/** Throws `TypeError` for a key that could escape its directory or bucket prefix. */
export function checkKey(key: string): void {
  if (!isVariantKey(key)) {
    throw new TypeError(`variant key must match ${KEY_RE}, got ${JSON.stringify(key)}`);
  }
}

/** Throws `RangeError` for a range that does not lie inside `[0, size)`. */
export function checkRange(range: ByteRange | undefined): void {
  if (range === undefined) return;
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new RangeError(`invalid byte range ${start}-${end}`);
  }
}

/** The metadata fields, validated (programmer input: throws `TypeError`). */
export function checkMetadata(metadata: VariantMetadata): void {
  if (typeof metadata?.contentType !== 'string' || metadata.contentType === '') {
    throw new TypeError('metadata.contentType must be a non-empty string');
  }
  if (typeof metadata.cacheControl !== 'string' || metadata.cacheControl === '') {
    throw new TypeError('metadata.cacheControl must be a non-empty string');
  }
  if (
    metadata.contentDisposition !== undefined &&
    (typeof metadata.contentDisposition !== 'string' || metadata.contentDisposition === '')
  ) {
    throw new TypeError('metadata.contentDisposition must be a non-empty string when set');
  }
}

/** `patch` of `options`, checked against the `limit` bytes it may touch (`ERR_STORE_WRITE`). */
export function headPatch(options: PutOptions, limit: number): HeadPatch | undefined {
  const patch = options.patch?.();
  if (patch === undefined) return undefined;
  const { offset, data } = patch;
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + data.length > limit) {
    throw new StoreError(
      'ERR_STORE_WRITE',
      'patch_out_of_range',
      `patch of ${data.length} bytes at ${offset} is outside the ${limit} bytes it may replace`,
    );
  }
  return patch;
}

/** The `reason` of `ERR_STORE_TOO_LARGE`: the store's own channel reports it, not a failure. */
export const TOO_LARGE_REASON = 'too_large';

/** `errno` code of a Node error, lowercased, or `fallback`. */
export function reasonOf(error: unknown, fallback = 'unknown'): string {
  if (error instanceof StoreError) return error.reason;
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code.toLowerCase();
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && name !== '' && name !== 'Error') return name.toLowerCase();
  }
  return fallback;
}
