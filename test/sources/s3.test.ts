/**
 * `s3://` sources against a real S3-compatible server: an existing object resolves with its size
 * and mtime, and opens as a spool the proxy fetched (no URL reaches ffprobe, which reads the
 * descriptor as fd 3, whitelists and all); a GET past `AP_MAX_SRC_BYTES` is stopped by the byte
 * counter; a missing key, a missing bucket and a bucket outside
 * the allowlist are the one 404; missing or unknown credentials are 500 `not_configured`; an
 * unreachable store is 502; an object over `AP_MAX_SRC_BYTES` is 413 for renders only.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedSource } from '../../src/core/source.js';
import { parseSource } from '../../src/sources/parse.js';
import { resolveRemote } from '../../src/sources/remote.js';
import { sourceClient } from '../../src/sources/s3.js';
import { FD_INPUT_PATH } from '../../src/workers/argv.js';
import { resolveFfprobe } from '../../src/workers/ffmpegPath.js';
import { buildProbeArgv } from '../../src/workers/probe.js';
import { makeFixtures } from '../fixtures/audio.js';
import { type S3rverHandle, startS3rver } from '../store/s3rver.js';

let s3: S3rverHandle;
let wav: Buffer;

beforeAll(async () => {
  s3 = await startS3rver(['media', 'other']);
  wav = await readFile((await makeFixtures()).stereoWav);
  await sourceClient(s3.config()).send(
    new PutObjectCommand({ Bucket: 'media', Key: 'music/stereo.wav', Body: wav }),
  );
});

afterAll(async () => {
  await s3.close();
});

async function resolve(source: string, env: Record<string, string> = {}, enforceSize = true) {
  const parsed = parseSource(`plain/${source}`);
  if (!parsed.ok) throw new Error(`unparseable ${source}`);
  return resolveRemote(parsed.source, parsed.canonical, s3.config(env), { enforceSize });
}

describe('s3:// sources', () => {
  it('resolve without a URL, and open as a spool holding the object; probe and render share it', async () => {
    const r = (await resolve('s3://media/music/stereo.wav')) as ResolvedSource;
    expect(r.canonical).toBe('s3://media/music/stereo.wav');
    expect(r.input).toEqual({ url: 's3://media/music/stereo.wav', kind: 's3' });
    expect(r.size).toBe(wav.length);
    expect(typeof r.mtimeMs).toBe('number');
    const first = await r.open!();
    const second = await r.open!();
    if (!first.ok || !second.ok) throw new Error('the spool did not open');
    expect(second.lease.fd).toBe(first.lease.fd); // one GET, one spool, two leases
    expect(readFileSync(`/proc/self/fd/${first.lease.fd}`).equals(wav)).toBe(true);
    first.lease.release();
    second.lease.release();
  });

  it('ffprobe reads the spool as its fd 3, through the argv builder', async () => {
    const r = (await resolve('s3://media/music/stereo.wav')) as ResolvedSource;
    const opened = await r.open!();
    if (!opened.ok) throw new Error(opened.refusal);
    try {
      const ffprobe = resolveFfprobe({ env: process.env }).path;
      const argv = buildProbeArgv({ url: FD_INPUT_PATH, kind: 'local' });
      const probe = spawnSync(ffprobe, argv, {
        stdio: ['ignore', 'pipe', 'pipe', opened.lease.fd],
      });
      expect(probe.status, probe.stderr.toString()).toBe(0);
      const info = JSON.parse(probe.stdout.toString()) as {
        streams: Array<{ channels: number; codec_type: string }>;
      };
      expect(info.streams[0]).toMatchObject({ codec_type: 'audio', channels: 2 });
    } finally {
      opened.lease.release();
    }
  });

  it('the byte counter stops a GET past AP_MAX_SRC_BYTES, for /info too', async () => {
    // /info skips the HEAD's size check; what the proxy reads is still bounded.
    const r = (await resolve(
      's3://media/music/stereo.wav',
      { AP_MAX_SRC_BYTES: '1000' },
      false,
    )) as ResolvedSource;
    expect(await r.open!()).toEqual({ ok: false, refusal: 'source_too_large' });
  });

  it('a missing key, a missing bucket and an unlisted bucket are the same 404', async () => {
    expect(await resolve('s3://media/music/none.wav')).toEqual({ failure: { type: 'not_found' } });
    expect(await resolve('s3://absent-bucket/x.wav')).toEqual({ failure: { type: 'not_found' } });
    expect(await resolve('s3://media/music/stereo.wav', { AP_SOURCE_ALLOWLIST: 'other' })).toEqual({
      failure: { type: 'not_found' },
    });
    expect(
      await resolve('s3://media/music/stereo.wav', { AP_SOURCE_ALLOWLIST: 'med*' }),
    ).toMatchObject({ input: { kind: 's3' } });
  });

  it('no credentials, or credentials the store does not know: 500 not_configured', async () => {
    const parsed = parseSource('plain/s3://media/music/stereo.wav');
    if (!parsed.ok) throw new Error('unparseable');
    const { loadConfig } = await import('../../src/config/index.js');
    const anonymous = loadConfig({ AP_S3_ENDPOINT: s3.endpoint });
    expect(await resolveRemote(parsed.source, parsed.canonical, anonymous)).toEqual({
      failure: { type: 'not_configured' },
    });
    expect(await resolve('s3://media/music/stereo.wav', { AWS_ACCESS_KEY_ID: 'NOBODY' })).toEqual({
      failure: { type: 'not_configured' },
    });
  });

  it('an unreachable store: 502 upstream_unavailable', async () => {
    expect(
      await resolve('s3://media/music/stereo.wav', { AP_S3_ENDPOINT: 'http://127.0.0.1:9' }),
    ).toEqual({ failure: { type: 'upstream_unavailable' } });
  });

  it('an object over AP_MAX_SRC_BYTES is a 413 for renders, not for /info', async () => {
    const small = { AP_MAX_SRC_BYTES: '1000' };
    expect(await resolve('s3://media/music/stereo.wav', small)).toEqual({
      failure: { type: 'source_too_large' },
    });
    expect(await resolve('s3://media/music/stereo.wav', small, false)).toMatchObject({
      size: wav.length,
    });
  });
});
