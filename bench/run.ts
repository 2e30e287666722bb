/**
 * `npm run bench -- <name> [args…]`: runs one benchmark as its own process (each needs a clean
 * process: JIT state, GC flags and child processes must not leak between them). Without a name
 * it lists them. Every benchmark prints its baseline from the same run next to its result.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BENCHES: Record<string, { file: string; flags?: string[]; about: string }> = {
  semaphore: {
    file: 'semaphore.ts',
    flags: ['--expose-gc'],
    about: 'request→grant→release cycles vs p-limit and a naive XState chart; memory per waiter',
  },
  call: { file: 'call.ts', about: 'call() round trips vs a raw actor.send' },
  render: {
    file: 'render.ts',
    about: 'P1/P2/P7: renders through the proxy vs ffmpeg run directly',
  },
  workers: {
    file: 'workers.ts',
    flags: ['--expose-gc'],
    about: 'ffmpeg hosted in worker threads vs spawned on the main thread',
  },
  hit: {
    file: 'hit.ts',
    about: 'HIT throughput vs nginx serving the same file (needs nginx and wrk)',
  },
  cpu: {
    file: 'cpu.ts',
    about: 'proxy CPU ÷ ffmpeg CPU per MISS and per coalesced crowd; ffmpeg start, loopback',
  },
  all: {
    file: 'all.ts',
    about: 'every benchmark in turn; one P1-P7 table, written into docs/performance.md',
  },
  cluster: {
    file: 'cluster.ts',
    about: 'render throughput of 3 cluster nodes on one Redis vs 1 (distinct variants)',
  },
  chaos: {
    file: 'chaos.ts',
    about: 'thousands of requests under faults; outcome counts and the leak audit',
  },
  burst: {
    file: 'burst.ts',
    about: '5,000 simultaneous requests at 2 slots + 32 queued: depth, 429s, /health latency',
  },
  fuzz: {
    file: 'fuzz.ts',
    about: '100k generated hostile requests (--cases N): counts by status, canary, leak check',
  },
  'slow-clients': {
    file: 'slow-clients.ts',
    about: '200 readers at 1/10 bitrate on a 10-minute render: RSS vs bound, render time',
  },
  classes: {
    file: 'classes.ts',
    about: 'live TTFB over HTTP, idle vs a saturating POST /warm load at low (issue #19)',
  },
  supervisor: {
    file: 'supervisor/measure.ts',
    flags: ['--expose-gc'],
    about: 'latency and memory across worker-pool recycles',
  },
  soak: {
    file: 'soak.ts',
    flags: ['--expose-gc'],
    about: '2,000 renders (--renders N): RSS, heap, fds, slots, children at start/middle/end',
  },
  seek: {
    file: 'seek.ts',
    about:
      'headless Chromium, uncached 10-min source: duration shown, seek to 80 % → playing (HLS vs today)',
  },
  'sendfile-load': {
    file: 'sendfile-load.ts',
    about: "nginx's CPU per GiB (sendfile) beside a Node writer's, quiet and beside busy loops",
  },
  threads: {
    file: 'threads.ts',
    about: "a MISS's proxy CPU and wakeups by thread, quiet and beside busy loops (--loads 0,2)",
  },
  'cluster-dispatch': {
    file: 'cluster-dispatch.ts',
    about: 'selectAndReserve + release through Redis with 3 nodes: p50/p99 and pairs/s vs PING',
  },
};

const [name, ...args] = process.argv.slice(2);
const bench = name ? BENCHES[name] : undefined;
if (!bench) {
  console.log('usage: npm run bench -- <name> [args]\n');
  for (const [n, b] of Object.entries(BENCHES)) console.log(`  ${n.padEnd(11)} ${b.about}`);
  process.exit(name ? 2 : 0);
}
const file = fileURLToPath(new URL(bench.file, import.meta.url));
const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
const run = spawnSync(tsx, [...(bench.flags ?? []), file, ...args], { stdio: 'inherit' });
process.exit(run.status ?? 1);
