/**
 * The file:// variant store on a real temporary directory: a put reads back byte for byte (whole
 * and by range) with its metadata; `head` requires data and metadata that agree; every way a put
 * can end early (abort, producer failure, write failure) leaves nothing readable and no staging;
 * concurrent writers of one key leave one consistent variant; the boot sweep clears staging.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChunkChannel } from '../../src/store/channel.js';
import { FileVariantStore, STAGING_ORPHAN_AGE_MS } from '../../src/store/file.js';
import { StoreError } from '../../src/store/types.js';
import { chunksOf, META, readBody } from './helpers.js';

let root: string;
let store: FileVariantStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'ap-filestore-'));
  store = new FileVariantStore({ root });
  await store.sweepStaging();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('FileVariantStore', () => {
  it('commits a streamed variant and reads it back whole and by range, with its metadata', async () => {
    const data = randomBytes(300_000);
    const meta = { ...META, contentDisposition: 'attachment; filename="a.mp3"' };
    const stored = await store.put('k1', chunksOf(data), meta);
    expect(stored).toEqual({ key: 'k1', size: data.length, ...meta });
    expect(await store.head('k1')).toEqual({ key: 'k1', size: data.length, ...meta });
    expect((await readBody(await store.get('k1'))).equals(data)).toBe(true);
    const part = await store.get('k1', { start: 1000, end: 1999 });
    expect(part?.type === 'stream' && part.length).toBe(1000);
    expect((await readBody(part)).equals(data.subarray(1000, 2000))).toBe(true);
    // an end past the last byte is clamped to it
    const tail = await store.get('k1', { start: data.length - 5, end: data.length + 100 });
    expect((await readBody(tail)).equals(data.subarray(-5))).toBe(true);
    expect(await store.staging()).toEqual([]);
  });

  it('writes a patch over the staged bytes before the commit; one outside them fails the put', async () => {
    const data = randomBytes(100_000);
    const patch = { offset: 1000, data: Buffer.alloc(417, 0xcd) };
    const stored = await store.put('patched', chunksOf(data, 3000), META, { patch: () => patch });
    expect(stored.size).toBe(data.length);
    const expected = Buffer.from(data);
    expected.set(patch.data, patch.offset);
    expect((await readBody(await store.get('patched'))).equals(expected)).toBe(true);
    await expect(
      store.put('unpatched', chunksOf(randomBytes(1200)), META, { patch: () => patch }),
    ).rejects.toMatchObject({ code: 'ERR_STORE_WRITE', reason: 'patch_out_of_range' });
    expect(await store.head('unpatched')).toBeUndefined();
    expect(await store.staging()).toEqual([]);
  });

  it('stores an empty variant', async () => {
    await store.put('empty', chunksOf(Buffer.alloc(0)), META);
    expect((await store.head('empty'))?.size).toBe(0);
    expect((await readBody(await store.get('empty'))).length).toBe(0);
  });

  it('head is a miss unless data and metadata both exist and agree', async () => {
    expect(await store.head('nothing')).toBeUndefined();
    expect(await store.get('nothing')).toBeUndefined();
    await store.put('k2', chunksOf(Buffer.from('hello')), META);
    const { data, meta } = store.paths('k2');

    await truncate(data, 3); // size disagrees with the metadata
    expect(await store.head('k2')).toBeUndefined();

    await writeFile(data, 'hello');
    await writeFile(meta, '{not json');
    expect(await store.head('k2')).toBeUndefined();

    await rm(meta);
    expect(await store.head('k2')).toBeUndefined();

    await store.put('k3', chunksOf(Buffer.from('x')), META);
    await rm(store.paths('k3').data);
    expect(await store.head('k3')).toBeUndefined();
  });

  it('an aborted put leaves nothing readable and no staging', async () => {
    const channel = new ChunkChannel();
    const controller = new AbortController();
    const put = store.put('k4', channel, META, { signal: controller.signal });
    channel.push(randomBytes(100_000));
    channel.push(randomBytes(100_000));
    // the writer reaches its staging file and waits for more
    while ((await store.staging()).length === 0) await new Promise((r) => setImmediate(r));
    controller.abort();
    await expect(put).rejects.toMatchObject({ code: 'ERR_STORE_ABORTED' });
    expect(await store.head('k4')).toBeUndefined();
    expect(await store.get('k4')).toBeUndefined();
    expect(await store.staging()).toEqual([]);
  });

  it('a producer that fails mid-stream aborts the put the same way', async () => {
    async function* failing() {
      yield randomBytes(10_000);
      throw new Error('render died');
    }
    await expect(store.put('k5', failing(), META)).rejects.toMatchObject({
      code: 'ERR_STORE_ABORTED',
    });
    expect(await store.head('k5')).toBeUndefined();
    expect(await store.staging()).toEqual([]);
  });

  it('a write failure rejects with a stable code and an errno reason, leaving nothing', async () => {
    // The staging directory replaced by a plain file: every staging open fails.
    await rm(store.stagingDir, { recursive: true });
    await writeFile(store.stagingDir, 'not a directory');
    const error = await store.put('k6', chunksOf(Buffer.from('abc')), META).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'ERR_STORE_WRITE', reason: 'enotdir' });
    expect(await store.head('k6')).toBeUndefined();
  });

  it('concurrent writers of one key leave one consistent variant', async () => {
    const data = randomBytes(500_000);
    const results = await Promise.all(
      Array.from({ length: 4 }, () => store.put('same', chunksOf(data, 7_777), META)),
    );
    expect(results.every((r) => r.size === data.length)).toBe(true);
    expect((await readBody(await store.get('same'))).equals(data)).toBe(true);
    expect(await store.staging()).toEqual([]);
  });

  it('a reader that opened the variant keeps reading it after a delete', async () => {
    const data = randomBytes(200_000);
    await store.put('k7', chunksOf(data), META);
    const body = await store.get('k7');
    await store.delete('k7');
    expect(await store.head('k7')).toBeUndefined();
    expect((await readBody(body)).equals(data)).toBe(true);
  });

  it('a consumer that stops reading releases the descriptor', async () => {
    await store.put('k8', chunksOf(randomBytes(2_000_000)), META);
    const body = await store.get('k8');
    const stream = (body as { stream: Readable }).stream;
    await new Promise<void>((resolve) => {
      stream.once('data', () => {
        stream.destroy();
        resolve();
      });
    });
    await new Promise((r) => stream.once('close', r));
    expect(stream.destroyed).toBe(true);
  });

  it('the boot sweep removes staging left by a killed write', async () => {
    const dead = await deadPid();
    await writeFile(join(store.stagingDir, `k9.${dead}-abc.data`), 'torn');
    await writeFile(join(store.stagingDir, `k9.${dead}-abc.meta`), '{}');
    expect(await store.sweepStaging()).toBe(2);
    expect(await readdir(store.stagingDir)).toEqual([]);
  });

  it('the boot sweep leaves a live writer alone (a node booting beside another), until it ages', async () => {
    const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      const mine = `k8.${process.pid}-abc.data`; // another store in this very process
      const theirs = `k8.${live.pid}-def.data`; // another node on this host, mid-write
      await writeFile(join(store.stagingDir, mine), 'writing');
      await writeFile(join(store.stagingDir, theirs), 'writing');
      expect(await store.sweepStaging()).toBe(0);
      expect((await readdir(store.stagingDir)).sort()).toEqual([mine, theirs].sort());
      // An hour later nothing has touched them: orphans, whatever their pids say.
      expect(await store.sweepStaging(Date.now() + STAGING_ORPHAN_AGE_MS + 1_000)).toBe(2);
      expect(await readdir(store.stagingDir)).toEqual([]);
    } finally {
      live.kill('SIGKILL');
    }
  });

  it('refuses keys that could leave the directory and malformed metadata, at the boundary', async () => {
    expect(() => store.paths('../etc')).toThrow(TypeError);
    await expect(store.head('a/b')).rejects.toThrow(TypeError);
    await expect(
      store.put('ok', chunksOf(Buffer.from('x')), { contentType: '', cacheControl: 'x' }),
    ).rejects.toThrow(TypeError);
    await expect(store.presign()).rejects.toMatchObject({ code: 'ERR_STORE_UNSUPPORTED' });
  });
});

/** The pid of a process that has exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0']);
  await once(child, 'exit');
  return child.pid!;
}
