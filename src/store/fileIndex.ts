/**
 * The bounded `file://` store's index: which variants it holds, how many bytes each takes on disk
 * (data plus metadata file), in least-recently-used order, and which of them are being read.
 * Plus the boot scan that rebuilds it from the directory.
 *
 * The index is memory only: a HIT moves its variant to the most recent end and writes nothing to
 * disk. After a restart, recency is what the files say: the later of the data file's mtime (its
 * commit: the rename keeps the staging file's last write) and its atime (whatever the mount
 * records: with Linux's default `relatime`, the first read after each commit or day). So a
 * restart keeps the order of commits and the coarse order of reads, and loses the fine one.
 *
 * ## Invariants
 * - **`bytes` is the sum of the entries' bytes**, kept by every verb.
 * - **A pinned key is never a victim**: `victims` skips it. Pins count open read streams and
 *   may name a key the index does not hold (a variant another node wrote).
 * - **`victims` decides and changes nothing**: the store removes each victim when its files are
 *   gone, under its commit lock (`file.ts`).
 * - **The scan's time is bounded by the number of files**, not their size: two `readdir` levels
 *   and one `stat` per file, `SCAN_CONCURRENCY` at a time; no file is opened.
 *
 * ## Races
 * None here: the index is synchronous; `file.ts` orders it against the disk.
 *
 * ## Events
 * None; `file.ts` publishes evictions.
 */
import type { Stats } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isVariantKey } from './types.js';

/** The fan-out directory a key's files live in: its first two characters, `_`-padded. */
export function fanOutOf(key: string): string {
  return key.slice(0, 2).padEnd(2, '_');
}

/** `stat` calls the boot scan keeps in flight. */
export const SCAN_CONCURRENCY = 32;
/** Suffix of a committed variant's metadata file beside its data file. */
export const META_SUFFIX = '.meta';

interface Entry {
  readonly bytes: number;
}

export class VariantIndex {
  readonly maxBytes: number;
  /** Insertion order is recency order: the first key is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  readonly #pins = new Map<string, number>();
  #bytes = 0;

  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) {
      throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    }
    this.maxBytes = maxBytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** Keys from least to most recently used (tests, diagnostics). */
  keys(): string[] {
    return [...this.#entries.keys()];
  }

  /** Records `key` as holding `bytes`, most recently used; returns what it held before. */
  set(key: string, bytes: number): number | undefined {
    const before = this.delete(key);
    this.#entries.set(key, { bytes });
    this.#bytes += bytes;
    return before;
  }

  /** Forgets `key`; returns the bytes it held. */
  delete(key: string): number | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
    return entry.bytes;
  }

  /** Moves `key` to the most recent end, if held. */
  touch(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
  }

  pin(key: string): void {
    this.#pins.set(key, (this.#pins.get(key) ?? 0) + 1);
  }

  unpin(key: string): void {
    const n = this.#pins.get(key) ?? 0;
    if (n <= 1) this.#pins.delete(key);
    else this.#pins.set(key, n - 1);
  }

  pinned(key: string): boolean {
    return this.#pins.has(key);
  }

  /**
   * The least recently used keys to remove so that `key` can hold `bytes` within the bound
   * (replacing what `key` holds now), skipping pinned keys and `key` itself; `undefined` when
   * even removing every other unpinned key would not make room. With `key` undefined: the keys to
   * remove until the index fits its bound (the boot scan, after a bound was lowered).
   */
  victims(key: string | undefined, bytes = 0): string[] | undefined {
    const own = key === undefined ? 0 : (this.#entries.get(key)?.bytes ?? 0);
    let held = this.#bytes - own;
    const chosen: string[] = [];
    for (const [k, entry] of this.#entries) {
      if (held + bytes <= this.maxBytes) break;
      if (k === key || this.#pins.has(k)) continue;
      chosen.push(k);
      held -= entry.bytes;
    }
    return held + bytes <= this.maxBytes ? chosen : undefined;
  }
}

/** A committed variant the boot scan found. */
export interface ScannedVariant {
  readonly key: string;
  /** Data file plus metadata file. */
  readonly bytes: number;
  /** The later of the data file's mtime and atime, in ms. */
  readonly lastUsedMs: number;
}

function isMissing(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

async function statOrMissing(path: string): Promise<Stats | undefined> {
  try {
    return await stat(path);
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** Runs `fn` over `items`, at most `limit` at once; results in input order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>) {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return out;
}

/**
 * Every committed variant under `root`, least recently used first: each two-character fan-out
 * directory (staging, `tmp`, has three), each key with both its data and its `.meta` file. Anything else
 * (interrupted commits, foreign files) is left alone and not counted. A file that vanishes
 * during the scan is skipped.
 */
export async function scanVariants(root: string): Promise<ScannedVariant[]> {
  const dirs = (await names(root)).filter((d) => d.length === 2);
  const candidates: { key: string; dir: string }[] = [];
  for (const dir of dirs) {
    const inDir = new Set(await names(join(root, dir)));
    for (const name of inDir) {
      if (isVariantKey(name) && fanOutOf(name) === dir && inDir.has(`${name}${META_SUFFIX}`)) {
        candidates.push({ key: name, dir: join(root, dir) });
      }
    }
  }
  const found = await mapLimit(candidates, SCAN_CONCURRENCY, async ({ key, dir }) => {
    const [data, meta] = await Promise.all([
      statOrMissing(join(dir, key)),
      statOrMissing(join(dir, `${key}${META_SUFFIX}`)),
    ]);
    if (data === undefined || meta === undefined || !data.isFile()) return undefined;
    const variant: ScannedVariant = {
      key,
      bytes: data.size + meta.size,
      lastUsedMs: Math.max(data.mtimeMs, data.atimeMs),
    };
    return variant;
  });
  return found
    .filter((v): v is ScannedVariant => v !== undefined)
    .sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
