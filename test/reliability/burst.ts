/**
 * The burst driver: N simultaneous requests (distinct variants, so nothing coalesces) against a
 * real proxy at AP_MAX_CONCURRENCY=2, AP_QUEUE_SIZE=32, while the semaphore's queue depth is read
 * from the actor on every transition and `/health` is timed every ~20 ms on its own connection.
 * Used by the CI test (fewer requests) and by `bench/burst.ts` (5,000).
 *
 * **Invariants** (what the report lets a caller assert)
 * - The depth is the actor's own: its snapshot after every transition (`waiters.size` of the slot
 *   table) and the `queued` measurement of every telemetry event; never inferred from answers.
 * - The clients run in a child process, so the proxy's event loop serves the burst and the health
 *   probes but does none of the clients' work; the health figures are the proxy's.
 * - The health prober is a process of its own too (`healthProber.ts`), as an orchestrator's probe
 *   is: in the proxy's process a probe would wait for the loop under test twice (to be served and
 *   to read the answer). It keeps one connection alive, opened before the burst, so a full accept
 *   backlog cannot delay it; each latency is request-start to last byte on its own clock.
 *
 * **Races**
 * - *A probe in flight when the burst ends*: the prober finishes it, then stops; the figures
 *   cover the whole burst.
 * - *Renders still queued when the clients are done*: cannot happen; the clients wait for every
 *   answer, and a queued request answers only after its render.
 *
 * **Events**: none; the returned report is the output.
 */
import { spawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { fileURLToPath } from 'node:url';
import { stats } from '../../src/services/semaphoreClient.js';
import { SEMAPHORE_CHANNELS, type TelemetryMessage } from '../../src/telemetry/channels.js';
import { startHarness, waitFor } from '../integration/harness.js';
import type { BurstClientSummary } from './burstClient.js';
import type { HealthSample, HealthSamples } from './healthProber.js';

/** The limits the issue names. */
export const BURST_MAX_CONCURRENCY = 2;
export const BURST_QUEUE_SIZE = 32;
/** Gap between health probes, in ms. */
const HEALTH_INTERVAL_MS = 20;
/** How long the idle baseline of /health latencies is sampled before the burst, in ms. */
const IDLE_BASELINE_MS = 3_000;
/** A health probe slower than this is listed with its moment in the report, in ms. */
const HEALTH_SLOW_MS = 50;
/** How many of the slowest health probes the printed report lists. */
const SLOW_LISTED = 12;
/** How long the burst may take before the driver gives up on the client process. */
const CLIENT_PROCESS_TIMEOUT_MS = 240_000;

export interface BurstOptions {
  readonly requests: number;
  /** Progress lines (bench); silent by default. */
  readonly log?: (line: string) => void;
}

export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

export interface BurstReport {
  readonly requests: number;
  readonly client: BurstClientSummary;
  /** Largest queue depth in any actor snapshot, and how many snapshots were read. */
  readonly maxDepthSnapshot: number;
  readonly snapshots: number;
  /** Largest `queued` in any semaphore telemetry event, and how many events were read. */
  readonly maxDepthTelemetry: number;
  readonly telemetryEvents: number;
  /** Health latencies in ms during the burst; `failures` counts non-200 or errors. */
  readonly health: LatencySummary & {
    readonly failures: number;
    /** Probes that could not reuse the kept-alive connection during the burst. */
    readonly freshConnections: number;
    /** Probes over HEALTH_SLOW_MS: when (ms after the burst started), how long, new connection. */
    readonly slow: ReadonlyArray<{
      readonly atMs: number;
      readonly ms: number;
      readonly fresh: boolean;
    }>;
  };
  /** The same probes against the idle proxy just before the burst. */
  readonly idleHealth: LatencySummary;
  readonly fiveXx: number;
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

export function summarize(samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 10) / 10;
  return {
    count: sorted.length,
    p50: round(quantile(sorted, 0.5)),
    p95: round(quantile(sorted, 0.95)),
    p99: round(quantile(sorted, 0.99)),
    max: round(sorted[sorted.length - 1] ?? Number.NaN),
  };
}

/** A running `healthProber.ts` process: tell it the phase, collect its samples at the end. */
interface Prober {
  phase(phase: 'idle' | 'burst'): void;
  stop(): Promise<HealthSamples>;
  kill(): void;
}

async function startProber(base: string): Promise<Prober> {
  const script = fileURLToPath(new URL('./healthProber.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', script, base, String(HEALTH_INTERVAL_MS)],
    { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  let err = '';
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString('utf8');
  });
  const messages: Array<(m: unknown) => void> = [];
  child.on('message', (m) => messages.shift()?.(m));
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      messages.push(resolve);
      child.once('error', reject);
      child.once('exit', (code) =>
        reject(new Error(`health prober exited ${code} before answering: ${err.slice(-2000)}`)),
      );
    });
  await next(); // `{ ready: true }`: it listens, so no phase message can be lost
  const samples = next() as Promise<HealthSamples>;
  samples.catch(() => {}); // observed by stop(); a kill after a failed run must not be unhandled
  return {
    phase: (phase) => child.send({ phase }),
    stop: () => {
      child.send({ phase: 'stop' });
      return samples;
    },
    kill: () => child.kill('SIGKILL'),
  };
}

function runClient(base: string, count: number, template: string): Promise<BurstClientSummary> {
  const script = fileURLToPath(new URL('./burstClient.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', script, base, String(count), template],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8');
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), CLIENT_PROCESS_TIMEOUT_MS);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const line = out.trim().split('\n').pop();
      if (code !== 0 || !line) {
        reject(new Error(`burst client exited ${code}: ${err.slice(-2000)}`));
        return;
      }
      resolve(JSON.parse(line) as BurstClientSummary);
    });
  });
}

export async function runBurst(options: BurstOptions): Promise<BurstReport> {
  const { requests } = options;
  if (!Number.isInteger(requests) || requests < 1) throw new RangeError('requests must be ≥ 1');
  const log = options.log ?? (() => {});
  const h = await startHarness({
    AP_MAX_CONCURRENCY: String(BURST_MAX_CONCURRENCY),
    AP_QUEUE_SIZE: String(BURST_QUEUE_SIZE),
  });
  let maxDepthSnapshot = 0;
  let snapshots = 0;
  const subscription = h.proxy.actors.semaphore.subscribe((snapshot) => {
    snapshots++;
    maxDepthSnapshot = Math.max(maxDepthSnapshot, snapshot.context.table.waiters.size);
  });
  let maxDepthTelemetry = 0;
  let telemetryEvents = 0;
  const onTelemetry = (message: unknown) => {
    telemetryEvents++;
    const queued = (message as TelemetryMessage).measurements.queued ?? 0;
    maxDepthTelemetry = Math.max(maxDepthTelemetry, queued);
  };
  for (const name of SEMAPHORE_CHANNELS) diagnostics.subscribe(name, onTelemetry);
  const prober = await startProber(h.url);
  try {
    // Baseline: the same probes against the idle proxy, in the same run, on the same machine.
    prober.phase('idle');
    await new Promise((r) => setTimeout(r, IDLE_BASELINE_MS));
    prober.phase('burst');
    log(`firing ${requests} simultaneous requests`);
    const client = await runClient(
      h.url,
      requests,
      '/insecure/f:mp3/t:0:0.5/cb:burst{i}/plain/local://stereo.wav',
    );
    const samples = await prober.stop();
    if (!samples.idle.some((p) => p.ms !== null))
      throw new Error('/health failed before the burst');
    log(`answered in ${client.elapsedMs} ms; waiting for the slots to drain`);
    await waitFor(async () => {
      const s = await stats(h.proxy.actors.semaphore);
      return s.held === 0 && s.queued === 0;
    }, 30_000);
    const fiveXx = Object.entries(client.statuses)
      .filter(([status]) => Number(status) >= 500)
      .reduce((a, [, n]) => a + n, 0);
    const answered = (list: readonly HealthSample[]) =>
      list.flatMap((p) => (p.ms === null ? [] : [p.ms]));
    return {
      requests,
      client,
      maxDepthSnapshot,
      snapshots,
      maxDepthTelemetry,
      telemetryEvents,
      health: {
        ...summarize(answered(samples.burst)),
        failures: samples.burst.filter((p) => p.ms === null).length,
        freshConnections: samples.burst.filter((p) => p.fresh).length,
        slow: samples.burst.flatMap((p) =>
          p.ms !== null && p.ms > HEALTH_SLOW_MS
            ? [{ atMs: p.atMs, ms: Math.round(p.ms), fresh: p.fresh }]
            : [],
        ),
      },
      idleHealth: summarize(answered(samples.idle)),
      fiveXx,
    };
  } finally {
    prober.kill();
    subscription.unsubscribe();
    for (const name of SEMAPHORE_CHANNELS) diagnostics.unsubscribe(name, onTelemetry);
    await h.close();
  }
}

export function formatBurst(r: BurstReport): string {
  const c = r.client;
  const statuses = Object.entries(c.statuses)
    .map(([s, n]) => `${s} ×${n}`)
    .join(', ');
  const errors = Object.entries(c.errors)
    .map(([s, n]) => `${s} ×${n}`)
    .join(', ');
  const h = r.health;
  return [
    `burst: ${r.requests} simultaneous requests, AP_MAX_CONCURRENCY=${BURST_MAX_CONCURRENCY}, AP_QUEUE_SIZE=${BURST_QUEUE_SIZE}`,
    `  all started in ${c.startedAllMs} ms; last answer after ${c.elapsedMs} ms`,
    `  answers: ${statuses}${errors ? `; transport errors: ${errors}` : ''}; unanswered ${c.unanswered}`,
    `  5xx: ${r.fiveXx}; torn 200s: ${c.torn200}; other answers cut short: ${c.cutShort}; 429s without queue_full or Retry-After ≥ 1: ${c.bad429}; min Retry-After ${c.minRetryAfterS ?? '-'} s`,
    `  queue depth max: ${r.maxDepthSnapshot} over ${r.snapshots} actor snapshots, ${r.maxDepthTelemetry} over ${r.telemetryEvents} telemetry events (bound ${BURST_QUEUE_SIZE})`,
    `  /health every ${HEALTH_INTERVAL_MS} ms: ${h.count} probes, p50 ${h.p50} ms, p95 ${h.p95} ms, p99 ${h.p99} ms, max ${h.max} ms, failures ${h.failures}, new connections ${h.freshConnections}`,
    `  /health idle baseline (same run, ${IDLE_BASELINE_MS} ms before the burst): ${r.idleHealth.count} probes, p50 ${r.idleHealth.p50} ms, p95 ${r.idleHealth.p95} ms, p99 ${r.idleHealth.p99} ms, max ${r.idleHealth.max} ms`,
    `  probes over ${HEALTH_SLOW_MS} ms: ${h.slow.length}; the worst (at ms after the start: took ms): ${
      [...h.slow]
        .sort((a, b) => b.ms - a.ms)
        .slice(0, SLOW_LISTED)
        .map((s) => `${s.atMs}: ${s.ms}${s.fresh ? ' (new connection)' : ''}`)
        .join(', ') || 'none'
    }`,
  ].join('\n');
}
