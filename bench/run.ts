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
    about: 'ffmpeg hosted in worker threads vs spawned on the main thread',
  },
  hit: {
    file: 'hit.ts',
    about: 'HIT throughput vs nginx serving the same file (needs nginx and wrk)',
  },
  supervisor: {
    file: 'supervisor/measure.ts',
    flags: ['--expose-gc'],
    about: 'latency and memory across worker-pool recycles',
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
