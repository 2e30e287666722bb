/**
 * Dispatch through the cluster registry: `selectAndReserve` + `release` round trips against a
 * real redis-server on loopback, with 3 registered nodes (capacity 64 each).
 *
 * Prints, for each variant, p50/p99 latency of one select+release pair (and of each half) and
 * the pairs per second:
 * - `PING` (baseline): one Redis round trip on the same kind of fail-fast connection, the floor
 *   under anything that goes through Redis;
 * - `sequential`: one caller awaiting each selection and its release in turn;
 * - `xN concurrent`: N callers sharing the registry's one connection (commands pipeline).
 * Then the CPU each pair cost this process and the redis-server (INFO cpu; includes the few
 * INFO calls): on a shared, loaded box the wall-clock rates track the load, these do not.
 *
 * Run: `npm run bench -- cluster-dispatch [pairs=5000] [concurrency=16]`. The server is started
 * by the bench on a free loopback port and stopped at the end.
 */
import { performance } from 'node:perf_hooks';
import { createCapacityRegistry } from '../src/cluster/capacityRegistry.js';
import { createMembership } from '../src/cluster/membership.js';
import { closeClusterRedis, connectClusterRedis } from '../src/cluster/redis.js';
import type { Membership } from '../src/cluster/types.js';
import { startRedisServer } from '../test/cluster/redisServer.js';

const PAIRS = Number(process.argv[2] ?? 5_000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
/** Nodes registered, as in the issue's 3-node cluster. */
const NODES = 3;
/** Slots per node: above the concurrency, so no selection is refused and none waits. */
const CAPACITY_PER_NODE = 64;
/** Pairs run first and thrown away: JIT, script cache (EVALSHA) and socket warm-up. */
const WARMUP_PAIRS = 500;

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Redis server CPU seconds so far (user + sys), from INFO. */
async function serverCpuS(redis: ReturnType<typeof connectClusterRedis>): Promise<number> {
  const info = await redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? NaN);
  return read('used_cpu_user') + read('used_cpu_sys');
}

/** Client CPU seconds so far (user + sys) of this process. */
function clientCpuS(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

function cpuLine(name: string, clientS: number, serverS: number, count: number): string {
  const us = (s: number) => `${((s / count) * 1e6).toFixed(0).padStart(4)} µs`;
  return `${name.padEnd(34)} CPU per pair: client ${us(clientS)}, redis-server ${us(serverS)}`;
}

function summary(name: string, samples: number[], wallMs: number, count: number): string {
  const sorted = Float64Array.from(samples).sort();
  const rate = Math.round((count / wallMs) * 1_000);
  const us = (ms: number) => `${(ms * 1_000).toFixed(0).padStart(6)} µs`;
  return `${name.padEnd(34)} p50 ${us(quantile(sorted, 0.5))}  p99 ${us(quantile(sorted, 0.99))}  ${String(rate).padStart(7)} /s`;
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const members: Membership[] = [];
  const registry = createCapacityRegistry({ url: server.url });
  const ping = connectClusterRedis(server.url, 'bench-ping');
  try {
    for (let i = 1; i <= NODES; i++) {
      const m = createMembership({
        url: server.url,
        node: { id: `node-${i}`, url: `http://127.0.0.1:${8000 + i}`, capacity: CAPACITY_PER_NODE },
      });
      members.push(m);
      await m.start();
    }
    await new Promise<void>((resolve) => {
      if (ping.status === 'ready') resolve();
      else ping.once('ready', () => resolve());
    });

    // Baseline: PING round trips.
    const pings: number[] = [];
    let t0 = performance.now();
    for (let i = 0; i < PAIRS; i++) {
      const s = performance.now();
      await ping.ping();
      pings.push(performance.now() - s);
    }
    const pingWall = performance.now() - t0;

    for (let i = 0; i < WARMUP_PAIRS; i++) {
      await (await registry.selectAndReserve('render'))!.release();
    }

    // Sequential.
    const pair: number[] = [];
    const select: number[] = [];
    const release: number[] = [];
    const chosen = new Map<string, number>();
    let c0 = clientCpuS();
    let r0 = await serverCpuS(ping);
    t0 = performance.now();
    for (let i = 0; i < PAIRS; i++) {
      const s = performance.now();
      const r = await registry.selectAndReserve('render');
      const m = performance.now();
      if (!r) throw new Error('a selection was refused: the bench is misconfigured');
      await r.release();
      const e = performance.now();
      select.push(m - s);
      release.push(e - m);
      pair.push(e - s);
      chosen.set(r.worker.id, (chosen.get(r.worker.id) ?? 0) + 1);
    }
    const seqWall = performance.now() - t0;
    const seqCpu = [clientCpuS() - c0, (await serverCpuS(ping)) - r0] as const;

    // Concurrent callers.
    const cpair: number[] = [];
    const perCaller = Math.ceil(PAIRS / CONCURRENCY);
    c0 = clientCpuS();
    r0 = await serverCpuS(ping);
    t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = 0; i < perCaller; i++) {
          const s = performance.now();
          const r = await registry.selectAndReserve('render');
          if (!r) throw new Error('a selection was refused: the bench is misconfigured');
          await r.release();
          cpair.push(performance.now() - s);
        }
      }),
    );
    const conWall = performance.now() - t0;
    const conCpu = [clientCpuS() - c0, (await serverCpuS(ping)) - r0] as const;

    console.log(
      `cluster-dispatch: redis-server on loopback, ${NODES} nodes × ${CAPACITY_PER_NODE} slots, ${PAIRS} pairs`,
    );
    console.log(summary('baseline: PING round trip', pings, pingWall, PAIRS));
    console.log(summary('sequential: select + release', pair, seqWall, PAIRS));
    console.log(summary('  of which selectAndReserve', select, seqWall, PAIRS));
    console.log(summary('  of which release', release, seqWall, PAIRS));
    console.log(
      summary(
        `x${CONCURRENCY} concurrent: select + release`,
        cpair,
        conWall,
        perCaller * CONCURRENCY,
      ),
    );
    console.log(cpuLine('sequential', seqCpu[0], seqCpu[1], PAIRS));
    console.log(
      cpuLine(`x${CONCURRENCY} concurrent`, conCpu[0], conCpu[1], perCaller * CONCURRENCY),
    );
    console.log(
      `rotation over the sequential run: ${[...chosen].map(([id, n]) => `${id}=${n}`).join(' ')}`,
    );
    const stats = registry.stats();
    console.log(`registry: ${stats.state}, ${stats.selections} selections, ${stats.errors} errors`);
  } finally {
    await registry.close();
    for (const m of members) await m.stop();
    await closeClusterRedis(ping);
    await server.stop();
  }
}

await main();
