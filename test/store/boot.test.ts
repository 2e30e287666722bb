/**
 * `createVariantStore(config)` boot checks, on a real directory and a real S3-compatible server:
 * a file store sweeps staging left by a killed write and proves the whole write path (leaving no
 * probe behind); a directory that cannot be written, a redirect mode without presigning, a
 * missing bucket, wrong credentials and an unreachable endpoint all refuse the boot with
 * `ERR_STORE_BOOT`; an s3 store's live PUT+DELETE probe leaves nothing behind.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { FileVariantStore } from '../../src/store/file.js';
import { HotVariantCache } from '../../src/store/hotCache.js';
import { createVariantStore } from '../../src/store/index.js';
import { S3VariantStore } from '../../src/store/s3.js';
import { type S3rverHandle, startS3rver } from './s3rver.js';

let s3: S3rverHandle;
beforeAll(async () => {
  s3 = await startS3rver(['variants']);
});
afterAll(async () => {
  await s3.close();
});

async function fileConfig() {
  const root = await mkdtemp(join(tmpdir(), 'ap-boot-'));
  const config = loadConfig({
    AP_VARIANT_STORE: `file://${root}`,
    AP_SERVE_MODE: 'proxy',
    AP_LOG_LEVEL: 'error',
  });
  return { root, config };
}

describe('createVariantStore', () => {
  it('no store configured: undefined, nothing touched', async () => {
    expect(await createVariantStore(loadConfig({}))).toBeUndefined();
  });

  it('file: sweeps staging, proves the write path, wraps the store in the hot cache', async () => {
    const { root, config } = await fileConfig();
    const killed = spawn(process.execPath, ['-e', '0']); // a writer that is gone
    await once(killed, 'exit');
    await writeFile(join(root, 'tmp', `deadbeef.${killed.pid}-aa.data`), 'torn write');
    const store = await createVariantStore(config);
    expect(store).toBeInstanceOf(HotVariantCache);
    expect((store as HotVariantCache).inner).toBeInstanceOf(FileVariantStore);
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
    expect(await readdir(root)).toEqual(['tmp']); // the probe left nothing behind
    await store!.close();
    const raw = await createVariantStore(config, { hitCacheBytes: 0 });
    expect(raw).toBeInstanceOf(FileVariantStore);
    await rm(root, { recursive: true, force: true });
  });

  it('file: a store that cannot be written refuses the boot', async () => {
    const { root, config } = await fileConfig();
    await rm(join(root, 'tmp'), { recursive: true });
    await writeFile(join(root, 'tmp'), 'a file where the staging directory belongs');
    await expect(createVariantStore(config)).rejects.toMatchObject({
      code: 'ERR_STORE_BOOT',
      message: expect.stringContaining('AP_VARIANT_STORE=file://'),
    });
    await rm(root, { recursive: true, force: true });
  });

  it('redirect mode with a store that cannot presign refuses the boot', async () => {
    const { root, config } = await fileConfig();
    await expect(createVariantStore({ ...config, serveMode: 'redirect' })).rejects.toMatchObject({
      code: 'ERR_STORE_BOOT',
      reason: 'cannot_presign',
    });
    await rm(root, { recursive: true, force: true });
  });

  it('s3: the live probe writes and deletes one object', async () => {
    const store = await createVariantStore(s3.config({ AP_VARIANT_STORE: 's3://variants' }));
    const inner = (store as HotVariantCache).inner;
    expect(inner).toBeInstanceOf(S3VariantStore);
    const listed = await (inner as S3VariantStore).client.send(
      new ListObjectsV2Command({ Bucket: 'variants' }),
    );
    expect(listed.Contents ?? []).toEqual([]);
    await store!.close();
  });

  it('s3: a missing bucket, wrong credentials or an unreachable endpoint refuse the boot', async () => {
    await expect(
      createVariantStore(s3.config({ AP_VARIANT_STORE: 's3://no-such-bucket' })),
    ).rejects.toMatchObject({ code: 'ERR_STORE_BOOT', reason: 'nosuchbucket' });
    await expect(
      createVariantStore(
        s3.config({ AP_VARIANT_STORE: 's3://variants', AWS_ACCESS_KEY_ID: 'NOBODY' }),
      ),
    ).rejects.toMatchObject({ code: 'ERR_STORE_BOOT', reason: 'invalidaccesskeyid' });
    await expect(
      createVariantStore(
        s3.config({ AP_VARIANT_STORE: 's3://variants', AP_S3_ENDPOINT: 'http://127.0.0.1:9' }),
      ),
    ).rejects.toMatchObject({ code: 'ERR_STORE_BOOT', reason: 'econnrefused' });
  });
});
