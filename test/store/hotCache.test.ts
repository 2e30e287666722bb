/**
 * The bounded hot-variant cache over a real file store: a full read loads a small variant once
 * (shared by concurrent readers) and later heads and reads never touch the disk; ranges are
 * slices; resident bytes never exceed the budget (least recently used goes first); oversized
 * variants, ranges of cold ones and short bodies are streamed or returned without being kept; a
 * delete (an operator's purge) overtaking a load leaves nothing of it in memory.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileVariantStore } from '../../src/store/file.js';
import { HotVariantCache } from '../../src/store/hotCache.js';
import type { ByteRange } from '../../src/store/types.js';
import { chunksOf, META, readBody } from './helpers.js';

let root: string;
let disk: FileVariantStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'ap-hotcache-'));
  disk = new FileVariantStore({ root });
  await disk.sweepStaging();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function stored(key: string, size: number): Promise<Buffer> {
  const data = randomBytes(size);
  await disk.put(key, chunksOf(data), META);
  return data;
}

describe('HotVariantCache', () => {
  it('loads a small variant once; later heads and reads are served from memory', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 1_000_000 });
    const data = await stored('a', 100_000);
    const head = await cache.head('a');
    expect(head?.size).toBe(100_000);
    const first = await cache.get('a');
    expect(first?.type).toBe('buffer');
    expect((await readBody(first)).equals(data)).toBe(true);
    expect(cache.stats()).toMatchObject({ entries: 1, bytes: 100_000, loads: 1 });

    // Gone from disk: still served, because a variant never changes.
    await rm(disk.paths('a').data);
    expect(await cache.head('a')).toEqual(head);
    const again = await cache.get('a');
    expect((await readBody(again)).equals(data)).toBe(true);
    const range = await cache.get('a', { start: 5, end: 14 });
    expect(range?.type === 'buffer' && range.data.equals(data.subarray(5, 15))).toBe(true);
    expect(cache.peek('a')?.data.equals(data)).toBe(true);
    expect(cache.stats().hits).toBe(3);
  });

  it('concurrent readers of a cold variant share one load', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 1_000_000, maxEntryBytes: 500_000 });
    const data = await stored('b', 300_000);
    await cache.head('b');
    const bodies = await Promise.all(Array.from({ length: 8 }, () => cache.get('b')));
    for (const b of bodies) expect((await readBody(b)).equals(data)).toBe(true);
    expect(cache.stats().loads).toBe(1);
  });

  it('keeps resident bytes within the budget, evicting the least recently used', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 3_000, maxEntryBytes: 1_000 });
    for (const k of ['k1', 'k2', 'k3']) {
      await stored(k, 1_000);
      await cache.head(k);
      await cache.get(k);
    }
    expect(cache.stats()).toMatchObject({ entries: 3, bytes: 3_000 });
    cache.peek('k1'); // k1 is now the most recent; k2 the least
    await stored('k4', 1_000);
    await cache.head('k4');
    await cache.get('k4');
    const s = cache.stats();
    expect(s.bytes).toBeLessThanOrEqual(3_000);
    expect(s.evictions).toBe(1);
    expect(cache.peek('k2')).toBeUndefined();
    expect(cache.peek('k1')).toBeDefined();
    expect(cache.peek('k4')).toBeDefined();
  });

  it('streams variants over the entry limit and ranges of cold variants, keeping neither', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 80_000, maxEntryBytes: 10_000 });
    const big = await stored('big', 50_000);
    await cache.head('big');
    const body = await cache.get('big');
    expect(body?.type).toBe('stream');
    expect((await readBody(body)).equals(big)).toBe(true);
    const small = await stored('small', 5_000);
    await cache.head('small');
    const part = await cache.get('small', { start: 0, end: 99 });
    expect(part?.type).toBe('stream');
    expect((await readBody(part)).equals(small.subarray(0, 100))).toBe(true);
    expect(cache.stats().entries).toBe(0);
  });

  it('returns a short body as is and never keeps it', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 100_000 });
    await stored('short', 10_000);
    const head = await cache.head('short');
    await truncate(disk.paths('short').data, 4_000); // replaced under us after the lookup
    const body = await cache.get('short');
    expect(body?.type === 'buffer' && body.data.length).toBe(4_000);
    expect(head?.size).toBe(10_000);
    expect(cache.stats()).toMatchObject({ entries: 0, bytes: 0, loadingBytes: 0 });
  });

  it('a variant that vanished before its load is a miss, and nothing is reserved', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 100_000 });
    await stored('gone', 1_000);
    await cache.head('gone');
    await disk.delete('gone');
    expect(await cache.get('gone')).toBeUndefined();
    expect(cache.stats()).toMatchObject({ entries: 0, loadingBytes: 0 });
  });

  it('a delete while the variant loads: its waiters get the bytes, memory keeps none', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // The store underneath reads the old body, then is held until the delete has finished.
    const slow = new Proxy(disk, {
      get(target, prop) {
        if (prop === 'get') {
          return async (key: string, range?: ByteRange) => {
            const body = await target.get(key, range);
            await gate;
            return body;
          };
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const cache = new HotVariantCache(slow, { maxBytes: 100_000 });
    const data = await stored('p', 1_000);
    await cache.head('p');
    const loading = cache.get('p');
    await cache.delete('p');
    open();
    expect((await readBody(await loading)).equals(data)).toBe(true);
    expect(cache.peek('p')).toBeUndefined();
    expect(cache.stats()).toMatchObject({ entries: 0, bytes: 0, loadingBytes: 0 });
    expect(await cache.head('p')).toBeUndefined();
  });

  it('delete evicts at once; maxBytes 0 is a pass-through', async () => {
    const cache = new HotVariantCache(disk, { maxBytes: 100_000 });
    await stored('d', 1_000);
    await cache.head('d');
    await cache.get('d');
    await cache.delete('d');
    expect(cache.peek('d')).toBeUndefined();
    expect(await cache.head('d')).toBeUndefined();

    const off = new HotVariantCache(disk, { maxBytes: 0 });
    await stored('e', 1_000);
    await off.head('e');
    expect((await off.get('e'))?.type).toBe('stream');
    expect(off.stats().entries).toBe(0);
    expect(() => new HotVariantCache(disk, { maxBytes: -1 })).toThrow(RangeError);
    expect(() => new HotVariantCache(disk, { maxBytes: 10, maxEntryBytes: 11 })).toThrow(
      RangeError,
    );
  });
});
