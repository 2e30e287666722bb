/**
 * A real S3-compatible server for tests: s3rver on loopback port 0 over a temporary directory,
 * with the client settings it needs (path-style addressing, checksums only when required) and
 * a Config that points the source and variant profiles at it.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import { type Config, loadConfig } from '../../src/config/index.js';

export const S3RVER_KEY = 'S3RVER';

export interface S3rverHandle {
  readonly endpoint: string;
  readonly dir: string;
  readonly port: number;
  /** Environment that points every S3 profile at this server. */
  env(extra?: Record<string, string>): Record<string, string>;
  config(extra?: Record<string, string>): Config;
  /** Incomplete multipart uploads s3rver still holds for `bucket` (its own on-disk layout). */
  pendingUploads(bucket: string): Promise<string[]>;
  close(): Promise<void>;
}

export async function startS3rver(buckets: readonly string[]): Promise<S3rverHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'ap-s3rver-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory: dir,
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const env = (extra: Record<string, string> = {}) => ({
    AP_S3_ENDPOINT: endpoint,
    AWS_ACCESS_KEY_ID: S3RVER_KEY,
    AWS_SECRET_ACCESS_KEY: S3RVER_KEY,
    AWS_REGION: 'us-east-1',
    AP_LOG_LEVEL: 'error',
    ...extra,
  });
  return {
    endpoint,
    dir,
    port,
    env,
    config: (extra = {}) => loadConfig(env(extra)),
    async pendingUploads(bucket) {
      try {
        return await readdir(join(dir, bucket, '._S3rver_uploads'));
      } catch {
        return [];
      }
    },
    async close() {
      server.httpServer.closeAllConnections();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
