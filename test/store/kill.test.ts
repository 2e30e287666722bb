/**
 * Killing the writing process (SIGKILL, no cleanup of any kind) in the middle of a variant write
 * leaves nothing readable: for the file store, the torn write is only staging, which the next
 * boot sweeps; for the s3 store, the multipart upload was never completed, so no object exists
 * under the key (the parts are an incomplete upload, invisible to readers).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { FileVariantStore } from '../../src/store/file.js';
import { createVariantStore } from '../../src/store/index.js';
import { S3VariantStore } from '../../src/store/s3.js';
import { createS3Client } from '../../src/store/s3client.js';
import { type S3rverHandle, startS3rver } from './s3rver.js';

const WRITER = fileURLToPath(new URL('./fixtures/killableWriter.ts', import.meta.url));

/** Starts the writer and resolves once it reports its bytes staged. */
function startWriter(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', WRITER], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('STAGED')) resolve(child);
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`writer exited early (${code}): ${err}`)));
  });
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

let s3: S3rverHandle;
beforeAll(async () => {
  s3 = await startS3rver(['killed']);
});
afterAll(async () => {
  await s3.close();
});

describe('a writer killed mid-write', () => {
  it('file store: nothing readable; the torn write is staging, swept at the next boot', async () => {
    const root = await mkdtemp(join(tmpdir(), 'ap-kill-'));
    const env = {
      AP_VARIANT_STORE: `file://${root}`,
      AP_SERVE_MODE: 'proxy',
      AP_LOG_LEVEL: 'error',
    };
    const child = await startWriter({ ...env, WRITER_KEY: 'victim', WRITER_BYTES: '3145728' });
    await kill(child);
    const after = new FileVariantStore({ root });
    expect(await after.head('victim')).toBeUndefined();
    expect(await after.get('victim')).toBeUndefined();
    const staged = await after.staging();
    expect(staged.length).toBeGreaterThan(0); // it really died mid-write
    const booted = await createVariantStore(loadConfig(env));
    expect(await after.staging()).toEqual([]);
    expect(await booted!.head('victim')).toBeUndefined();
    expect((await readdir(root)).sort()).toEqual(['tmp']);
    await booted!.close();
    await rm(root, { recursive: true, force: true });
  });

  it('s3 store: no object exists under the key; the upload stays incomplete', async () => {
    const env = s3.env({ AP_VARIANT_STORE: 's3://killed' });
    expect(await s3.pendingUploads('killed')).toEqual([]);
    const child = await startWriter({ ...env, WRITER_KEY: 'victim', WRITER_BYTES: '6291456' });
    await kill(child);
    const config = loadConfig(env);
    const after = new S3VariantStore({
      client: createS3Client(config.variantS3),
      bucket: 'killed',
    });
    expect(await after.head('victim')).toBeUndefined();
    expect(await after.get('victim')).toBeUndefined();
    const listed = await after.client.send(new ListObjectsV2Command({ Bucket: 'killed' }));
    expect(listed.Contents ?? []).toEqual([]);
    expect(await s3.pendingUploads('killed')).toHaveLength(1); // a part was uploaded
    await after.close();
  });
});
