/**
 * Admission classes under load, shared by `classes.test.ts` (a few seconds, in CI) and
 * `bench/classes.ts` (a minute).
 *
 * Interactive work is what the public listener serves: HTTP GETs, which the handler admits as
 * `interactive` (it names no class). Background work comes from callers that name one, the way
 * warm and batch jobs do: a second and a third `RenderService` with `admissionClass: 'low'` and
 * `'normal'`, sharing the proxy's semaphore, its render pool and the real Render chart. Waits are
 * read from the semaphore's own `acquired` telemetry (ms from queueing to grant), per class.
 *
 * The run: an idle phase (interactive bursts alone: the baseline wait and the render duration),
 * then a loaded phase (a steady stream of low jobs, a thinner stream of normal ones, and the same
 * interactive bursts), then the drain.
 *
 * ## Invariants (what the figures let a caller check)
 * - **Nothing lost**: every interactive request ends 200 with its whole body or 429 with a
 *   `Retry-After`; every background job ends `done` or was told `queue_full` (at admission, or
 *   displaced from the queue). Anything else is counted under `lost`.
 * - **Low goes first**: each `displaced` event names its victim's class and the queue depths
 *   after removal; a `normal` victim while a `low` one was still queued is counted.
 *
 * ## Races
 * - *A burst lands while the queue is full of low jobs*: each interactive arrival displaces the
 *   newest low waiter in the same semaphore step; the victim's coordinator answers its
 *   subscriber `queue_full` and stops. That is the path under test.
 */
import diagnostics from 'node:diagnostics_channel';
import { request as httpRequest } from 'node:http';
import type { AnyActorRef } from 'xstate';
import type { ConfigProvider } from '../../src/config/index.js';
import type { RenderRequest } from '../../src/core/request.js';
import { cacheKey } from '../../src/http/cacheKey.js';
import { parseRoute } from '../../src/http/options.js';
import type { SubscriberMessage } from '../../src/machines/renderCoordinator.js';
import type { AdmissionClass } from '../../src/machines/semaphore.js';
import { renderLogic } from '../../src/services/renderLogic.js';
import { RenderService } from '../../src/services/renderService.js';
import { SEMAPHORE_PREFIX } from '../../src/telemetry/channels.js';
import { buildRenderArgv } from '../../src/workers/argv.js';
import type { WorkerPool } from '../../src/workers/pool.js';

/** The variant every job renders (distinct keys through `cb:`): a real encode, 1 s of it. */
const JOB_OPTIONS = 'f:mp3/br:128/t:0:1';
const SETTLE_POLL_MS = 20;

export interface ClassesSystem {
  readonly url: string;
  readonly semaphore: AnyActorRef;
  readonly config: ConfigProvider;
  readonly renderPool: WorkerPool;
  readonly ffmpegPath: string;
  /** Absolute path of the source every job renders, and its name under the local root. */
  readonly sourcePath: string;
  readonly sourceName: string;
}

export interface ClassesPlan {
  /** Interactive bursts in each phase, and how many requests each burst sends at once. */
  readonly bursts: number;
  readonly burstSize: number;
  /** Time between bursts, ms. */
  readonly burstEveryMs: number;
  /** Time between low / normal job arrivals during the loaded phase, ms. */
  readonly lowEveryMs: number;
  readonly normalEveryMs: number;
}

/** Bursts as large as the slot count, spaced so an idle system drains each before the next. */
const IDLE_DRAIN_FACTOR = 4; // renders per gap: the burst's own, one running low render, slack
/** Low arrivals per render duration: well above what two slots serve, so the queue stays full. */
const LOW_ARRIVALS_PER_RENDER = 4;
/** Longest gap between low arrivals whatever the calibration said: a slow calibration must not
 * leave the queue unsaturated (an excess arrival is a cheap immediate `queue_full`). */
const LOW_MAX_GAP_MS = 50;
const NORMAL_PER_LOW = 4; // normal arrivals are a quarter as frequent

function lowGap(renderMs: number): number {
  return Math.min(LOW_MAX_GAP_MS, Math.max(10, Math.floor(renderMs / LOW_ARRIVALS_PER_RENDER)));
}

/**
 * A plan scaled to the machine: `renderMs` is one render's duration measured on this system
 * (loaded CI boxes differ by an order of magnitude), `capacity` the slot count.
 */
export function planFor(renderMs: number, capacity: number, bursts: number): ClassesPlan {
  return {
    bursts,
    burstSize: capacity,
    burstEveryMs: Math.ceil(renderMs * IDLE_DRAIN_FACTOR),
    lowEveryMs: lowGap(renderMs),
    normalEveryMs: lowGap(renderMs) * NORMAL_PER_LOW,
  };
}

/**
 * `capacity` interactive renders at once on the idle system: the slowest one's wall time in ms
 * (the unit the plan is scaled by; a render beside another is slower than one alone).
 */
export async function calibrate(system: ClassesSystem, capacity = 1): Promise<number> {
  const times = await Promise.all(
    Array.from({ length: capacity }, async () => {
      const started = performance.now();
      const outcome = await interactiveGet(
        system.url,
        `/insecure/${JOB_OPTIONS}/cb:calibrate-${++jobSeq}/plain/local://${system.sourceName}`,
      );
      if (outcome !== '200') throw new Error(`calibration render answered ${outcome}`);
      return performance.now() - started;
    }),
  );
  return Math.max(...times);
}

export interface PhaseFigures {
  /** Semaphore waits (ms) by class, in grant order. */
  readonly waits: Readonly<Record<AdmissionClass, number[]>>;
  /** Slot hold durations (ms) of every render in the phase: what one render costs here, now. */
  readonly holds: number[];
  readonly interactive: Readonly<Record<string, number>>;
  readonly background: Readonly<Record<string, number>>;
  /** Victims by class. */
  readonly displaced: Readonly<Record<string, number>>;
  /** `normal` victims displaced while a `low` waiter remained. */
  readonly normalBeforeLow: number;
  readonly lost: number;
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** GET through the proxy: 200 with the whole body, 429 with Retry-After, or `lost:<why>`. */
function interactiveGet(base: string, path: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        if (res.statusCode === 200 && bytes > 0) resolve('200');
        else if (res.statusCode === 429 && Number(res.headers['retry-after']) >= 1)
          resolve('429 queue_full');
        else resolve(`lost:${res.statusCode}`);
      });
      res.on('aborted', () => resolve('lost:torn'));
    });
    req.on('error', () => resolve('lost:transport'));
    req.end();
  });
}

let jobSeq = 0;

/** One background job through `service`: `done`, `queue_full`, `displaced`, or `lost:<why>`. */
function backgroundJob(service: RenderService, system: ClassesSystem, tag: string) {
  const id = ++jobSeq;
  const route = parseRoute(`/${JOB_OPTIONS}/cb:${tag}-${id}/plain/local://${system.sourceName}`);
  if (!route.ok || route.endpoint !== 'render') throw new TypeError('job route must parse');
  const canonical = `local://${system.sourceName}`;
  const req: RenderRequest = {
    key: cacheKey(route.normalized, canonical),
    options: route.options,
    source: {
      source: { scheme: 'local', path: system.sourceName },
      canonical,
      input: { url: system.sourcePath, kind: 'local' },
    },
  };
  return new Promise<string>((resolve) => {
    const onMessage = (m: SubscriberMessage) => {
      if (m.type === 'done') resolve('done');
      if (m.type === 'error') {
        const displaced = m.failure.detail?.includes('displaced') ?? false;
        resolve(
          m.failure.class === 'queue_full'
            ? displaced
              ? 'displaced'
              : 'queue_full'
            : `lost:${m.failure.class}`,
        );
      }
    };
    service.subscribe(req, `${tag}-${id}`, onMessage).then(
      (outcome) => {
        if (outcome.type === 'failed') {
          resolve(
            outcome.failure.class === 'queue_full' ? 'queue_full' : `lost:${outcome.failure.class}`,
          );
        }
      },
      () => resolve('lost:subscribe'),
    );
  });
}

function tally(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

export function backgroundService(system: ClassesSystem, admissionClass: AdmissionClass) {
  return new RenderService({
    semaphore: system.semaphore,
    config: system.config,
    renderLogic,
    admissionClass,
    renderInput: (request: RenderRequest) => ({
      spec: {
        executable: system.ffmpegPath,
        timeoutMs: system.config.get().renderTimeoutS * 1000,
        argv: buildRenderArgv(request.options, { url: request.source.input.url, kind: 'local' }),
      },
      pool: system.renderPool,
    }),
  });
}

/** Runs one phase; `load` adds the low and normal streams. */
export async function runPhase(
  system: ClassesSystem,
  plan: ClassesPlan,
  services: { low: RenderService; normal: RenderService },
  load: boolean,
): Promise<PhaseFigures> {
  const waits: Record<AdmissionClass, number[]> = {
    interactive: [],
    high: [],
    normal: [],
    low: [],
  };
  const holds: number[] = [];
  const displaced: Record<string, number> = {};
  let normalBeforeLow = 0;
  // Read from the semaphore's diagnostics channels, as an operator would: the proxy's semaphore
  // builds telemetry only for channels that have a subscriber.
  type Message = {
    measurements: Record<string, number>;
    metadata: { class: AdmissionClass };
  };
  const listeners: Record<string, (m: unknown) => void> = {
    acquired: (m) => {
      const e = m as Message;
      waits[e.metadata.class].push(e.measurements.wait ?? 0);
    },
    released: (m) => holds.push((m as Message).measurements.duration ?? 0),
    displaced: (m) => {
      const e = m as Message;
      displaced[e.metadata.class] = (displaced[e.metadata.class] ?? 0) + 1;
      if (e.metadata.class === 'normal' && (e.measurements.queued_low ?? 0) > 0) {
        normalBeforeLow += 1;
      }
    },
  };
  for (const [event, listener] of Object.entries(listeners)) {
    diagnostics.subscribe(`${SEMAPHORE_PREFIX}.${event}`, listener);
  }
  const sub = {
    unsubscribe: () => {
      for (const [event, listener] of Object.entries(listeners)) {
        diagnostics.unsubscribe(`${SEMAPHORE_PREFIX}.${event}`, listener);
      }
    },
  };
  const interactive: Promise<string>[] = [];
  const background: Promise<string>[] = [];
  let streaming = load;
  const stream = async (service: RenderService, tag: string, everyMs: number) => {
    while (streaming) {
      background.push(backgroundJob(service, system, tag));
      await sleep(everyMs);
    }
  };
  const streams = load
    ? [
        stream(services.low, 'low', plan.lowEveryMs),
        stream(services.normal, 'normal', plan.normalEveryMs),
      ]
    : [];
  // let the low queue fill before the first burst
  if (load) await sleep(plan.burstEveryMs);
  for (let b = 0; b < plan.bursts; b++) {
    for (let i = 0; i < plan.burstSize; i++) {
      const tag = `${load ? 'load' : 'idle'}-${b}-${i}-${++jobSeq}`;
      interactive.push(
        interactiveGet(
          system.url,
          `/insecure/${JOB_OPTIONS}/cb:${tag}/plain/local://${system.sourceName}`,
        ),
      );
    }
    await sleep(plan.burstEveryMs);
  }
  streaming = false;
  await Promise.all(streams);
  const interactiveOutcomes = await Promise.all(interactive);
  const backgroundOutcomes = await Promise.all(background);
  sub.unsubscribe();
  const lost = [...interactiveOutcomes, ...backgroundOutcomes].filter((o) =>
    o.startsWith('lost'),
  ).length;
  return {
    waits,
    holds,
    interactive: tally(interactiveOutcomes),
    background: tally(backgroundOutcomes),
    displaced,
    normalBeforeLow,
    lost,
  };
}

/** Waits until `predicate` holds (polling), or rejects after `timeoutMs`. */
export async function settle(predicate: () => Promise<boolean> | boolean, timeoutMs: number) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await predicate()) return;
    await sleep(SETTLE_POLL_MS);
  }
  throw new Error('did not settle');
}
