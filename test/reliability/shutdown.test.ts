/**
 * SIGTERM to a real `node bin/audio-proxy.mjs serve` process under load: two renders streaming
 * (ffmpeg at real-time speed) and four waiting for a slot. Proves the process drains and exits 0
 * within the CLI's shutdown grace (exit 0 is only reachable before that timer fires), that every
 * streaming client got its whole body (they finish inside the proxy's 10 s drain), that every
 * queued client got either a 200 whose bytes are a prefix of the variant (it started during the
 * drain; whole, or torn at its bound) or an answer from the error table (503 `shutting_down` when
 * cancelled, never a 500), that the closed listener takes no new request, and that no ffmpeg it
 * spawned (pids recorded by the spawn-logging wrapper) is alive.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { makeFixtures } from '../fixtures/audio.js';
import { get, isAlive, type RawResponse, spawnLogger, waitFor } from '../integration/harness.js';
import { freePort } from './procs.js';

/** The CLI's drain bound (`SHUTDOWN_GRACE_MS` in src/cli.ts, not importable: it runs the CLI). */
const SHUTDOWN_GRACE_MS = 25_000;
/** Boot under tsx on a loaded 2-core machine can take a while; this is a hang, not slowness. */
const BOOT_TIMEOUT_MS = 90_000;
/** ffmpeg reads its input at half real time: the 3 s fixture streams for about 6 s. */
const READ_RATE = 0.5;
const STREAMS = 2;
const QUEUED = 4;
const VARIANT = (cb: string) => `/insecure/f:mp3/cb:${cb}/plain/local://stereo.wav`;

const bin = fileURLToPath(new URL('../../bin/audio-proxy.mjs', import.meta.url));
let child: ChildProcess | null = null;

afterAll(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

function exited(p: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  if (p.exitCode !== null || p.signalCode !== null) {
    return Promise.resolve({ code: p.exitCode, signal: p.signalCode });
  }
  return new Promise((resolve) => p.once('exit', (code, signal) => resolve({ code, signal })));
}

/** The row of the error table this answer matches, or null. */
function tableRow(r: RawResponse) {
  let body: { error?: unknown; message?: unknown };
  try {
    body = JSON.parse(r.body.toString('utf8'));
  } catch {
    return null;
  }
  return (
    ERROR_TABLE.find(
      (x) => x.status === r.status && x.error === body.error && x.message === body.message,
    ) ?? null
  );
}

describe('SIGTERM under load', () => {
  it('drains within the grace, exits 0, answers every client, leaves no ffmpeg', {
    timeout: 180_000,
  }, async () => {
    const fixtures = await makeFixtures();
    const ffmpeg = await spawnLogger(resolveFfmpeg({ env: process.env }).path, [
      '-readrate',
      String(READ_RATE),
    ]);
    const port = await freePort();
    const metricsPort = await freePort();
    let stderr = '';
    child = spawn(process.execPath, [bin, 'serve'], {
      env: {
        ...process.env,
        AP_PORT: String(port),
        AP_METRICS_PORT: String(metricsPort),
        AP_METRICS_BIND: '127.0.0.1',
        AP_LOCAL_ROOT: fixtures.dir,
        AP_ALLOW_INSECURE: '1',
        AP_MAX_CONCURRENCY: '2',
        AP_QUEUE_SIZE: '8',
        AP_FFMPEG_PATH: ffmpeg.path,
        AP_LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    const base = `http://127.0.0.1:${port}`;
    const metrics = `http://127.0.0.1:${metricsPort}`;
    await waitFor(
      async () => (await get(base, '/health').catch(() => null))?.status === 200,
      BOOT_TIMEOUT_MS,
      100,
    );

    // The whole variant, rendered before any load (at half real time: about 6 s).
    const reference = await get(base, VARIANT('reference'));
    expect(reference.status).toBe(200);
    expect(reference.complete).toBe(true);

    let firstBytes = 0;
    let ended = 0;
    const streams = Array.from({ length: STREAMS }, (_, i) =>
      get(base, VARIANT(`stream${i}`), { onFirstByte: () => firstBytes++ }).finally(() => ended++),
    );
    await waitFor(() => firstBytes === STREAMS, 30_000);
    const queued = Array.from({ length: QUEUED }, (_, i) =>
      get(base, VARIANT(`queued${i}`)).catch((e: NodeJS.ErrnoException) => e),
    );
    await waitFor(async () => {
      const text = (await get(metrics, '/metrics')).body.toString('utf8');
      return new RegExp(`^audio_proxy_render_queue_depth ${QUEUED}$`, 'm').test(text);
    }, 30_000);
    // Under load: at least one render is still streaming when the signal lands.
    expect(ended).toBeLessThan(STREAMS);

    const t0 = Date.now();
    child.kill('SIGTERM');
    const exit = exited(child);
    // A request after SIGTERM: the listener is closed (refused) or it is answered from the table.
    const late = await new Promise((r) => setTimeout(r, 200)).then(() =>
      get(base, VARIANT('late')).catch((e: NodeJS.ErrnoException) => e),
    );
    const { code, signal } = await exit;
    const drainMs = Date.now() - t0;
    const streamed = await Promise.all(streams);
    const waited = await Promise.all(queued);
    console.log(
      `SIGTERM → exit ${code} in ${drainMs} ms; streams: ${streamed
        .map((r) => `${r.status} ${r.complete ? 'whole' : 'torn'} ${r.body.length} B`)
        .join(', ')}; queued: ${waited
        .map((r) =>
          r instanceof Error
            ? r.code
            : r.status === 200
              ? `200 ${r.complete ? 'whole' : 'torn'} ${r.body.length} B`
              : `${r.status} ${r.body.toString()}`,
        )
        .join(', ')}; late: ${late instanceof Error ? late.code : late.status}`,
    );

    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(drainMs).toBeLessThan(SHUTDOWN_GRACE_MS);
    expect(stderr).toContain('SIGTERM: draining');
    expect(stderr).toContain('new requests answer 503');
    for (const r of streamed) {
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true); // drained, not cut
      expect(r.body.equals(reference.body)).toBe(true);
    }
    for (const r of waited) {
      expect(r).not.toBeInstanceOf(Error);
      const answer = r as RawResponse;
      if (answer.status === 200) {
        expect(reference.body.subarray(0, answer.body.length).equals(answer.body)).toBe(true);
        if (answer.complete) expect(answer.body.equals(reference.body)).toBe(true);
      } else {
        expect(answer.complete).toBe(true);
        expect(tableRow(answer)).toMatchObject({ status: 503, error: 'shutting_down' });
      }
    }
    if (late instanceof Error) expect(late.code).toBe('ECONNREFUSED');
    else expect(tableRow(late)).not.toBeNull();

    const pids = await ffmpeg.pids();
    expect(pids.length).toBeGreaterThanOrEqual(1 + STREAMS);
    expect(pids.filter((p) => isAlive(p))).toEqual([]);
  });
});
