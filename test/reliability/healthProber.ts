/**
 * The burst's `/health` prober, run as its own process the way an orchestrator's liveness probe
 * is: `node --import tsx healthProber.ts <base> <intervalMs>`, driven over the IPC channel.
 *
 * In the proxy's own process a probe needs that process's event loop twice (once to serve it,
 * once more to read its answer), so every stall of the loop under test would be counted twice
 * and the prober's own work would run on the loop it measures. Out here a probe costs the proxy
 * exactly what a kubelet's costs: one request on a kept-alive connection.
 *
 * **Protocol**: the prober sends `{ ready: true }` once it listens. Then (parent → prober)
 * `{ phase: 'idle' }` starts probing and tags samples as the idle baseline; `{ phase: 'burst' }`
 * tags later samples as the burst (each phase restarts the clock a sample's `atMs` counts from);
 * `{ phase: 'stop' }` finishes the probe in flight, sends one `HealthSamples` message back and
 * exits.
 *
 * **Invariants**
 * - One connection, opened by the first probe and kept alive (`maxSockets: 1`), so a full accept
 *   backlog cannot delay a probe; a probe that had to open a new one is counted.
 * - One probe in flight at a time, started `intervalMs` after the previous one started (or at
 *   once when it took longer); each latency is request start to last byte, on this process's
 *   clock.
 *
 * **Races**
 * - *`stop` arrives mid-probe*: that probe completes and is counted before the report.
 */
import { Agent, request } from 'node:http';

export interface HealthSample {
  /** When the probe started, in ms after its phase (idle or burst) began. */
  readonly atMs: number;
  /** null when the answer was not a 200 or the request failed. */
  readonly ms: number | null;
  readonly fresh: boolean;
}

export interface HealthSamples {
  readonly idle: readonly HealthSample[];
  readonly burst: readonly HealthSample[];
}

type Phase = 'idle' | 'burst' | 'stop';

function probe(base: URL, agent: Agent): Promise<{ ms: number | null; fresh: boolean }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: base.hostname, port: base.port, path: '/health', agent }, (res) => {
      const fresh = !req.reusedSocket;
      res.resume();
      res.on('end', () =>
        resolve({ ms: res.statusCode === 200 ? performance.now() - t0 : null, fresh }),
      );
      res.on('error', () => resolve({ ms: null, fresh }));
    });
    req.on('error', () => resolve({ ms: null, fresh: !req.reusedSocket }));
    req.end();
  });
}

async function main(): Promise<void> {
  const [baseText, intervalText] = process.argv.slice(2);
  const interval = Number(intervalText);
  if (!baseText || !(interval > 0) || !process.send) {
    throw new TypeError('usage (with an IPC channel): healthProber.ts <base-url> <intervalMs>');
  }
  const base = new URL(baseText);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const samples: HealthSamples = { idle: [], burst: [] };
  let phase: Phase | null = null;
  let phaseStart = 0;
  let wake: (() => void) | null = null;
  process.on('message', (m: { phase: Phase }) => {
    phase = m.phase;
    if (phase !== 'stop') phaseStart = performance.now();
    wake?.();
  });
  process.send({ ready: true });
  while (phase === null) await new Promise<void>((r) => (wake = r));
  while ((phase as Phase) !== 'stop') {
    const current = phase as 'idle' | 'burst';
    const started = performance.now();
    const { ms, fresh } = await probe(base, agent);
    (samples[current] as HealthSample[]).push({
      atMs: Math.round(started - phaseStart),
      ms,
      fresh,
    });
    const wait = interval - (performance.now() - started);
    if (wait > 0) {
      await new Promise<void>((r) => {
        const timer = setTimeout(r, wait);
        wake = () => {
          if (phase === 'stop') {
            clearTimeout(timer);
            r();
          }
        };
      });
    }
  }
  agent.destroy();
  process.send(samples, () => process.exit(0));
}

await main();
