/**
 * Nothing outlives its render inside the worker thread either (issue 14, item 2): after a run
 * settles, its MessagePort (and so the run, its child and its buffers, which the port's Comlink
 * listeners reach) is collected. Before the fix, Comlink's registry of proxies held every
 * finished run's endpoint until the thread was recycled: 0 of 12 ports were ever collected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { createWorkerPool, type WorkerPool } from '../../src/workers/pool.js';
import { runRender } from '../../src/workers/renderClient.js';

const RUNS = 12;

let pool: WorkerPool;
beforeAll(async () => {
  pool = createWorkerPool({
    name: 'witness',
    size: 1,
    filename: new URL('../fixtures/workers/witnessTask.ts', import.meta.url),
  });
  await pool.start();
});
afterAll(async () => {
  await pool?.destroy();
});

describe('a settled task in the worker', () => {
  it('leaves nothing reachable: every task port is collected', async () => {
    const ffmpeg = resolveFfmpeg({ env: process.env }).path;
    for (let i = 0; i < RUNS; i++) {
      const r = await runRender(pool, {
        executable: ffmpeg,
        argv: ['-nostdin', '-v', 'error', '-f', 'lavfi', '-i', 'sine=d=0.2', '-f', 'mp3', 'pipe:1'],
        timeoutMs: 10_000,
      });
      expect(r.outcome.type).toBe('done');
    }
    await new Promise((r) => setTimeout(r, 100)); // the ports close on the tick after settling
    const seen = await pool.run<{ registered: number; collected: number }>({ kind: 'witness' });
    expect(seen).toEqual({ registered: RUNS, collected: RUNS });
  });
});
