// A library that never kills its host (#16 item 3): `listen()` on a busy port rejects with a
// coded error, a fatal actor failure reaches the host through `onFatal` instead of
// `process.exit`, and after `close()` begins `/health` and new requests answer 503 while the
// streams already in flight drain.
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer as createNetServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { createAudioProxy } from '../../src/proxy.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { makeFixtures } from '../fixtures/audio.js';
import { get, spawnLogger, waitFor } from '../integration/harness.js';

const silent = pino({ level: 'silent' });

describe('listen() on a busy port', () => {
  it('rejects with ERR_AP_LISTEN naming the address and port; the host lives on', async () => {
    const squatter = createNetServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as AddressInfo).port;
    const proxy = await createAudioProxy({
      config: loadConfig({ AP_LOG_LEVEL: 'error' }),
      logger: silent,
    });
    try {
      const error = await proxy.listen({ host: '127.0.0.1', port, metricsPort: 0 }).then(
        () => null,
        (e: unknown) => e as NodeJS.ErrnoException & Record<string, unknown>,
      );
      expect(error).toBeInstanceOf(Error);
      expect(error!.code).toBe('ERR_AP_LISTEN');
      expect((error!.cause as NodeJS.ErrnoException).code).toBe('EADDRINUSE');
      expect(error!.message).toContain(`127.0.0.1:${port}`);
      expect(error!).toMatchObject({ address: '127.0.0.1', port });
      // The failed listen left nothing behind: a second try on a free port works.
      const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
      expect((await get(url, '/health')).status).toBe(200);
    } finally {
      await proxy.close();
      squatter.close();
    }
  });

  it('a busy metrics port rejects too and releases the public port', async () => {
    const squatter = createNetServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const metricsPort = (squatter.address() as AddressInfo).port;
    const proxy = await createAudioProxy({
      config: loadConfig({ AP_LOG_LEVEL: 'error' }),
      logger: silent,
    });
    try {
      await expect(
        proxy.listen({ host: '127.0.0.1', port: 0, metricsHost: '127.0.0.1', metricsPort }),
      ).rejects.toMatchObject({ code: 'ERR_AP_LISTEN', port: metricsPort });
    } finally {
      await proxy.close();
      squatter.close();
    }
  });
});

describe('a fatal actor failure', () => {
  it('reaches the host through onFatal after the proxy stopped; the process is not exited', () => {
    const fixture = fileURLToPath(new URL('./embedFatal.ts', import.meta.url));
    const run = spawnSync(process.execPath, ['--import', 'tsx', fixture], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stdout).toContain('onFatal: readiness stopped');
    expect(run.stdout).toContain('proxy listener refused: true');
    expect(run.stdout).toContain('host still serving: host ok');
    expect(run.status).toBe(0);
  });
});

describe('close()', () => {
  let server: Server | undefined;
  afterAll(() => server?.close());

  it('answers 503 shutting_down to /health and new requests while in-flight streams drain', {
    timeout: 60_000,
  }, async () => {
    const fixtures = await makeFixtures();
    // ffmpeg reads at real time: the 3 s fixture streams for about 3 s.
    const ffmpeg = await spawnLogger(resolveFfmpeg({ env: process.env }).path, ['-readrate', '1']);
    const proxy = await createAudioProxy({
      config: loadConfig({
        AP_LOCAL_ROOT: fixtures.dir,
        AP_ALLOW_INSECURE: '1',
        AP_LOG_LEVEL: 'error',
        AP_FFMPEG_PATH: ffmpeg.path,
      }),
      logger: silent,
    });
    // Embedded: the host's own server keeps accepting after the proxy's close() begins.
    server = createServer((req, res) => void proxy.handler(req, res));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const variant = (cb: string) => `/insecure/f:mp3/cb:${cb}/plain/local://stereo.wav`;

    let started = false;
    const stream = get(base, variant('inflight'), { onFirstByte: () => (started = true) });
    await waitFor(() => started, 30_000);
    const closed = proxy.close();

    const row = ERROR_TABLE.find((r) => r.error === 'shutting_down');
    for (const path of ['/health', '/ready', variant('late')]) {
      const r = await get(base, path);
      expect({ path, status: r.status }).toEqual({ path, status: 503 });
      expect(row).toMatchObject({ status: 503 });
      expect(JSON.parse(r.body.toString())).toEqual({
        error: 'shutting_down',
        message: row!.message,
      });
      expect(r.headers['cache-control']).toBe('no-store');
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const streamed = await stream;
    expect(streamed.status).toBe(200);
    expect(streamed.complete).toBe(true); // drained, not torn
    await closed;
  });
});
