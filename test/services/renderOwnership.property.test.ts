/**
 * Every render is owned to its end (issue 14, item 1), as a fault-injection property over real
 * parts: a real semaphore, the real RenderCoordinator and Render charts, a real worker pool
 * running real ffmpeg, a real Tee writing into a real file store. fast-check picks a handful of
 * requests (one or two keys, so some coalesce, some queue) and one step between admission and
 * delivery at which to throw, on its first, second or third passage:
 *
 * - `renderInput`: building the render's input (argv) for a request;
 * - `createActor`: creating the coordinator (an inspection observer that throws makes it throw);
 * - `supervise`: the coordinator exists but has not started (the system taking it over);
 * - `teeHook`: the store's tee being hooked onto the coordinator;
 * - `poolRun` / `poolReject`: the worker pool refusing the task, synchronously or not;
 * - `storePut`: the store refusing the tee's write;
 * - `subscriber`: a subscriber's message callback (an HTTP response, say) throwing;
 * - `none`: no fault (the control).
 *
 * Whatever was thrown, once every request has ended: no slot held, nothing queued, no
 * coordinator alive, no tee alive, no backlog bytes held, and every ffmpeg spawned is dead.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Actor, createActor, type InspectionEvent } from 'xstate';
import { loadConfig, staticConfig } from '../../src/config/index.js';
import type { RenderRequest } from '../../src/core/request.js';
import { parseOptions } from '../../src/http/options.js';
import {
  createBacklogBudget,
  type SubscriberMessage,
} from '../../src/machines/renderCoordinator.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';
import { renderLogic } from '../../src/services/renderLogic.js';
import { RenderService } from '../../src/services/renderService.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { TeeService } from '../../src/services/teeService.js';
import { FileVariantStore } from '../../src/store/file.js';
import type { VariantStore } from '../../src/store/types.js';
import { INTERNAL_ERROR_STAGES } from '../../src/telemetry/channels.js';
import { buildRenderArgv } from '../../src/workers/argv.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { isAlive } from '../../src/workers/liveness.js';
import { createWorkerPool, type WorkerPool } from '../../src/workers/pool.js';
import { makeFixtures } from '../fixtures/audio.js';
import { spawnLogger, waitFor } from '../integration/harness.js';

const POINTS = [
  'renderInput',
  'createActor',
  'supervise',
  'teeHook',
  'poolRun',
  'poolReject',
  'storePut',
  'subscriber',
  'none',
] as const;
type Point = (typeof POINTS)[number];

const REQUEST_DEADLINE_MS = 15_000; // far above a 2 s mp3's render; a hang is a failure
const RUNS = 24; // each run renders real audio: a few seconds of CPU in all

class Injected extends Error {
  override readonly name = 'Injected';
}

/** Throws `Injected` the `nth` time `point` is passed; counts every passage. */
class Fault {
  readonly #counts = new Map<Point, number>();
  fired = false;
  constructor(
    readonly point: Point,
    readonly nth: number,
  ) {}
  hit(point: Point): void {
    const n = (this.#counts.get(point) ?? 0) + 1;
    this.#counts.set(point, n);
    if (point === this.point && n === this.nth) {
      this.fired = true;
      throw new Injected(`injected at ${point} #${n}`);
    }
  }
}

let pool: WorkerPool;
let source: string;
let storeRoot: string;
let ffmpeg: { path: string; pids(): Promise<number[]> };

beforeAll(async () => {
  const fixtures = await makeFixtures();
  source = fixtures.monoMp3;
  storeRoot = mkdtempSync(join(tmpdir(), 'ap-own-store-'));
  ffmpeg = await spawnLogger(resolveFfmpeg({ env: process.env }).path);
  pool = createWorkerPool({ name: 'render', size: 2 });
  await pool.start();
});

afterAll(async () => {
  await pool?.stop();
});

function system(fault: Fault) {
  const config = staticConfig(
    loadConfig({ AP_ALLOW_INSECURE: '1', AP_RENDER_TIMEOUT: '10', AP_MAX_CONCURRENCY: '2' }),
  );
  const semaphore = createActor(semaphoreMachine, {
    input: { capacity: 2, queueSize: 4, now: () => Date.now() },
  }).start();
  const faultyPool: WorkerPool = Object.create(pool, {
    run: {
      value: (task: unknown, options: unknown) => {
        fault.hit('poolRun');
        try {
          fault.hit('poolReject');
        } catch (error) {
          return Promise.reject(error);
        }
        return pool.run(task, options as Parameters<WorkerPool['run']>[1]);
      },
    },
  });
  const files = new FileVariantStore({ root: storeRoot });
  const store: VariantStore = Object.create(files, {
    put: {
      value: (...args: Parameters<VariantStore['put']>) => {
        fault.hit('storePut');
        return files.put(...args);
      },
    },
  });
  class FaultyTees extends TeeService {
    override onRendering(...args: Parameters<TeeService['onRendering']>) {
      fault.hit('teeHook');
      return super.onRendering(...args);
    }
  }
  const tees = new FaultyTees({ store, config });
  const budget = createBacklogBudget(() => 1 << 20);
  const service = new RenderService({
    semaphore,
    config,
    renderLogic,
    tees,
    backlogBudget: budget,
    supervise: () => fault.hit('supervise'),
    inspect: (event: InspectionEvent) => {
      const logic = (event.actorRef as { logic?: { id?: string } }).logic;
      if (event.type === '@xstate.actor' && logic?.id === 'renderCoordinator') {
        fault.hit('createActor');
      }
    },
    renderInput: (request: RenderRequest) => {
      fault.hit('renderInput');
      return {
        spec: {
          executable: ffmpeg.path,
          argv: buildRenderArgv(request.options, { url: request.source.input.url, kind: 'local' }),
          timeoutMs: 10_000,
        },
        pool: faultyPool,
      };
    },
  });
  return { semaphore, service, tees, budget };
}

function requestFor(key: string): RenderRequest {
  const parsed = parseOptions(`f:mp3/cb:${key}`);
  if (!parsed.ok) throw new Error('test options must parse');
  return {
    key,
    options: parsed.options,
    source: {
      source: { scheme: 'local', path: 'mono.mp3' } as RenderRequest['source']['source'],
      canonical: 'local://mono.mp3',
      input: { url: source, kind: 'local' },
    },
  };
}

let runSeq = 0;

/** One request as the HTTP handler drives it: subscribe, read to the end, leave if need be. */
async function oneRequest(
  service: RenderService,
  fault: Fault,
  key: string,
  delayMs: number,
): Promise<string> {
  await new Promise((r) => setTimeout(r, delayMs));
  const id = `sub-${++runSeq}`;
  let settle!: (how: string) => void;
  const ended = new Promise<string>((r) => {
    settle = r;
  });
  const onMessage = (message: SubscriberMessage) => {
    try {
      fault.hit('subscriber');
    } catch (error) {
      settle('callback threw');
      throw error; // what a broken consumer does: the inbox must cope
    }
    if (message.type === 'done' || message.type === 'error') settle(message.type);
  };
  let outcome: Awaited<ReturnType<RenderService['subscribe']>>;
  try {
    outcome = await service.subscribe(requestFor(key), id, onMessage);
  } catch (error) {
    if (error instanceof Injected) return 'subscribe threw';
    throw error;
  }
  if (outcome.type === 'failed') return `failed ${outcome.failure.class}`;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const how = await Promise.race([
    ended,
    new Promise<string>((r) => {
      timer = setTimeout(() => r('deadline'), REQUEST_DEADLINE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (how === 'deadline') await service.unsubscribe(outcome.coordinator, id);
  return how;
}

async function leftovers(sys: ReturnType<typeof system>) {
  const s = await stats(sys.semaphore);
  return {
    held: s.held,
    queued: s.queued,
    coordinators: sys.service.live,
    tees: sys.tees.live,
    backlogBytes: sys.budget.heldBytes,
  };
}

const NOTHING = { held: 0, queued: 0, coordinators: 0, tees: 0, backlogBytes: 0 };

describe('render ownership under injected faults', () => {
  it('the internal-error stages are a closed set', () => {
    expect(INTERNAL_ERROR_STAGES).toEqual(['request', 'render_start', 'delivery', 'notify']);
  });

  it('whatever throws between admission and delivery, nothing is left held', async () => {
    const fired = new Set<Point>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POINTS),
        fc.integer({ min: 1, max: 3 }),
        fc.array(
          fc.record({ key: fc.constantFrom('a', 'b'), delayMs: fc.integer({ min: 0, max: 40 }) }),
          { minLength: 1, maxLength: 4 },
        ),
        async (point, nth, requests) => {
          const fault = new Fault(point, nth);
          const sys = system(fault);
          const tag = `${point}#${nth}-${++runSeq}`;
          const outcomes = await Promise.all(
            requests.map((r) => oneRequest(sys.service, fault, `${tag}-${r.key}`, r.delayMs)),
          );
          expect(outcomes).not.toContain('deadline');
          try {
            await waitFor(async () => {
              const left = await leftovers(sys);
              return JSON.stringify(left) === JSON.stringify(NOTHING);
            }, 10_000);
          } catch {
            expect({ point, nth, outcomes, ...(await leftovers(sys)) }).toEqual({
              point,
              nth,
              outcomes,
              ...NOTHING,
            });
          }
          for (const pid of await ffmpeg.pids()) expect(isAlive(pid), `ffmpeg ${pid}`).toBe(false);
          if (fault.fired) fired.add(point);
          (sys.semaphore as Actor<typeof semaphoreMachine>).stop();
        },
      ),
      {
        numRuns: RUNS,
        seed: 14,
        endOnFailure: true,
        // Every point at least once, on its first passage, whatever the seed draws.
        examples: POINTS.map((p): [Point, number, { key: 'a' | 'b'; delayMs: number }[]] => [
          p,
          1,
          [{ key: 'a', delayMs: 0 }],
        ]),
      },
    );
    // The property is only as good as the faults it really injected.
    expect([...fired].sort()).toEqual(POINTS.filter((p) => p !== 'none').sort());
  }, 300_000);
});
