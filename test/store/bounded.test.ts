/**
 * The bounded file:// store (`maxBytes`, `AP_VARIANT_STORE_MAX_BYTES`) on a real temporary
 * directory, no mocks. Proves: held bytes never pass the bound and the evicted set is exactly a
 * plain LRU model's, over random put/head/get sequences (fast-check); concurrent puts of one key
 * and reads leave the index equal to the disk; a variant being read is never evicted and its
 * bytes are delivered whole, and a bound full of variants being read refuses the commit; a
 * variant larger than the bound is refused early, counted and reported once; the boot scan
 * rebuilds the index in recency order from mtime/atime, ignores what is not a committed variant,
 * and evicts down to a lowered bound; the hot cache's HITs count as reads; the boot probe never
 * evicts; the metrics read what the store did; a soak of thousands of puts ends with the index
 * equal to the disk and no staging.
 */
import diagnostics from 'node:diagnostics_channel';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ChunkChannel } from '../../src/store/channel.js';
import { FileVariantStore, STAGING_DIR, storedBytes } from '../../src/store/file.js';
import { scanVariants, VariantIndex } from '../../src/store/fileIndex.js';
import { HotVariantCache } from '../../src/store/hotCache.js';
import { createVariantStore } from '../../src/store/index.js';
import type { StoredBody } from '../../src/store/types.js';
import {
  VARIANT_STORE_CHANNELS,
  type VariantStoreEviction,
  type VariantStoreOversize,
} from '../../src/telemetry/channels.js';
import { Metrics } from '../../src/telemetry/metrics.js';
import { chunksOf, META } from './helpers.js';

const roots: string[] = [];
async function freshRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'ap-bounded-'));
  roots.push(root);
  return root;
}

let evictions: VariantStoreEviction[] = [];
let oversize: VariantStoreOversize[] = [];
const onEviction = (m: unknown) => evictions.push(m as VariantStoreEviction);
const onOversize = (m: unknown) => oversize.push(m as VariantStoreOversize);

beforeEach(() => {
  evictions = [];
  oversize = [];
  diagnostics.subscribe(VARIANT_STORE_CHANNELS.eviction, onEviction);
  diagnostics.subscribe(VARIANT_STORE_CHANNELS.oversize, onOversize);
});

afterEach(async () => {
  diagnostics.unsubscribe(VARIANT_STORE_CHANNELS.eviction, onEviction);
  diagnostics.unsubscribe(VARIANT_STORE_CHANNELS.oversize, onOversize);
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

/** The bytes of `key` at `version`: distinct per key and version, so a mix-up shows. */
function bytesOf(key: string, size: number, version = 0): Buffer {
  const out = Buffer.alloc(size);
  let seed = [...`${key}:${version}`].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
  for (let i = 0; i < size; i++) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    out[i] = seed >>> 24;
  }
  return out;
}

/**
 * Counts the read streams open per key, and every eviction of a key with one open: the store
 * must never evict a variant being read. (The count opens after `get` resolves and closes on the
 * stream's close, inside the store's own pin, so a count above 0 is a pin the store holds.)
 */
function watchReads() {
  const open = new Map<string, number>();
  const violations: string[] = [];
  const onEvict = (m: unknown) => {
    const { key } = m as VariantStoreEviction;
    if ((open.get(key) ?? 0) > 0) violations.push(key);
  };
  diagnostics.subscribe(VARIANT_STORE_CHANNELS.eviction, onEvict);
  return {
    violations,
    opened(key: string, body: StoredBody | undefined) {
      if (body?.type !== 'stream' || body.stream.closed) return;
      open.set(key, (open.get(key) ?? 0) + 1);
      body.stream.once('close', () => open.set(key, open.get(key)! - 1));
    },
    stop: () => diagnostics.unsubscribe(VARIANT_STORE_CHANNELS.eviction, onEvict),
  };
}

/** Reads a body whole and waits for its stream to close (the store unpins on close). */
async function readClosed(body: StoredBody | undefined): Promise<Buffer | undefined> {
  if (body === undefined) return undefined;
  if (body.type === 'buffer') return body.data;
  const parts: Buffer[] = [];
  const closed = body.stream.closed ? Promise.resolve() : once(body.stream, 'close');
  for await (const c of body.stream as AsyncIterable<Buffer>) parts.push(c);
  await closed;
  return Buffer.concat(parts);
}

/** Committed files on disk (fan-out directories only): key → data + meta bytes. */
async function onDisk(root: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const dir of await readdir(root)) {
    if (dir === STAGING_DIR) continue;
    for (const name of await readdir(join(root, dir))) {
      const key = name.replace(/\.meta$/, '');
      out.set(key, (out.get(key) ?? 0) + (await stat(join(root, dir, name))).size);
    }
  }
  return out;
}

/** A bounded store on `root`, swept and scanned as `createVariantStore` leaves it. */
async function bounded(root: string, maxBytes: number): Promise<FileVariantStore> {
  const store = new FileVariantStore({ root, maxBytes });
  await store.sweepStaging();
  await store.scan();
  return store;
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** The index and the disk agree, within the bound, with no staging left. */
async function expectConsistent(store: FileVariantStore) {
  const disk = await onDisk(store.root);
  const usage = store.usage()!;
  expect(usage.bytes).toBe(sum(disk));
  expect(usage.bytes).toBeLessThanOrEqual(store.maxBytes);
  expect(usage.variants).toBe(disk.size);
  expect(new Set(store.heldKeys())).toEqual(new Set(disk.keys()));
  expect(await store.staging()).toEqual([]);
  return { disk, usage };
}

/** A plain LRU over stored bytes: what the bounded store must do. */
class LruModel {
  readonly order = new Map<string, { bytes: number; data: Buffer }>();
  readonly evicted: string[] = [];
  constructor(readonly maxBytes: number) {}
  get held() {
    return [...this.order.values()].reduce((a, e) => a + e.bytes, 0);
  }
  put(key: string, data: Buffer): 'stored' | 'too_large' {
    const bytes = storedBytes(data.length, META);
    if (bytes > this.maxBytes) return 'too_large';
    let held = this.held - (this.order.get(key)?.bytes ?? 0);
    for (const [k, e] of this.order) {
      if (held + bytes <= this.maxBytes) break;
      if (k === key) continue;
      this.order.delete(k);
      this.evicted.push(k);
      held -= e.bytes;
    }
    this.order.delete(key);
    this.order.set(key, { bytes, data });
    return 'stored';
  }
  read(key: string): Buffer | undefined {
    const e = this.order.get(key);
    if (e === undefined) return undefined;
    this.order.delete(key);
    this.order.set(key, e);
    return e.data;
  }
}

describe('VariantIndex', () => {
  it('chooses least recently used victims, skipping pins and the key itself', () => {
    const index = new VariantIndex(100);
    index.set('a', 40);
    index.set('b', 30);
    index.set('c', 30);
    index.touch('a'); // b, c, a
    expect(index.victims('d', 30)).toEqual(['b']);
    index.pin('b');
    expect(index.victims('d', 30)).toEqual(['c']);
    expect(index.victims('b', 50)).toEqual(['c']); // b replaces itself: 100 - 30 + 50 - 30 = 90
    index.pin('c');
    index.pin('a');
    expect(index.victims('d', 1)).toBeUndefined();
    index.unpin('a');
    expect(index.victims('d', 1)).toEqual(['a']);
    expect(index.victims(undefined)).toEqual([]);
    expect(index.bytes).toBe(100);
    expect(index.set('a', 10)).toBe(40);
    expect(index.bytes).toBe(70);
    expect(() => new VariantIndex(0)).toThrow(RangeError);
  });
});

describe('FileVariantStore with a bound', () => {
  it('matches a plain LRU model over random put/head/get sequences (bound, evictions, bytes)', async () => {
    const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
    const MAX = 4_000;
    const op = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({
          type: fc.constant('put' as const),
          key: fc.constantFrom(...KEYS),
          size: fc.oneof(
            { weight: 9, arbitrary: fc.integer({ min: 0, max: 1_600 }) },
            { weight: 1, arbitrary: fc.integer({ min: 3_850, max: 4_500 }) }, // near and past
          ),
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          type: fc.constantFrom('get' as const, 'head' as const),
          key: fc.constantFrom(...KEYS),
        }),
      },
    );
    let runs = 0;
    let evictedTotal = 0;
    let refusedTotal = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 15, maxLength: 40 }), async (ops) => {
        runs += 1;
        evictions = [];
        const root = await freshRoot();
        const store = await bounded(root, MAX);
        const model = new LruModel(MAX);
        let version = 0;
        for (const o of ops) {
          if (o.type === 'put') {
            const data = bytesOf(o.key, o.size, ++version);
            const expected = model.put(o.key, data);
            const outcome = await store.put(o.key, chunksOf(data, 700), META).then(
              () => 'stored',
              (e: { reason?: string }) => e.reason,
            );
            expect(outcome).toBe(expected);
            if (outcome === 'too_large') refusedTotal += 1;
          } else if (o.type === 'get') {
            const got = await readClosed(await store.get(o.key));
            const want = model.read(o.key);
            if (want === undefined) expect(got).toBeUndefined();
            else expect(got?.equals(want)).toBe(true);
          } else {
            const head = await store.head(o.key);
            const want = model.read(o.key);
            expect(head?.size).toBe(want?.length);
          }
          expect(store.usage()!.bytes).toBeLessThanOrEqual(MAX);
          expect(store.usage()!.bytes).toBe(model.held);
          expect(store.heldKeys()).toEqual([...model.order.keys()]);
        }
        expect(evictions.map((e) => e.key)).toEqual(model.evicted);
        evictedTotal += evictions.length;
        await expectConsistent(store);
        await rm(root, { recursive: true, force: true });
      }),
      { numRuns: 60 },
    );
    // The sequences really did evict and refuse (the property is not vacuous).
    expect(evictedTotal).toBeGreaterThan(50);
    expect(refusedTotal).toBeGreaterThan(5);
    console.info(
      `[bounded] LRU model: ${runs} runs, ${evictedTotal} evictions, ${refusedTotal} refused`,
    );
  }, 120_000);

  it('concurrent puts (the same keys at once) and reads: whole bodies, index equals disk', async () => {
    const root = await freshRoot();
    const store = await bounded(root, 60_000);
    const keys = Array.from({ length: 24 }, (_, i) => `c${i}`);
    const sizeOf = (key: string) => 2_000 + Number(key.slice(1)) * 300;
    let whole = 0;
    let misses = 0;
    for (const key of keys) await store.put(key, chunksOf(bytesOf(key, sizeOf(key))), META);
    const reads = watchReads();
    const work: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) {
      const key = keys[(i * 7) % keys.length]!;
      const data = bytesOf(key, sizeOf(key));
      if (i % 3 === 2) {
        work.push(
          store.get(key).then(async (body) => {
            reads.opened(key, body);
            const got = await readClosed(body);
            if (got === undefined) misses += 1;
            else {
              expect(got.equals(data)).toBe(true);
              whole += 1;
            }
          }),
        );
      } else {
        work.push(store.put(key, chunksOf(data, 512), META).then(() => {}));
      }
    }
    await Promise.all(work);
    reads.stop();
    expect(reads.violations).toEqual([]);
    const { usage } = await expectConsistent(store);
    expect(evictions.length).toBeGreaterThan(0);
    expect(whole).toBeGreaterThan(0);
    for (const e of evictions) expect(e.heldBytes).toBeLessThanOrEqual(60_000);
    console.info(
      `[bounded] concurrent: 24 puts, then 200 puts and 100 reads at once (${whole} whole, ${misses} misses), ${evictions.length} evictions, ${usage.variants} held, ${usage.bytes} bytes`,
    );
  });

  it('never evicts a variant being read: its bytes arrive whole, the next LRU goes instead', async () => {
    const root = await freshRoot();
    const each = storedBytes(100_000, META);
    const store = await bounded(root, 3 * each);
    const big = bytesOf('reading', 100_000);
    await store.put('reading', chunksOf(big), META);
    await store.put('b', chunksOf(bytesOf('b', 100_000)), META);
    await store.put('c', chunksOf(bytesOf('c', 100_000)), META);
    const body = await store.get('reading');
    if (body?.type !== 'stream') throw new Error('expected a stream');
    // Read a little, then stall with the descriptor open.
    const first = await new Promise<Buffer>((resolve) =>
      body.stream.once('data', (chunk: Buffer) => {
        body.stream.pause();
        resolve(chunk);
      }),
    );
    // 'reading' is now the most recent; make it the least recent, then force two evictions.
    store.touch('b');
    store.touch('c');
    expect(store.heldKeys()).toEqual(['reading', 'b', 'c']);
    await store.put('d', chunksOf(bytesOf('d', 100_000)), META);
    await store.put('e', chunksOf(bytesOf('e', 100_000)), META);
    expect(evictions.map((e) => e.key)).toEqual(['b', 'c']);
    expect(store.heldKeys()).toEqual(['reading', 'd', 'e']);
    expect((await stat(store.paths('reading').data)).size).toBe(100_000);
    // Still pinned: the next commit passes over it again.
    await store.put('f', chunksOf(bytesOf('f', 100_000)), META);
    expect(evictions.map((e) => e.key)).toEqual(['b', 'c', 'd']);
    const rest = await readClosed(body);
    expect(Buffer.concat([first, rest!]).equals(big)).toBe(true);
    // Closed: unpinned, and the least recently used, so the next commit takes it.
    await store.put('g', chunksOf(bytesOf('g', 100_000)), META);
    expect(evictions.at(-1)?.key).toBe('reading');
    await expectConsistent(store);
  });

  it('a read racing an eviction is a miss, never a read of a file being evicted', async () => {
    const root = await freshRoot();
    const each = storedBytes(4_000, META);
    const store = await bounded(root, 8 * each);
    const reads = watchReads();
    let whole = 0;
    let missed = 0;
    let racing: Promise<void>[] = [];
    let victims: string[] = [];
    // On the first eviction of a commit that evicts eight, read all eight at once.
    const onEvict = () => {
      if (racing.length > 0) return;
      racing = victims.map((v) =>
        store.get(v).then(async (body) => {
          reads.opened(v, body);
          const got = await readClosed(body);
          if (got === undefined) missed += 1;
          else {
            expect(got.equals(bytesOf(v, 4_000))).toBe(true);
            whole += 1;
          }
        }),
      );
    };
    diagnostics.subscribe(VARIANT_STORE_CHANNELS.eviction, onEvict);
    try {
      for (let round = 0; round < 10; round++) {
        victims = [];
        racing = [];
        const keys = Array.from({ length: 8 }, (_, i) => `r${round}v${i}`);
        for (const v of keys) await store.put(v, chunksOf(bytesOf(v, 4_000)), META);
        victims = keys;
        await store.put(`r${round}big`, chunksOf(bytesOf('big', 8 * 4_000 - 200)), META);
        await Promise.all(racing);
        expect(racing).toHaveLength(8);
        await expectConsistent(store);
      }
    } finally {
      diagnostics.unsubscribe(VARIANT_STORE_CHANNELS.eviction, onEvict);
      reads.stop();
    }
    expect(reads.violations).toEqual([]);
    expect({ whole, missed }).toEqual({ whole: 0, missed: 80 });
  });

  it('a bound filled by variants being read refuses the commit (store_full) and evicts nothing', async () => {
    const root = await freshRoot();
    const each = storedBytes(50_000, META);
    const store = await bounded(root, 2 * each + 10);
    await store.put('a', chunksOf(bytesOf('a', 50_000)), META);
    await store.put('b', chunksOf(bytesOf('b', 50_000)), META);
    const ra = await store.get('a');
    const rb = await store.get('b');
    await expect(store.put('c', chunksOf(bytesOf('c', 50_000)), META)).rejects.toMatchObject({
      code: 'ERR_STORE_WRITE',
      reason: 'store_full',
    });
    expect(evictions).toEqual([]);
    expect(await store.head('c')).toBeUndefined();
    expect((await readClosed(ra))!.equals(bytesOf('a', 50_000))).toBe(true);
    expect((await readClosed(rb))!.equals(bytesOf('b', 50_000))).toBe(true);
    await store.put('c', chunksOf(bytesOf('c', 50_000)), META);
    expect(evictions.map((e) => e.key)).toEqual(['a']);
    await expectConsistent(store);
  });

  it('a variant larger than the bound is refused as soon as it passes it, reported once', async () => {
    const root = await freshRoot();
    const store = await bounded(root, 100_000);
    await store.put('small', chunksOf(bytesOf('small', 1_000)), META);
    const channel = new ChunkChannel();
    let pushed = 0;
    // Handled from the start: the put rejects while chunks are still being pushed.
    const put = store.put('huge', channel, META).catch((error: unknown) => error);
    for (let i = 0; i < 40; i++) {
      channel.push(Buffer.alloc(10_000, 1));
      pushed += 10_000;
      await new Promise((r) => setImmediate(r));
    }
    channel.end();
    expect(await put).toMatchObject({ code: 'ERR_STORE_TOO_LARGE', reason: 'too_large' });
    expect(oversize).toHaveLength(1);
    expect(oversize[0]).toMatchObject({ key: 'huge', maxBytes: 100_000, first: true });
    expect(oversize[0]!.bytes).toBeGreaterThan(100_000);
    expect(oversize[0]!.bytes).toBeLessThan(pushed); // it stopped reading early
    // Data under the bound but data + metadata over it: refused at the end, not first any more.
    const edge = 100_000 - storedBytes(0, META) + 1;
    await expect(store.put('edge', chunksOf(bytesOf('edge', edge)), META)).rejects.toMatchObject({
      code: 'ERR_STORE_TOO_LARGE',
    });
    expect(oversize.map((o) => o.first)).toEqual([true, false]);
    expect(evictions).toEqual([]); // nothing was evicted for them
    expect(store.heldKeys()).toEqual(['small']);
    await expectConsistent(store);
  });

  it('delete and a variant removed behind its back both leave the index equal to the disk', async () => {
    const root = await freshRoot();
    const store = await bounded(root, 1_000_000);
    for (const k of ['x1', 'x2', 'x3']) await store.put(k, chunksOf(bytesOf(k, 5_000)), META);
    await store.delete('x1');
    await rm(store.paths('x2').data); // an operator, or another node
    expect(await store.get('x2')).toBeUndefined();
    await rm(store.paths('x3').data);
    expect(await store.head('x3')).toBeUndefined();
    await rm(store.paths('x3').meta);
    expect(store.heldKeys()).toEqual([]);
    await rm(store.paths('x2').meta);
    await expectConsistent(store);
  });

  it('the hot cache tells the store of the HITs it serves from memory', async () => {
    const root = await freshRoot();
    const each = storedBytes(10_000, META);
    const inner = await bounded(root, 3 * each);
    const hot = new HotVariantCache(inner, { maxBytes: 1_000_000, maxEntryBytes: 100_000 });
    for (const k of ['h', 'm1', 'm2']) await hot.put(k, chunksOf(bytesOf(k, 10_000)), META);
    await hot.head('h');
    await readClosed(await hot.get('h')); // loaded into memory; the store saw this read
    inner.touch('m1');
    inner.touch('m2');
    expect(inner.heldKeys()).toEqual(['h', 'm1', 'm2']);
    expect(hot.peek('h')).toBeDefined(); // a HIT from memory only
    expect(inner.heldKeys()).toEqual(['m1', 'm2', 'h']);
    await hot.put('n', chunksOf(bytesOf('n', 10_000)), META);
    expect(evictions.map((e) => e.key)).toEqual(['m1']);
    expect(hot.usage()).toEqual(inner.usage());
  });
});

describe('the boot scan', () => {
  /** Commits `keys` through an unbounded store, then dates each data file `i` minutes apart. */
  async function seed(root: string, keys: readonly string[], size = 2_000) {
    const plain = new FileVariantStore({ root });
    await plain.sweepStaging();
    const base = Date.now() / 1000 - 86_400;
    for (const [i, key] of keys.entries()) {
      await plain.put(key, chunksOf(bytesOf(key, size)), META);
      const t = base + i * 60;
      await utimes(plain.paths(key).data, t, t);
    }
    return plain;
  }

  it('rebuilds the index from the directory, least recently used first by mtime and atime', async () => {
    const root = await freshRoot();
    const plain = await seed(root, ['s0', 's1', 's2', 's3']);
    // s1 was read after everything else was written (atime later than every mtime).
    const late = Date.now() / 1000 - 3_600;
    const { mtime } = await stat(plain.paths('s1').data);
    await utimes(plain.paths('s1').data, late, mtime);
    // Not committed variants: staging, an interrupted commit (meta only), a foreign file.
    await writeFile(join(root, STAGING_DIR, 's9.1-aa.data'), 'staging');
    await mkdir(join(root, 'zz'), { recursive: true });
    await writeFile(join(root, 'zz', 'zz1.meta'), '{}');
    await writeFile(join(root, 'zz', 'README'), 'foreign');
    await writeFile(join(root, 's0', 'misplaced'), 'x');
    await writeFile(join(root, 's0', 'misplaced.meta'), 'x');

    const store = await bounded(root, 1_000_000);
    expect(store.heldKeys()).toEqual(['s0', 's2', 's3', 's1']);
    const each = storedBytes(2_000, META);
    expect(store.usage()).toEqual({ bytes: 4 * each, maxBytes: 1_000_000, variants: 4 });
    expect(evictions).toEqual([]);
  });

  it('evicts down to a lowered bound, oldest first', async () => {
    const root = await freshRoot();
    await seed(root, ['t0', 't1', 't2', 't3', 't4']);
    const each = storedBytes(2_000, META);
    const store = await bounded(root, 2 * each + 1);
    expect(evictions.map((e) => e.key)).toEqual(['t0', 't1', 't2']);
    expect(store.heldKeys()).toEqual(['t3', 't4']);
    await expectConsistent(store);
  });

  it('counts thousands of variants in bounded time', async () => {
    const root = await freshRoot();
    const N = 5_000;
    // Written directly (the layout the store commits), to time the scan and not the seeding.
    const body = Buffer.alloc(1_000, 7);
    const meta = Buffer.from(
      JSON.stringify({
        v: 1,
        size: 1_000,
        contentType: META.contentType,
        cacheControl: META.cacheControl,
      }),
    );
    const keys = Array.from(
      { length: N },
      (_, i) => `${(i * 2_654_435_761).toString(16).padStart(8, '0')}${i}`,
    );
    for (let i = 0; i < N; i += 250) {
      await Promise.all(
        keys.slice(i, i + 250).map(async (key) => {
          const dir = join(root, key.slice(0, 2));
          await mkdir(dir, { recursive: true });
          await writeFile(join(dir, key), body);
          await writeFile(join(dir, `${key}.meta`), meta);
        }),
      );
    }
    const started = performance.now();
    const found = await scanVariants(root);
    const scanMs = performance.now() - started;
    expect(found).toHaveLength(N);
    const store = new FileVariantStore({ root, maxBytes: 100 * 1024 * 1024 });
    const t2 = performance.now();
    await store.scan();
    const storeMs = performance.now() - t2;
    expect(store.usage()).toEqual({
      bytes: N * (1_000 + meta.length),
      maxBytes: 100 * 1024 * 1024,
      variants: N,
    });
    expect(scanMs).toBeLessThan(20_000);
    console.info(
      `[bounded] boot scan of ${N} variants (${N * 2} files, 256 fan-out directories): ${scanMs.toFixed(0)} ms; through the store: ${storeMs.toFixed(0)} ms`,
    );
  }, 120_000);
});

describe('createVariantStore with AP_VARIANT_STORE_MAX_BYTES', () => {
  it('scans at boot, reports usage through the hot cache, and its probe evicts nothing', async () => {
    const root = await freshRoot();
    const MAX = 1024 * 1024;
    const config = loadConfig({
      AP_VARIANT_STORE: `file://${root}`,
      AP_VARIANT_STORE_MAX_BYTES: String(MAX),
      AP_SERVE_MODE: 'proxy',
      AP_LOG_LEVEL: 'error',
    });
    // Fill the directory to within a few bytes of the bound.
    const size = MAX - 3 - (storedBytes(MAX, META) - MAX);
    const plain = new FileVariantStore({ root });
    await plain.sweepStaging();
    await plain.put('full', chunksOf(bytesOf('full', size)), META);
    const store = await createVariantStore(config);
    expect(store).toBeInstanceOf(HotVariantCache);
    expect(evictions).toEqual([]); // the boot probe went through an unbounded store
    expect(store!.usage!()).toEqual({ bytes: MAX - 3, maxBytes: MAX, variants: 1 });
    expect(await onDisk(root)).toEqual(new Map([['full', MAX - 3]]));
    await store!.put('next', chunksOf(bytesOf('next', 10)), META);
    expect(evictions.map((e) => e.key)).toEqual(['full']);
    await store!.close();
  });

  it('unbounded (the default) keeps no index and reports no usage', async () => {
    const root = await freshRoot();
    const config = loadConfig({
      AP_VARIANT_STORE: `file://${root}`,
      AP_SERVE_MODE: 'proxy',
      AP_LOG_LEVEL: 'error',
    });
    const store = await createVariantStore(config, { hitCacheBytes: 0 });
    expect(store).toBeInstanceOf(FileVariantStore);
    expect(store!.usage!()).toBeUndefined();
    await store!.close();
  });
});

describe('metrics', () => {
  it('/metrics reads the bytes held, the evictions, the bytes they freed and the refusals', async () => {
    const root = await freshRoot();
    const each = storedBytes(20_000, META);
    const store = await bounded(root, 3 * each);
    const metrics = new Metrics({
      slots: async () => ({ held: 0, queued: 0, capacity: 1, queueSize: 0 }),
      rendersRunning: () => 0,
      variantStore: () => store.usage(),
    });
    try {
      for (let i = 0; i < 7; i++) {
        await store.put(`m${i}`, chunksOf(bytesOf(`m${i}`, 20_000)), META);
      }
      await expect(
        store.put('too-big', chunksOf(Buffer.alloc(4 * each)), META),
      ).rejects.toMatchObject({ code: 'ERR_STORE_TOO_LARGE' });
      const { body } = await metrics.expose();
      const value = (name: string) => {
        const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(body);
        return m ? Number(m[1]) : undefined;
      };
      expect(value('audio_proxy_variant_store_evictions_total')).toBe(4);
      expect(value('audio_proxy_variant_store_evicted_bytes_total')).toBe(4 * each);
      expect(value('audio_proxy_variant_store_oversize_total')).toBe(1);
      expect(value('audio_proxy_variant_store_bytes')).toBe(3 * each);
      expect(value('audio_proxy_variant_store_max_bytes')).toBe(3 * each);
      expect(value('audio_proxy_variant_store_variants')).toBe(3);
      expect(value('audio_proxy_variant_store_write_failures_total')).toBe(0);
    } finally {
      metrics.close();
    }
  });

  it('without a bounded store, the gauges read 0', async () => {
    const metrics = new Metrics({
      slots: async () => ({ held: 0, queued: 0, capacity: 1, queueSize: 0 }),
      rendersRunning: () => 0,
    });
    try {
      const { body } = await metrics.expose();
      expect(body).toMatch(/^audio_proxy_variant_store_bytes 0$/m);
      expect(body).toMatch(/^audio_proxy_variant_store_max_bytes 0$/m);
      expect(body).toMatch(/^audio_proxy_variant_store_evictions_total 0$/m);
    } finally {
      metrics.close();
    }
  });
});

describe('soak', () => {
  it('thousands of puts and reads into a small bound end with the index equal to the disk', async () => {
    const root = await freshRoot();
    const MAX = 256 * 1024;
    const store = await bounded(root, MAX);
    const PUTS = 3_000;
    const LANES = 8;
    let reads = 0;
    let whole = 0;
    let refused = 0;
    let full = 0;
    let next = 0;
    let rng = 12_345;
    const rand = (n: number) => {
      rng = (rng * 1_103_515_245 + 12_345) >>> 0;
      return rng % n;
    };
    const watched = watchReads();
    const started = performance.now();
    const lane = async () => {
      while (next < PUTS) {
        const i = next++;
        const key = `s${rand(600)}`;
        // Mostly small, a few large, one in a hundred past the bound.
        const size =
          i % 100 === 99 ? MAX + 1 : rand(10) === 0 ? 40_000 + rand(40_000) : rand(8_000);
        const data = bytesOf(key, size);
        await store.put(key, chunksOf(data, 4_096), META).catch((e: { reason?: string }) => {
          if (e.reason === 'too_large') refused += 1;
          else if (e.reason === 'store_full')
            full += 1; // the lanes' open reads filled it
          else throw e;
        });
        const probe = `s${rand(600)}`;
        const body = await store.get(probe);
        watched.opened(probe, body);
        reads += 1;
        const got = await readClosed(body);
        if (got !== undefined) {
          const head = await store.head(probe);
          if (head !== undefined) whole += got.length === head.size ? 1 : 0;
        }
        expect(store.usage()!.bytes).toBeLessThanOrEqual(MAX);
      }
    };
    await Promise.all(Array.from({ length: LANES }, lane));
    const ms = performance.now() - started;
    watched.stop();
    expect(watched.violations).toEqual([]);
    const { disk, usage } = await expectConsistent(store);
    expect(refused).toBe(PUTS / 100);
    expect(evictions.length).toBeGreaterThan(1_000);
    expect(oversize.filter((o) => o.first)).toHaveLength(1);
    expect(await readdir(join(root, STAGING_DIR))).toEqual([]);
    console.info(
      `[bounded] soak: ${PUTS} puts (${refused} too large, ${full} store_full), ${reads} reads (${whole} whole HITs), ${evictions.length} evictions in ${ms.toFixed(0)} ms; end: ${usage.variants} variants, ${usage.bytes} bytes held = ${sum(disk)} on disk (bound ${MAX})`,
    );
  }, 300_000);
});
