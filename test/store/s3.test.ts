/**
 * The s3:// variant store against a real S3-compatible server (s3rver on loopback): a small
 * variant is one PutObject, a large one a multipart upload with one part in flight at a time;
 * both read back byte for byte, whole and by range, with their metadata; a presigned URL fetches
 * the variant; an aborted or failed upload leaves nothing readable and is aborted; an object
 * without our metadata is a miss; an unreachable store throws a stable code.
 */
import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkChannel } from '../../src/store/channel.js';
import { S3VariantStore } from '../../src/store/s3.js';
import { createS3Client } from '../../src/store/s3client.js';
import { chunksOf, META, readBody } from './helpers.js';
import { type S3rverHandle, startS3rver } from './s3rver.js';

const BUCKET = 'variants';
const PART = 5 * 1024 * 1024;

interface Sent {
  command: string;
  input: Record<string, unknown>;
  ok?: boolean;
  error?: string;
}

let s3: S3rverHandle;
let store: S3VariantStore;
const sent: Sent[] = [];
let inFlightParts = 0;
let maxInFlightParts = 0;

beforeAll(async () => {
  s3 = await startS3rver([BUCKET]);
  const config = s3.config({ AP_VARIANT_STORE: `s3://${BUCKET}` });
  const client = createS3Client(config.variantS3);
  // Records what the store asks the server (the real client, observed, not replaced).
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const entry: Sent = {
        command: String(context.commandName),
        input: args.input as Record<string, unknown>,
      };
      sent.push(entry);
      const isPart = entry.command === 'UploadPartCommand';
      if (isPart) maxInFlightParts = Math.max(maxInFlightParts, ++inFlightParts);
      try {
        const r = await next(args);
        entry.ok = true;
        return r;
      } catch (error) {
        entry.ok = false;
        entry.error = (error as Error).name;
        throw error;
      } finally {
        if (isPart) inFlightParts--;
      }
    },
    { step: 'initialize', name: 'testRecorder' },
  );
  store = new S3VariantStore({ client, bucket: BUCKET });
});

afterAll(async () => {
  await store.close();
  await s3.close();
});

function commandsFor(key: string): string[] {
  return sent.filter((s) => s.input.Key === key).map((s) => s.command);
}

async function listed(prefix: string): Promise<string[]> {
  const r = await store.client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
  return (r.Contents ?? []).map((o) => o.Key!);
}

describe('S3VariantStore', () => {
  it('a variant smaller than one part is a single PutObject and reads back with its metadata', async () => {
    const data = randomBytes(200_000);
    const meta = { ...META, contentDisposition: 'attachment; filename="x.mp3"' };
    await store.put('small1', chunksOf(data), meta);
    expect(commandsFor('small1')).toEqual(['PutObjectCommand']);
    expect(await store.head('small1')).toEqual({ key: 'small1', size: data.length, ...meta });
    expect((await readBody(await store.get('small1'))).equals(data)).toBe(true);
    const part = await store.get('small1', { start: 10, end: 19 });
    expect(part?.type === 'stream' && part.length).toBe(10);
    expect((await readBody(part)).equals(data.subarray(10, 20))).toBe(true);
  });

  it('a large variant is a multipart upload of 5 MiB parts, one in flight at a time', async () => {
    const data = randomBytes(2 * PART + 12_345);
    await store.put('big1', chunksOf(data, 100_000), META);
    expect(commandsFor('big1')).toEqual([
      'CreateMultipartUploadCommand',
      'UploadPartCommand',
      'UploadPartCommand',
      'UploadPartCommand',
      'CompleteMultipartUploadCommand',
    ]);
    const sizes = sent
      .filter((s) => s.input.Key === 'big1' && s.command === 'UploadPartCommand')
      .map((s) => s.input.ContentLength);
    expect(sizes).toEqual([PART, PART, 12_345]);
    expect(maxInFlightParts).toBe(1);
    expect(await store.head('big1')).toMatchObject({ size: data.length, ...META });
    expect((await readBody(await store.get('big1'))).equals(data)).toBe(true);
    const tail = await store.get('big1', { start: data.length - 100, end: data.length - 1 });
    expect((await readBody(tail)).equals(data.subarray(-100))).toBe(true);
  });

  it('a patch is written before the commit: first part held and uploaded last, or in the PutObject', async () => {
    const data = randomBytes(2 * PART + 777);
    const patch = { offset: 45, data: Buffer.alloc(208, 0xab) };
    await store.put('patched1', chunksOf(data, 100_000), META, { patch: () => patch });
    const parts = sent
      .filter((s) => s.input.Key === 'patched1' && s.command === 'UploadPartCommand')
      .map((s) => s.input.PartNumber);
    expect(parts).toEqual([2, 3, 1]);
    const expected = Buffer.from(data);
    expected.set(patch.data, patch.offset);
    expect((await readBody(await store.get('patched1'))).equals(expected)).toBe(true);
    const small = randomBytes(10_000);
    await store.put('patched2', chunksOf(small, 1000), META, { patch: () => patch });
    const smallExpected = Buffer.from(small);
    smallExpected.set(patch.data, patch.offset);
    expect((await readBody(await store.get('patched2'))).equals(smallExpected)).toBe(true);
    // Outside the bytes it may replace: the put fails and nothing is readable.
    await expect(
      store.put('patched3', chunksOf(randomBytes(100)), META, { patch: () => patch }),
    ).rejects.toMatchObject({ code: 'ERR_STORE_WRITE', reason: 'patch_out_of_range' });
    expect(await store.head('patched3')).toBeUndefined();
  });

  it('a presigned URL fetches the variant, and honours Range', async () => {
    const data = randomBytes(50_000);
    await store.put('signed1', chunksOf(data), META);
    const url = await store.presign('signed1', 60);
    expect(url).toContain('X-Amz-Expires=60');
    const whole = await fetch(url);
    expect(whole.status).toBe(200);
    expect(whole.headers.get('content-type')).toBe(META.contentType);
    expect(Buffer.from(await whole.arrayBuffer()).equals(data)).toBe(true);
    const ranged = await fetch(url, { headers: { range: 'bytes=0-9' } });
    expect(ranged.status).toBe(206);
    expect(Buffer.from(await ranged.arrayBuffer()).equals(data.subarray(0, 10))).toBe(true);
    await expect(store.presign('signed1', 0)).rejects.toThrow(RangeError);
  });

  it('an upload aborted after its first part leaves nothing readable and is aborted', async () => {
    const channel = new ChunkChannel();
    const controller = new AbortController();
    const put = store.put('torn1', channel, META, { signal: controller.signal });
    channel.push(randomBytes(PART + 1000));
    while (!sent.some((s) => s.input.Key === 'torn1' && s.command === 'UploadPartCommand' && s.ok))
      await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    await expect(put).rejects.toMatchObject({ code: 'ERR_STORE_ABORTED' });
    const aborts = sent.filter(
      (s) => s.input.Key === 'torn1' && s.command === 'AbortMultipartUploadCommand',
    );
    const created = sent.find(
      (s) => s.input.Key === 'torn1' && s.command === 'CreateMultipartUploadCommand',
    );
    expect(created).toBeDefined();
    expect(aborts).toHaveLength(1);
    expect(aborts[0]!.input.UploadId).toBe(
      sent.find((s) => s.input.Key === 'torn1' && s.command === 'UploadPartCommand')?.input
        .UploadId,
    );
    // s3rver 3.7.1 does not implement AbortMultipartUpload (it answers MethodNotAllowed and keeps
    // the parts on disk); real S3 removes them. Either way nothing is readable under the key:
    expect(commandsFor('torn1')).not.toContain('CompleteMultipartUploadCommand');
    expect(await store.head('torn1')).toBeUndefined();
    expect(await store.get('torn1')).toBeUndefined();
    expect(await listed('torn1')).toEqual([]);
  });

  it('a producer failing mid-stream aborts the upload the same way', async () => {
    async function* failing() {
      yield randomBytes(PART + 10);
      throw new Error('render died');
    }
    await expect(store.put('torn2', failing(), META)).rejects.toMatchObject({
      code: 'ERR_STORE_ABORTED',
    });
    expect(commandsFor('torn2')).toContain('AbortMultipartUploadCommand');
    expect(await store.head('torn2')).toBeUndefined();
  });

  it('an aborted small variant never sends a single request', async () => {
    const channel = new ChunkChannel();
    const controller = new AbortController();
    const put = store.put('torn3', channel, META, { signal: controller.signal });
    channel.push(randomBytes(1000));
    await new Promise((r) => setImmediate(r));
    controller.abort();
    await expect(put).rejects.toMatchObject({ code: 'ERR_STORE_ABORTED' });
    expect(commandsFor('torn3')).toEqual([]);
  });

  it('an object written without our metadata is a miss; a missing one is a miss', async () => {
    await store.client.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'foreign1', Body: Buffer.from('x') }),
    );
    expect(await store.head('foreign1')).toBeUndefined();
    expect(await store.head('never-written')).toBeUndefined();
    expect(await store.get('never-written')).toBeUndefined();
    await store.delete('never-written'); // absent is not an error
  });

  it('delete removes a variant', async () => {
    await store.put('del1', chunksOf(Buffer.from('bye')), META);
    await store.delete('del1');
    expect(await store.head('del1')).toBeUndefined();
  });

  it('an unreachable store throws ERR_STORE_UNAVAILABLE from head and get', async () => {
    const dead = s3.config({
      AP_VARIANT_STORE: `s3://${BUCKET}`,
      AP_S3_ENDPOINT: 'http://127.0.0.1:9',
    });
    const offline = new S3VariantStore({ client: createS3Client(dead.variantS3), bucket: BUCKET });
    await expect(offline.head('k')).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
    await expect(offline.get('k')).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
    await expect(offline.put('k', chunksOf(Buffer.from('x')), META)).rejects.toMatchObject({
      code: 'ERR_STORE_WRITE',
    });
    await offline.close();
  });

  it('the boot probe writes and removes one object', async () => {
    await store.probe();
    expect(await listed('.audio-proxy-boot-probe/')).toEqual([]);
  });
});
