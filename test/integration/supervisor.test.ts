/**
 * The process supervisor owning the real render pool, through the real server: 100 renders at a
 * recycle limit of 7 all succeed with the restart count the arithmetic predicts; a worker thread
 * killed mid-render fails that render only, its ffmpeg is killed, and the next request renders;
 * a restart in progress never makes /health anything but 200. No ffmpeg survives any test.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { WORKER_POOL_TRANSITION_CHANNEL } from '../../src/proxy.js';
import { restartSupervisor, supervisorStats } from '../../src/services/supervisorClient.js';
import {
  closeLeavingNothing,
  get,
  type Harness,
  isAlive,
  startHarness,
  waitFor,
} from './harness.js';

let h: Harness | null = null;
afterEach(async () => {
  if (!h) return;
  await closeLeavingNothing(h);
  h = null;
});

describe('supervised render pool', () => {
  it('100 renders with AP_MAX_RENDERS_PER_WORKER_POOL=7 all succeed; restarts match the arithmetic', {
    timeout: 180_000,
  }, async () => {
    h = await startHarness({ AP_MAX_RENDERS_PER_WORKER_POOL: '7', AP_QUEUE_SIZE: '128' });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        get(h!.url, `/insecure/f:wav/t:0:0.1/cb:r${i}/plain/local://stereo.wav`),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(100).fill(200));
    expect(results.every((r) => r.complete)).toBe(true);
    // Tasks on the render pool: one warm-up echo at boot, then 100 renders. The supervisor
    // recycles eagerly when a pool has been given its 7th task: floor(101 / 7) restarts.
    await waitFor(
      () => supervisorStats(h!.proxy.pools.render.supervisor).state === 'running',
      30_000,
    );
    expect(supervisorStats(h.proxy.pools.render.supervisor).restarts).toBe(Math.floor(101 / 7));
    expect(h.proxy.pools.render.queueSize).toBe(0);
  });

  it('a worker thread killed mid-render fails only that render, kills its ffmpeg, and the pool keeps serving', {
    timeout: 90_000,
  }, async () => {
    h = await startHarness({}, { ffmpegArgs: ['-re'] });
    const pool = h.proxy.pools.render;
    const torn = await get(h.url, '/insecure/f:mp3/cb:kill/plain/local://stereo.wav', {
      onFirstByte: () => {
        for (const t of pool.threads) void t.terminate();
      },
    });
    expect(torn.status).toBe(200);
    expect(torn.complete).toBe(false);
    const [pid] = await h.spawns();
    await waitFor(() => !isAlive(pid!), 8_000);
    const next = await get(h.url, '/insecure/f:mp3/t:0:1/cb:after/plain/local://stereo.wav');
    expect(next.status).toBe(200);
    expect(next.complete).toBe(true);
  });

  it('/health stays 200 while the pool is drained and replaced', { timeout: 90_000 }, async () => {
    h = await startHarness({}, { ffmpegArgs: ['-re'] });
    const statuses: number[] = [];
    const states = new Set<string>();
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const r = await get(h!.url, '/health');
        statuses.push(r.status);
        const body = JSON.parse(r.body.toString());
        states.add(body.pools.render.state);
        expect(body.pools.render.healthy).toBe(true);
        await new Promise((res) => setTimeout(res, 10));
      }
    })();
    const transitions: Array<{ pool: string; to: string }> = [];
    const onTransition = (m: unknown) => transitions.push(m as { pool: string; to: string });
    diagnostics.subscribe(WORKER_POOL_TRANSITION_CHANNEL, onTransition);
    const rendering = get(h.url, '/insecure/f:mp3/t:0:1.5/cb:swap/plain/local://stereo.wav');
    await new Promise((r) => setTimeout(r, 300));
    expect(await restartSupervisor(h.proxy.pools.render.supervisor)).toBe(true);
    const r = await rendering;
    await waitFor(
      () => supervisorStats(h!.proxy.pools.render.supervisor).state === 'running',
      30_000,
    );
    polling = false;
    await poller;
    expect(r.status).toBe(200);
    expect(r.complete).toBe(true);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(states.has('draining') || states.has('restarting')).toBe(true);
    expect(supervisorStats(h.proxy.pools.render.supervisor).lastRestartReason).toBe('manual');
    diagnostics.unsubscribe(WORKER_POOL_TRANSITION_CHANNEL, onTransition);
    const seenTo = transitions.filter((t) => t.pool === 'render').map((t) => t.to.split('.')[0]);
    expect(seenTo).toEqual(expect.arrayContaining(['draining', 'restarting', 'running']));
    const metrics = (await get(h.metricsUrl, '/metrics')).body.toString();
    expect(metrics).toContain(
      'audio_proxy_worker_pool_last_restart_reason{pool="render",reason="manual"} 1',
    );
    expect(metrics).toContain('audio_proxy_worker_pool_restarts{pool="render"} 1');
  });
});
