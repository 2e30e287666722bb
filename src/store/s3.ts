/**
 * The `s3://bucket` variant store: objects named by the variant key, metadata as the object's own
 * `Content-Type`, `Cache-Control` and `Content-Disposition`, written by multipart upload.
 *
 * ## Invariants
 * - **One part in memory.** A put fills one `PART_BYTES` buffer from the chunk stream, uploads it,
 *   and only then fills the next; the last part is whatever remains. A variant that ends before the
 *   first part is full is sent as one `PutObject` instead (no multipart round trips for the common
 *   small variant). A put with a `patch` (an mp3's info frame) holds its first part in memory
 *   until the stream ended, writes the patch into it and uploads it last as part 1: two parts in
 *   memory for such a put.
 * - **Completion is the commit.** S3 makes `CompleteMultipartUpload` and `PutObject` atomic: until
 *   they succeed nothing is readable under the key.
 * - **Every failure path aborts the upload** (`AbortMultipartUpload`, best effort). A process
 *   killed mid-upload leaves an incomplete upload that is invisible to readers; operators should
 *   add a bucket lifecycle rule that expires incomplete multipart uploads.
 * - **`head` requires the metadata**: an object without a content type or cache control (written
 *   by something else) is a miss.
 * - **Presigning is local** (SigV4 by the SDK's presigner, no network) and never fails for a
 *   configured client.
 *
 * ## Races
 * - *Two writers of one key*: two independent uploads; the last to complete wins, with the same
 *   bytes.
 * - *Abort while a part is in flight*: the part request is cancelled through its AbortSignal and
 *   the upload is then aborted; a part that lands after the abort is discarded by S3.
 *
 * ## Events
 * None; the Tee reports write failures.
 */
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pullChunks } from './channel.js';
import { classifyS3Error, s3Reason } from './s3client.js';
import {
  type ByteRange,
  checkKey,
  checkMetadata,
  checkRange,
  headPatch,
  type PutOptions,
  type StoredBody,
  type StoredVariant,
  StoreError,
  type VariantMetadata,
  type VariantStore,
} from './types.js';

/** Multipart part size, in bytes: S3's minimum for every part but the last. */
export const PART_BYTES = 5 * 1024 * 1024;
/** Longest presigned lifetime SigV4 allows, in seconds. */
const MAX_PRESIGN_S = 604_800;
/** Prefix of the boot probe's objects; never a variant key (keys are hex digests). */
export const BOOT_PROBE_PREFIX = '.audio-proxy-boot-probe/';

function aborted(cause?: unknown): StoreError {
  return new StoreError('ERR_STORE_ABORTED', 'aborted', 'variant write abandoned', { cause });
}

/** Fills one part at a time from the chunk stream, copying into a preallocated buffer. */
class PartBuffer {
  readonly #buf: Buffer;
  #used = 0;
  constructor(size: number) {
    this.#buf = Buffer.allocUnsafe(size);
  }
  get used(): number {
    return this.#used;
  }
  get full(): boolean {
    return this.#used === this.#buf.length;
  }
  /** Copies as much of `chunk` (from `offset`) as fits; returns how many bytes it took. */
  take(chunk: Buffer, offset: number): number {
    const n = Math.min(chunk.length - offset, this.#buf.length - this.#used);
    chunk.copy(this.#buf, this.#used, offset, offset + n);
    this.#used += n;
    return n;
  }
  /** The filled bytes (a view; the buffer is reused after the part is uploaded). */
  view(): Buffer {
    return this.#buf.subarray(0, this.#used);
  }
  reset(): void {
    this.#used = 0;
  }
}

export interface S3VariantStoreOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Part size in bytes (tests use S3's minimum, the default). @default PART_BYTES */
  readonly partBytes?: number;
}

export class S3VariantStore implements VariantStore {
  readonly kind = 's3' as const;
  readonly canPresign = true;
  readonly client: S3Client;
  readonly bucket: string;
  readonly #partBytes: number;

  constructor(options: S3VariantStoreOptions) {
    if (typeof options?.bucket !== 'string' || options.bucket.length < 3) {
      throw new TypeError('S3VariantStore: bucket must be a bucket name');
    }
    this.client = options.client;
    this.bucket = options.bucket;
    this.#partBytes = options.partBytes ?? PART_BYTES;
    if (!Number.isSafeInteger(this.#partBytes) || this.#partBytes < 1) {
      throw new RangeError('partBytes must be a positive integer');
    }
  }

  #unavailable(error: unknown, what: string): StoreError {
    return new StoreError('ERR_STORE_UNAVAILABLE', s3Reason(error), `variant ${what} failed`, {
      cause: error,
    });
  }

  async head(key: string): Promise<StoredVariant | undefined> {
    checkKey(key);
    let r: HeadObjectCommandOutput;
    try {
      r = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (classifyS3Error(error) === 'missing') return undefined;
      throw this.#unavailable(error, 'head');
    }
    if (
      typeof r.ContentLength !== 'number' ||
      typeof r.ContentType !== 'string' ||
      r.ContentType === '' ||
      typeof r.CacheControl !== 'string' ||
      r.CacheControl === ''
    ) {
      return undefined;
    }
    return {
      key,
      size: r.ContentLength,
      contentType: r.ContentType,
      cacheControl: r.CacheControl,
      ...(r.ContentDisposition ? { contentDisposition: r.ContentDisposition } : {}),
    };
  }

  async get(key: string, range?: ByteRange): Promise<StoredBody | undefined> {
    checkKey(key);
    checkRange(range);
    try {
      const r = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
        }),
      );
      const stream = r.Body as Readable | undefined;
      if (stream === undefined) return undefined;
      return { type: 'stream', stream, length: r.ContentLength ?? 0 };
    } catch (error) {
      const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
      // 416 from the store: the object shrank under us; nothing of the range exists.
      if (e?.$metadata?.httpStatusCode === 416 || e?.name === 'InvalidRange') return undefined;
      if (classifyS3Error(error) === 'missing') return undefined;
      throw this.#unavailable(error, 'get');
    }
  }

  async put(
    key: string,
    chunks: AsyncIterable<Buffer>,
    metadata: VariantMetadata,
    options: PutOptions = {},
  ): Promise<StoredVariant> {
    checkKey(key);
    checkMetadata(metadata);
    const { signal } = options;
    if (signal?.aborted) throw aborted(signal.reason);
    const objectMeta = {
      Bucket: this.bucket,
      Key: key,
      ContentType: metadata.contentType,
      CacheControl: metadata.cacheControl,
      ...(metadata.contentDisposition !== undefined
        ? { ContentDisposition: metadata.contentDisposition }
        : {}),
    };
    const part = new PartBuffer(this.#partBytes);
    const parts: CompletedPart[] = [];
    let uploadId: string | undefined;
    let size = 0;
    const send = async <T>(command: unknown): Promise<T> => {
      try {
        return (await this.client.send(command as never, { abortSignal: signal })) as T;
      } catch (error) {
        if (signal?.aborted) throw aborted(error);
        throw new StoreError('ERR_STORE_WRITE', s3Reason(error), 'variant upload failed', {
          cause: error,
        });
      }
    };
    // With a patch, part 1 is held in memory until the end (parts may be uploaded in any order).
    let held: Buffer | undefined;
    const upload = async (PartNumber: number, body: Buffer) => {
      if (uploadId === undefined) {
        const created = await send<{ UploadId?: string }>(
          new CreateMultipartUploadCommand(objectMeta),
        );
        if (!created.UploadId) {
          throw new StoreError('ERR_STORE_WRITE', 'no_upload_id', 'store returned no UploadId');
        }
        uploadId = created.UploadId;
      }
      const r = await send<{ ETag?: string }>(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          PartNumber,
          Body: body,
          ContentLength: body.length,
        }),
      );
      parts.push({ PartNumber, ETag: r.ETag });
    };
    const flushPart = async () => {
      if (options.patch !== undefined && held === undefined && parts.length === 0) {
        held = Buffer.from(part.view());
      } else {
        await upload(parts.length + (held === undefined ? 1 : 2), part.view());
      }
      part.reset();
    };
    try {
      for await (const chunk of pullChunks(chunks, signal)) {
        let offset = 0;
        while (offset < chunk.length) {
          offset += part.take(chunk, offset);
          if (part.full) await flushPart();
        }
        size += chunk.length;
      }
      if (signal?.aborted) throw aborted(signal.reason);
      if (uploadId === undefined && held === undefined) {
        const body = part.view();
        const patch = headPatch(options, body.length);
        if (patch !== undefined) body.set(patch.data, patch.offset);
        await send(new PutObjectCommand({ ...objectMeta, Body: body, ContentLength: body.length }));
      } else {
        if (part.used > 0) await flushPart();
        if (held !== undefined) {
          const patch = headPatch(options, held.length);
          if (patch !== undefined) held.set(patch.data, patch.offset);
          await upload(1, held);
          parts.sort((a, b) => (a.PartNumber ?? 0) - (b.PartNumber ?? 0));
        }
        await send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
          }),
        );
      }
      return { key, size, ...metadata };
    } catch (error) {
      if (uploadId !== undefined) {
        // Without the caller's signal: an aborted put must still abort its upload.
        await this.client
          .send(
            new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }),
          )
          .catch(() => {}); // best effort; the lifecycle rule is the backstop
      }
      if (error instanceof StoreError) throw error;
      throw new StoreError('ERR_STORE_WRITE', s3Reason(error), 'variant upload failed', {
        cause: error,
      });
    }
  }

  async presign(key: string, ttlS: number): Promise<string> {
    checkKey(key);
    if (!Number.isSafeInteger(ttlS) || ttlS < 1 || ttlS > MAX_PRESIGN_S) {
      throw new RangeError(`presign ttl must be 1..${MAX_PRESIGN_S} s, got ${ttlS}`);
    }
    return getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
      expiresIn: ttlS,
    });
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (classifyS3Error(error) === 'missing') return;
      throw this.#unavailable(error, 'delete');
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /**
   * Boot: PUTs and DELETEs one small object under `BOOT_PROBE_PREFIX`, proving the endpoint,
   * credentials, bucket and write permission before any request is served.
   */
  async probe(): Promise<void> {
    const Key = `${BOOT_PROBE_PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`;
    try {
      await this.client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key, Body: Buffer.from('probe') }),
      );
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }));
    } catch (error) {
      throw new StoreError(
        'ERR_STORE_BOOT',
        s3Reason(error),
        `AP_VARIANT_STORE=s3://${this.bucket}: the boot probe (PUT then DELETE ${Key}) failed: ${s3Reason(error)}`,
        { cause: error },
      );
    }
  }
}
