/**
 * The flight recorder's cost, off and on, each against its baseline in the same run:
 *
 *  R1  semaphore cycles (request → grant → release, 4 callers, 2 slots, the real client and
 *      `publishTelemetry`, as bench/semaphore.ts): `off` (the actor created without an
 *      observer: what the proxy does when `AP_FLIGHT_RECORDER=0`) vs `on` (a recorder of 65,536
 *      entries as the observer, and on the channels), and `no-op` (an observer that does nothing:
 *      what XState's inspection costs by itself). Each measurement in a fresh child process,
 *      the order rotating per round; medians. Reported: ns per cycle both ways, entries per
 *      cycle, and the difference per entry.
 *  R2  MISS renders through a real proxy (a 2 s mono wav to a 1 s mp3, one at a time, each URL
 *      distinct so every one is a MISS): the same proxy with `AP_FLIGHT_RECORDER` 0 vs 65,536,
 *      alternating per round. Reported: wall ms and main-process CPU ms per render, entries per
 *      render, and CPU µs per entry.
 *
 * Run: `npx tsx bench/recorder.ts [--cycles 100000] [--rounds 5] [--renders 12]`. Needs ffmpeg.
 * The figures go to docs/performance.md.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createActor } from 'xstate';
import { loadConfig } from '../src/config/index.js';
import { createFlightRecorder } from '../src/debug/recorder.js';
import { semaphoreMachine } from '../src/machines/semaphore.js';
import { createAudioProxy } from '../src/proxy.js';
import { acquire, release } from '../src/services/semaphoreClient.js';
import { publishTelemetry, SEMAPHORE_PREFIX, wantedOn } from '../src/telemetry/channels.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { loadAvg, processCpuMs } from './cpuclock.js';
import { report } from './report.js';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(process.argv[at + 1]);
}
const CYCLES = flag('cycles', 100_000);
const ROUNDS = flag('rounds', 5);
const RENDERS = flag('renders', 12);
const CAPACITY = 2;
const CALLERS = 4;
const RING = 65_536;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

// --- R1: semaphore cycles, in a child per measurement ------------------------------------------

async function childCycles(mode: 'off' | 'noop' | 'on'): Promise<void> {
  const recorder =
    mode === 'on' ? createFlightRecorder({ capacity: RING, dir: tmpdir() }) : undefined;
  // `noop`: an observer that does nothing, i.e. what XState's inspection costs by itself
  const observer = mode === 'noop' ? () => {} : recorder?.observer;
  const sem = createActor(semaphoreMachine, {
    input: { capacity: CAPACITY, queueSize: CALLERS, telemetry: wantedOn(SEMAPHORE_PREFIX) },
    ...(observer ? { inspect: observer } : {}),
  });
  sem.start();
  const detach = publishTelemetry(sem, SEMAPHORE_PREFIX);
  const run = async (cycles: number) => {
    let left = cycles;
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, c) => {
        while (left-- > 0) {
          const id = `c${c}`;
          const outcome = await acquire(sem, id, { timeout: 60_000 });
          if (outcome.type !== 'granted') throw new Error(`not granted: ${outcome.type}`);
          await release(sem, id);
        }
      }),
    );
  };
  await run(Math.min(20_000, CYCLES)); // warm-up
  const seen0 = recorder?.seen ?? 0;
  const t0 = process.hrtime.bigint();
  await run(CYCLES);
  const ns = Number(process.hrtime.bigint() - t0) / CYCLES;
  const entries = ((recorder?.seen ?? 0) - seen0) / CYCLES;
  detach();
  sem.stop();
  recorder?.close();
  process.stdout.write(`${JSON.stringify({ ns, entries })}\n`);
}

function measureCycles(): { off: number; noop: number; on: number; entries: number } {
  const off: number[] = [];
  const noop: number[] = [];
  const on: number[] = [];
  let entries = 0;
  const modes = ['off', 'noop', 'on'] as const;
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...modes.slice(round % 3), ...modes.slice(0, round % 3)];
    for (const mode of order) {
      const r = spawnSync(
        process.execPath,
        [
          ...process.execArgv,
          fileURLToPath(import.meta.url),
          '--child',
          mode,
          '--cycles',
          String(CYCLES),
        ],
        { encoding: 'utf8' },
      );
      if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
      const m = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as {
        ns: number;
        entries: number;
      };
      (mode === 'off' ? off : mode === 'noop' ? noop : on).push(m.ns);
      if (mode === 'on') entries = m.entries;
    }
  }
  return { off: median(off), noop: median(noop), on: median(on), entries };
}

// --- R2: MISS renders through a real proxy -----------------------------------------------------

function fetchStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

async function measureMisses(): Promise<{
  off: { wall: number; cpu: number };
  on: { wall: number; cpu: number };
  entries: number;
}> {
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const root = mkdtempSync(join(tmpdir(), 'ap-bench-recorder-'));
  execFileSync(ffmpeg, [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440:duration=2',
    '-ac',
    '1',
    join(root, 'a.wav'),
  ]);
  const results = {
    off: { wall: [] as number[], cpu: [] as number[] },
    on: { wall: [] as number[], cpu: [] as number[] },
  };
  let entries = 0;
  let serial = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
    for (const mode of order) {
      const config = loadConfig({
        AP_LOCAL_ROOT: root,
        AP_ALLOW_INSECURE: '1',
        AP_MAX_CONCURRENCY: '2',
        AP_LOG_LEVEL: 'error',
        AP_FLIGHT_RECORDER: mode === 'on' ? String(RING) : '0',
      });
      const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
      const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
      const miss = () => {
        serial++; // a distinct start offset per render: a distinct key, hence a MISS
        return fetchStatus(
          `${url}/insecure/f:mp3/t:0.${String(serial).padStart(3, '0')}:1/plain/local://a.wav`,
        );
      };
      await miss(); // warm
      const seen0 = proxy.recorder?.seen ?? 0;
      const cpu0 = processCpuMs('self');
      const t0 = performance.now();
      for (let i = 0; i < RENDERS; i++) {
        const status = await miss();
        if (status !== 200) throw new Error(`render answered ${status}`);
      }
      const wall = (performance.now() - t0) / RENDERS;
      const cpu = (processCpuMs('self') - cpu0) / RENDERS;
      if (proxy.recorder) entries = (proxy.recorder.seen - seen0) / RENDERS;
      results[mode].wall.push(wall);
      results[mode].cpu.push(cpu);
      await proxy.close();
    }
  }
  return {
    off: { wall: median(results.off.wall), cpu: median(results.off.cpu) },
    on: { wall: median(results.on.wall), cpu: median(results.on.cpu) },
    entries,
  };
}

if (process.argv.includes('--child')) {
  const mode = process.argv[process.argv.indexOf('--child') + 1];
  await childCycles(mode === 'on' ? 'on' : mode === 'noop' ? 'noop' : 'off');
} else {
  const load0 = loadAvg();
  const cycles = measureCycles();
  const perEntryNs = (cycles.on - cycles.off) / cycles.entries;
  console.log(
    `R1 semaphore, ${CYCLES} cycles × ${ROUNDS} rounds (medians), load ${load0.toFixed(1)}`,
  );
  console.log(
    `  off ${cycles.off.toFixed(0)} ns/cycle   no-op observer ${cycles.noop.toFixed(0)} ns/cycle   on ${cycles.on.toFixed(0)} ns/cycle   (${(cycles.on / cycles.off).toFixed(2)}×)`,
  );
  console.log(
    `  ${cycles.entries.toFixed(1)} entries/cycle → ${perEntryNs.toFixed(0)} ns per entry`,
  );
  if (RENDERS === 0) process.exit(0);
  const misses = await measureMisses();
  const cpuPerEntryUs = ((misses.on.cpu - misses.off.cpu) * 1000) / misses.entries;
  console.log(
    `R2 MISS renders, ${RENDERS} × ${ROUNDS} rounds (medians), load ${loadAvg().toFixed(1)}`,
  );
  console.log(
    `  off ${misses.off.wall.toFixed(1)} ms wall, ${misses.off.cpu.toFixed(2)} ms CPU per render`,
  );
  console.log(
    `  on  ${misses.on.wall.toFixed(1)} ms wall, ${misses.on.cpu.toFixed(2)} ms CPU per render`,
  );
  console.log(
    `  ${misses.entries.toFixed(0)} entries/render → ${cpuPerEntryUs.toFixed(2)} µs CPU per entry`,
  );
  report('recorder', {
    cyclesOffNs: cycles.off,
    cyclesOnNs: cycles.on,
    cyclesNoopNs: cycles.noop,
    entriesPerCycle: cycles.entries,
    perEntryNs,
    missOffWallMs: misses.off.wall,
    missOnWallMs: misses.on.wall,
    missOffCpuMs: misses.off.cpu,
    missOnCpuMs: misses.on.cpu,
    entriesPerRender: misses.entries,
    cpuPerEntryUs,
  });
}
