/**
 * Measures what a recycle costs: (1) replacing a Piscina pool (destroy, create, first task),
 * (2) memory after many recycles, (3) task latency through the process supervisor while it
 * recycles, against the same load with recycling off. Run: npx tsx --expose-gc measure.ts
 */
import { Piscina } from 'piscina';
import type { Process } from '../../src/machines/processSupervisor.js';
import {
  runSupervised,
  startProcessSupervisor,
  stopSupervisor,
  supervisorStats,
} from '../../src/services/supervisorClient.js';

const FILE = new URL('./echo-task.cjs', import.meta.url).href;
const THREADS = 3; // 2 task slots + 1 health thread, as the render pool is sized on 2 cores
// execArgv: [] keeps tsx's loader out of the threads (the task is plain .cjs; require(esm) in a
// Piscina thread trips a Node 20.20 assertion), as src/workers/pool.ts does.

class PiscinaProcess implements Process {
  pool: Piscina | null = null;
  async start() {
    this.pool = new Piscina({
      filename: FILE,
      minThreads: THREADS,
      maxThreads: THREADS,
      idleTimeout: 60_000,
      execArgv: [],
    });
    await this.pool.run({ value: 'warm' });
  }
  async stop({ force }: { force: boolean }) {
    const pool = this.pool;
    this.pool = null;
    if (pool) await (force ? pool.destroy() : pool.close());
  }
  async healthy(deadlineMs: number) {
    if (!this.pool) return false;
    const t = setTimeout(() => {}, deadlineMs);
    try {
      return (await this.pool.run({ value: 'ping' })) === 'ping';
    } finally {
      clearTimeout(t);
    }
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const mb = (n: number) => (n / 2 ** 20).toFixed(1);

async function swapCost(rounds: number) {
  const p = new PiscinaProcess();
  await p.start();
  const costs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    await p.stop({ force: false });
    await p.start();
    costs.push(performance.now() - t0);
  }
  await p.stop({ force: true });
  return costs;
}

async function memory(recycles: number) {
  const gc = (globalThis as { gc?: () => void }).gc;
  const p = new PiscinaProcess();
  await p.start();
  gc?.();
  const before = process.memoryUsage();
  for (let i = 0; i < recycles; i++) {
    await p.stop({ force: false });
    await p.start();
  }
  gc?.();
  await new Promise((r) => setTimeout(r, 200));
  gc?.();
  const after = process.memoryUsage();
  await p.stop({ force: true });
  return { before, after };
}

async function load(maxTasks: number, total: number, lanes: number, spinMs: number) {
  const process_ = new PiscinaProcess();
  const actor = startProcessSupervisor({ process: process_, maxTasks: () => maxTasks });
  await runSupervised<string, PiscinaProcess>(actor, (p) => p.pool!.run({ value: 'first' }));
  const latencies: number[] = [];
  const swapWaits: number[] = [];
  let errors = 0;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < total) {
        const value = next++;
        const start = performance.now();
        const genBefore = supervisorStats(actor).generation;
        try {
          let waitedSwap = false;
          await runSupervised<number, PiscinaProcess>(actor, (p, lease) => {
            waitedSwap = lease.generation !== genBefore;
            return p.pool!.run({ value, spinMs });
          });
          const ms = performance.now() - start;
          latencies.push(ms);
          if (waitedSwap) swapWaits.push(ms);
        } catch {
          errors++;
        }
      }
    }),
  );
  const wall = performance.now() - t0;
  const stats = supervisorStats(actor);
  await stopSupervisor(actor, { drainTimeoutMs: 1_000 });
  actor.stop();
  return {
    wall,
    errors,
    restarts: stats.restarts,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    max: Math.max(...latencies),
    swapWaits: swapWaits.length,
    swapP99: swapWaits.length ? pct(swapWaits, 99) : 0,
  };
}

const costs = await swapCost(30);
console.log(
  `pool swap (close + new + first task), ${THREADS} threads, 30 rounds: median ${pct(costs, 50).toFixed(1)} ms, p95 ${pct(costs, 95).toFixed(1)} ms, max ${Math.max(...costs).toFixed(1)} ms`,
);
const { before, after } = await memory(200);
console.log(
  `memory over 200 recycles: rss ${mb(before.rss)} → ${mb(after.rss)} MiB, heapUsed ${mb(before.heapUsed)} → ${mb(after.heapUsed)} MiB, external ${mb(before.external)} → ${mb(after.external)} MiB`,
);
for (const spinMs of [5]) {
  for (const maxTasks of [0, 100]) {
    const r = await load(maxTasks, 2000, 2, spinMs);
    console.log(
      `load 2000 tasks × ${spinMs} ms CPU, 2 lanes, maxTasks ${maxTasks}: wall ${r.wall.toFixed(0)} ms, errors ${r.errors}, restarts ${r.restarts}, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, max ${r.max.toFixed(1)} ms; ${r.swapWaits} tasks waited through a swap, their p99 ${r.swapP99.toFixed(1)} ms`,
    );
  }
}
