/**
 * Admission classes under load: `npx tsx bench/classes.ts [--bursts 20] [--queue 8]`.
 *
 * A steady stream of `low` background renders, a thinner stream of `normal` ones and bursts of
 * interactive HTTP requests, all on one proxy (AP_MAX_CONCURRENCY=2), one semaphore and one
 * render pool; the same bursts on the idle system first are the baseline. Prints the semaphore
 * wait percentiles per class for both phases, the outcomes, and who was displaced. The plan is
 * scaled to one render's duration measured at the start (see classesLoad.ts). Exits 1 when
 * something was lost, an interactive request was displaced or refused, a `normal` waiter went
 * before a queued `low` one, or interactive p99 exceeds idle p99 plus one render.
 */
import { basename } from 'node:path';
import { pino } from 'pino';
import { loadConfig, mutableConfig } from '../src/config/index.js';
import type { AdmissionClass } from '../src/machines/semaphore.js';
import { createAudioProxy } from '../src/proxy.js';
import { stats } from '../src/services/semaphoreClient.js';
import { makeFixtures } from '../test/fixtures/audio.js';
import {
  backgroundService,
  type ClassesSystem,
  calibrate,
  type PhaseFigures,
  percentile,
  planFor,
  runPhase,
  settle,
} from '../test/reliability/classesLoad.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const CAPACITY = 2;
const bursts = arg('bursts', 20);
const queue = arg('queue', 8);
const DRAIN_TIMEOUT_MS = 60_000;

const fixtures = await makeFixtures();
const config = mutableConfig(
  loadConfig({
    AP_LOCAL_ROOT: fixtures.dir,
    AP_ALLOW_INSECURE: '1',
    AP_LOG_LEVEL: 'error',
    AP_MAX_CONCURRENCY: String(CAPACITY),
    AP_QUEUE_SIZE: String(queue),
  }),
);
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
const system: ClassesSystem = {
  url,
  semaphore: proxy.actors.semaphore,
  config,
  renderPool: proxy.pools.render,
  ffmpegPath: proxy.ffmpeg.path,
  sourcePath: fixtures.stereoWav,
  sourceName: basename(fixtures.stereoWav),
};
const services = {
  low: backgroundService(system, 'low'),
  normal: backgroundService(system, 'normal'),
};
await calibrate(system);
const renderMs = await calibrate(system, CAPACITY);
const plan = planFor(renderMs, CAPACITY, bursts);
console.log(
  `classes: capacity ${CAPACITY}, queue ${queue}, ${bursts} bursts of ${plan.burstSize} every ${plan.burstEveryMs} ms; ` +
    `low every ${plan.lowEveryMs} ms, normal every ${plan.normalEveryMs} ms (one render ${renderMs.toFixed(0)} ms)`,
);
const idle = await runPhase(system, plan, services, false);
const loaded = await runPhase(system, plan, services, true);
await settle(async () => {
  const s = await stats(proxy.actors.semaphore);
  return s.held === 0 && s.queued === 0 && services.low.live + services.normal.live === 0;
}, DRAIN_TIMEOUT_MS);
await proxy.close();

const fmt = (ms: number) => `${ms.toFixed(0)}`.padStart(7);
function table(name: string, f: PhaseFigures) {
  console.log(`\n${name}: semaphore wait (ms) by class`);
  console.log('class          n     p50     p90     p99     max');
  for (const cls of ['interactive', 'normal', 'low'] as AdmissionClass[]) {
    const w = f.waits[cls];
    if (w.length === 0) continue;
    console.log(
      `${cls.padEnd(11)} ${String(w.length).padStart(4)} ${fmt(percentile(w, 50))} ${fmt(percentile(w, 90))} ${fmt(percentile(w, 99))} ${fmt(percentile(w, 100))}`,
    );
  }
  console.log(`interactive outcomes  ${JSON.stringify(f.interactive)}`);
  if (Object.keys(f.background).length > 0) {
    console.log(`background outcomes   ${JSON.stringify(f.background)}`);
  }
  console.log(`displaced (victims)   ${JSON.stringify(f.displaced)}`);
  console.log(`normal before low     ${f.normalBeforeLow}`);
  console.log(`lost                  ${f.lost}`);
}
table('idle (baseline)', idle);
table('loaded', loaded);
// One render as this machine runs them under this load: the longest a slot that an interactive
// arrival finds busy can stay busy (running renders are never pre-empted).
const render = percentile(loaded.holds, 99);
console.log(
  `\nrender (slot hold) p50: idle ${percentile(idle.holds, 50).toFixed(0)} ms, loaded ${percentile(loaded.holds, 50).toFixed(0)} ms; loaded p99 ${render.toFixed(0)} ms`,
);
const idleP99 = percentile(idle.waits.interactive, 99);
const loadP99 = percentile(loaded.waits.interactive, 99);
console.log(
  `\ninteractive p99: loaded ${loadP99.toFixed(0)} ms vs idle ${idleP99.toFixed(0)} ms + one render ${render.toFixed(0)} ms = ${(idleP99 + render).toFixed(0)} ms`,
);
const interactiveTotal = plan.bursts * plan.burstSize;
const ok =
  idle.lost + loaded.lost === 0 &&
  loaded.interactive['200'] === interactiveTotal &&
  (loaded.displaced.interactive ?? 0) === 0 &&
  loaded.normalBeforeLow === 0 &&
  loadP99 <= idleP99 + render;
console.log(ok ? 'PASS' : 'FAIL');
process.exit(ok ? 0 : 1);
