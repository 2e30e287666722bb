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
 *   read whole.
 *
 * ## Races
 * - *Two nodes sharing one directory*: a booting node's sweep removes only staging whose writer
 *   is gone from this host, or that is older than an hour, so a node booting beside a live one
 *   neither breaks its writes nor its boot probe. A sweep that still removes a live writer's file
 *   (another host, an hour-long stall) fails that put; it never commits a torn file.
 * - *Delete racing head/get*: data goes first, so a reader sees "absent", never data without meta.
 *
 * ## Events
 * None; the Tee reports write failures.
 */
import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pullChunks } from './channel.js';
import {
  type ByteRange,
  checkKey,
  checkMetadata,
  checkRange,
  type PutOptions,
  reasonOf,
  type StoredBody,
  type StoredVariant,
  StoreError,
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
}

export class FileVariantStore implements VariantStore {
  readonly kind = 'file' as const;
  readonly canPresign = false;
  readonly root: string;
  readonly stagingDir: string;

  constructor(options: FileVariantStoreOptions) {
    if (typeof options?.root !== 'string' || !options.root.startsWith('/')) {
      throw new TypeError('FileVariantStore: root must be an absolute path');
    }
    this.root = options.root;
    this.stagingDir = join(options.root, STAGING_DIR);
  }

  #dir(key: string): string {
    return join(this.root, key.slice(0, 2).padEnd(2, '_'));
  }

  /** Where a committed variant's bytes and metadata live. */
  paths(key: string): { data: string; meta: string } {
    checkKey(key);
    const dir = this.#dir(key);
    return { data: join(dir, key), meta: join(dir, `${key}.meta`) };
  }

  async head(key: string): Promise<StoredVariant | undefined> {
    const { data, meta } = this.paths(key);
    const [metaText, info] = await Promise.allSettled([readFile(meta, 'utf8'), stat(data)]);
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
      throw new StoreError('ERR_STORE_UNAVAILABLE', reasonOf(error), 'variant read failed', {
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
      }
      if (signal?.aborted) throw aborted(signal.reason);
      await handle.datasync();
      await handle.close();
      handle = undefined;
      const record: MetaFile = {
        v: META_VERSION,
        size,
        contentType: metadata.contentType,
        cacheControl: metadata.cacheControl,
        ...(metadata.contentDisposition !== undefined
          ? { contentDisposition: metadata.contentDisposition }
          : {}),
      };
      handle = await open(metaTmp, 'wx');
      await writeAll(handle, Buffer.from(JSON.stringify(record)));
      await handle.datasync();
      await handle.close();
      handle = undefined;
      if (signal?.aborted) throw aborted(signal.reason);
      await this.#placeMeta(key, metaTmp, meta);
      await rename(dataTmp, data); // the commit point
      return { key, size, ...metadata };
    } catch (error) {
      await handle?.close().catch(() => {});
      await Promise.all([rm(dataTmp, { force: true }), rm(metaTmp, { force: true })]).catch(
        () => {},
      );
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
    const { data, meta } = this.paths(key);
    await rm(data, { force: true });
    await rm(meta, { force: true });
    await rmdir(this.#dir(key)).catch(() => {}); // only if now empty; busy or shared is fine
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
