/**
 * One simulated run: the concurrency core of the proxy, real charts and real services, driven by
 * a seed under simulated time, with faults drawn from the seed and invariants checked after
 * every step.
 *
 * ## What is real and what is simulated
 * Real: the semaphore (`machines/semaphore.ts`), `RenderService` with its registry and
 * RenderCoordinators, the Render chart, `TeeService` and the Tee chart, the process supervisor
 * chart under `runSupervised`, the waiting room behind `WaitingRoomService`, and the runtime's
 * `call`/`cast`/`inbox`/monitors. Simulated (the I/O at the edges, each a few lines here):
 * - the **encoder**: the Render's `renderWorker` actor, provided with a fake that runs as a task
 *   under the supervisor (as the real one runs in the supervised pool) and sends the same
 *   events (`worker.pid`, `worker.chunk`, `worker.exited`, `worker.settled`, `worker.dead`);
 * - the **process** the supervisor owns (a worker pool's stand-in): start, stop, health;
 * - the **variant store** the tee writes into;
 * - the **clients**: subscribers that arrive, read, leave early, or read slowly.
 *
 * ## Faults (drawn per seed, then per render, client or process operation)
 * encoder crash (exits 1 mid-stream), encoder hang (goes silent: the Render's watchdog kills it),
 * worker death (the task rejects, the process is dead until replaced), a process start that
 * fails, a process stop that fails, a wedged process (health probes time out), a slow client (it
 * handles each message late and gives up at its consumer deadline), a client abort, and a store
 * write that fails. Shutdown starts at a drawn instant, while clients may still arrive.
 *
 * ## Invariants (checked after every step, then at the end)
 * - slots held ≤ capacity, waiters ≤ queue bound (read from the semaphore's table);
 * - at most one process incarnation alive; a stopped supervisor holds no waiter and no task;
 * - backlog bytes within the budget;
 * - every subscriber that got `done` got exactly the variant's bytes (length and content), and
 *   `done` reports that length; every variant the store committed is exactly those bytes;
 * - at the end: every client settled, nothing held or queued, no coordinator or tee alive, no
 *   backlog byte held, every encoder task reported to its supervisor, no actor still running,
 *   and no timer left armed.
 */
import { createHash } from 'node:crypto';
import {
  type AnyActorRef,
  createActor,
  enqueueActions,
  fromCallback,
  type InspectionEvent,
} from 'xstate';
import { CallError } from '../src/actors/call.js';
import { loadConfig, staticConfig } from '../src/config/index.js';
import { answer } from '../src/core/protocol.js';
import {
  type Primitive,
  primitive,
  RECORDING_FORMAT,
  RECORDING_VERSION,
  type RecordedActor,
  type Recording,
  type RecordingEntry,
} from '../src/core/recording.js';
import type { RenderRequest } from '../src/core/request.js';
import type {
  RenderOutcome,
  RenderSpec,
  RenderWorkerCommand,
  RenderWorkerEvent,
  RenderWorkerInput,
} from '../src/core/worker.js';
import { parseOptions } from '../src/http/options.js';
import {
  type Process,
  type ProcessSupervisorContext,
  processSupervisorMachine,
} from '../src/machines/processSupervisor.js';
import { renderMachine } from '../src/machines/render.js';
import { createBacklogBudget, type SubscriberMessage } from '../src/machines/renderCoordinator.js';
import { semaphoreMachine } from '../src/machines/semaphore.js';
import { RenderService } from '../src/services/renderService.js';
import {
  runSupervised,
  stopSupervisor,
  validateSupervisorInput,
} from '../src/services/supervisorClient.js';
import { TeeService } from '../src/services/teeService.js';
import { WaitingRoomService } from '../src/services/waitingRoomService.js';
import type { StoredVariant, VariantMetadata, VariantStore } from '../src/store/types.js';
import { StoreError } from '../src/store/types.js';
import { SimClock } from './clock.js';
import { Prng } from './prng.js';

/** Known past races the tests can put back, one switch each (never set outside a test). */
export const PLANTS = ['supervisor-stop-during-restart'] as const;
export type Plant = (typeof PLANTS)[number];

export interface SimOptions {
  readonly seed: number;
  /** Reintroduces a known past bug (tests only). */
  readonly plant?: Plant;
  /** Builds the recording (always built when a check fails). @default false */
  readonly record?: boolean;
}

export interface Violation {
  readonly check: string;
  readonly message: string;
  /** The step after which it was seen. */
  readonly step: number;
  readonly t: number;
}

export interface SimResult {
  readonly seed: number;
  readonly plant: Plant | null;
  readonly steps: number;
  /** Simulated milliseconds the run lasted. */
  readonly virtualMs: number;
  /** sha256 of every trace line: the same seed gives the same hash, bit for bit. */
  readonly hash: string;
  readonly violations: readonly Violation[];
  /** Client outcomes by kind (done, error:…, failed:…, aborted). */
  readonly outcomes: Readonly<Record<string, number>>;
  /** Faults that struck, by kind. */
  readonly faults: Readonly<Record<string, number>>;
  /** Warnings the runtime printed during the run (XState's development build), counted. */
  readonly warnings: number;
  /** Every `chart state` the run's snapshots showed. */
  readonly visited: readonly string[];
  /** The run as an audio-proxy recording (src/core/recording.ts), when asked or failing. */
  readonly recording: Recording | null;
}

/** Steps before a run is declared stuck (a livelock is a failure too). */
const MAX_STEPS = 50_000;
/** Simulated time past which a run is declared stuck: beyond every call timeout (370 s). */
const MAX_VIRTUAL_MS = 1_200_000;
/** Trace entries kept for the recording; a longer run keeps its last ones. */
const RECORDING_CAPACITY = 20_000;

const REQUEST_OPTIONS = (() => {
  const parsed = parseOptions('f:mp3');
  if (!parsed.ok) throw new Error('sim: the request options must parse');
  return parsed.options;
})();

class WorkerDied extends Error {
  override readonly name = 'WorkerDied';
}

/** The bytes of variant `key` at `offset`: every render of a key produces the same bytes. */
function byteOf(key: string, offset: number): number {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  h = Math.imul(h ^ offset, 16777619);
  return (h ^ (h >>> 15)) & 0xff;
}

function variantBytes(key: string, from: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) b[i] = byteOf(key, from + i);
  return b;
}

function sameAsVariant(key: string, data: Buffer, length: number): boolean {
  if (data.length !== length) return false;
  for (let i = 0; i < length; i++) if (data[i] !== byteOf(key, i)) return false;
  return true;
}

interface Profile {
  readonly capacity: number;
  readonly queueSize: number;
  readonly keys: readonly string[];
  readonly keyBytes: ReadonlyMap<string, number>;
  readonly clients: number;
  readonly roomSlots: number;
  /** Tickets the waiting room queues (small, so a crowd finds it full). */
  readonly roomLength: number;
  readonly maxTasks: number;
  /** The pool takes up to 300 ms (not 40) to start or stop. */
  readonly slowProcess: boolean;
  readonly healthIntervalMs: number;
  readonly drainTimeoutMs: number;
  readonly shutdownAt: number;
  readonly arrivalsUntil: number;
  readonly p: {
    readonly crash: number;
    readonly hang: number;
    readonly death: number;
    readonly startFail: number;
    readonly stopFail: number;
    readonly wedge: number;
    readonly slow: number;
    readonly abort: number;
    readonly storeFail: number;
    readonly room: number;
  };
}

function drawProfile(r: Prng): Profile {
  const capacity = r.int(1, 3);
  const keys = ['k1', 'k2', 'k3'].slice(0, r.int(1, 3));
  const keyBytes = new Map(keys.map((k) => [k, r.int(1, 3000)]));
  // Most runs end within a few seconds; a quarter run long enough for a hung encoder to meet
  // the Render's watchdog (ffmpeg's timeout plus the 3 s kill budget plus 1 s of slack).
  const shutdownAt = r.chance(0.25) ? r.int(4_000, 12_000) : r.int(50, 2_500);
  // Fault rates: most seeds see a few kinds at once; some see none (the control).
  const rate = (max: number) => (r.chance(0.5) ? r.int(0, max) / 100 : 0);
  return {
    capacity,
    queueSize: r.int(0, 3),
    keys,
    keyBytes,
    clients: r.int(1, 9),
    roomSlots: capacity > 1 && r.chance(0.35) ? 1 : 0,
    roomLength: r.int(1, 4),
    maxTasks: r.pick([0, 1, 2, 3, 5]),
    slowProcess: r.chance(0.3),
    healthIntervalMs: r.int(20, 1500),
    drainTimeoutMs: r.int(20, 800),
    shutdownAt,
    arrivalsUntil: shutdownAt + r.int(-40, 400),
    p: {
      crash: rate(30),
      hang: rate(15),
      death: rate(20),
      startFail: rate(60),
      stopFail: rate(40),
      wedge: rate(30),
      slow: rate(40),
      abort: rate(40),
      storeFail: rate(50),
      room: rate(60),
    },
  };
}

/** Everything one render's encoder will do, drawn when its input is built. */
interface EncoderPlan {
  readonly key: string;
  readonly chunks: readonly number[];
  readonly intervalMs: number;
  readonly fault: { kind: 'crash' | 'hang' | 'death'; at: number } | null;
}

interface Client {
  readonly id: string;
  readonly key: string;
  readonly slow: number;
  outcome: string | null;
  received: Buffer[];
  bytes: number;
  coordinator: AnyActorRef | null;
  /** An unsubscribe or a room call still under way. */
  open: number;
  leaveWanted: boolean;
}

/** The supervisor chart with the stop-during-restart fix taken out (commit 2755dd3). */
export function supervisorLogic(plant: Plant | undefined) {
  if (plant !== 'supervisor-stop-during-restart') return processSupervisorMachine;
  return processSupervisorMachine.provide({
    actions: {
      // Before the fix `stopped`'s entry did not refuse waiters; entering `stopped` is the only
      // place this copy differs from the chart's own `failWaiters`.
      failWaiters: enqueueActions(({ context, enqueue }, params: { reason: string }) => {
        if (context.phase === 'stopped') return;
        if (context.waiters.length === 0) return;
        enqueue.assign({ waiters: [] });
        for (const waiter of context.waiters) {
          answer(enqueue, waiter, { type: 'failed', reason: params.reason });
        }
      }),
    },
  });
}

/**
 * Runs one seed. A failing seed that was run without its recording is run again with it: the
 * run is deterministic, so the second pass is the same run (its trace hash says so), now kept.
 */
export async function simulate(options: SimOptions): Promise<SimResult> {
  const result = await new World(options).run();
  if (result.violations.length === 0 || result.recording) return result;
  const again = await new World({ ...options, record: true }).run();
  if (again.hash !== result.hash) {
    return {
      ...again,
      violations: [
        ...again.violations,
        {
          check: 'determinism',
          message: `seed ${options.seed} ran twice with different traces (${result.hash.slice(0, 12)} then ${again.hash.slice(0, 12)})`,
          step: again.steps,
          t: again.virtualMs,
        },
      ],
    };
  }
  return again;
}

class World {
  readonly seed: number;
  readonly plant: Plant | undefined;
  readonly keepRecording: boolean;
  readonly r: Prng;
  readonly clock: SimClock;
  readonly profile: Profile;
  readonly violations: Violation[] = [];
  readonly outcomes: Record<string, number> = {};
  readonly faults: Record<string, number> = {};
  readonly hash = createHash('sha256');
  readonly entries: RecordingEntry[] = [];
  readonly actors: RecordedActor[] = [];
  readonly actorIds = new Map<AnyActorRef, string>();
  readonly names = new Map<string, string>();
  readonly tracked: AnyActorRef[] = [];
  readonly charts = new Map<AnyActorRef, string>();
  /** `chart state` pairs the run's snapshots showed (coverage across seeds). */
  readonly visited = new Set<string>();
  /** The `seq` of each actor's latest snapshot entry. */
  readonly lastSnapshot = new Map<AnyActorRef, number>();
  readonly plans = new WeakMap<object, EncoderPlan>();
  readonly clients: Client[] = [];
  readonly committed = new Map<string, Buffer>();
  seq = 0;
  step = 0;
  pids = 0;
  tasksOpen = 0;
  /** Process incarnations started and not yet stopped. */
  alive = 0;
  renders = 0;
  warnings = 0;

  constructor(options: SimOptions) {
    this.seed = options.seed;
    this.plant = options.plant;
    this.keepRecording = options.record ?? false;
    this.r = new Prng(options.seed);
    this.clock = new SimClock(this.r);
    this.profile = drawProfile(this.r);
  }

  // --- the trace -------------------------------------------------------------------------

  /** Renames the runtime's process-wide counters (ids, call ids) to first-seen ordinals, so a
   * seed's trace does not depend on what ran before it in the same process. */
  normal(value: string): string {
    return value.replace(/\b(render-|tee-|x:)(\d+)\b/g, (m, prefix: string) =>
      this.ordinal(prefix, m),
    );
  }

  readonly ordinals = new Map<string, Map<string, string>>();

  /** `raw` as the n-th distinct value of its kind seen in this run: `${prefix}${n}`. */
  ordinal(prefix: string, raw: string): string {
    let kind = this.ordinals.get(prefix);
    if (!kind) this.ordinals.set(prefix, (kind = new Map()));
    let n = kind.get(raw);
    if (n === undefined) {
      n = `${prefix}${kind.size + 1}`;
      kind.set(raw, n);
    }
    return n;
  }

  payload(source: unknown): Record<string, Primitive> {
    const out: Record<string, Primitive> = {};
    if (source === null || typeof source !== 'object') return out;
    let n = 0;
    for (const [k, v] of Object.entries(source)) {
      if (n >= 20) break;
      // Call ids (a process-wide counter) and ticket ids (random by design) become ordinals.
      let p: Primitive | undefined;
      if ((k === 'callId' || k === 'taskId') && typeof v === 'number') {
        p = this.ordinal('call-', String(v));
      } else if (k === 'ticketId' && typeof v === 'string') p = this.ordinal('ticket-', v);
      else if (Buffer.isBuffer(v)) p = `<${v.length} bytes>`;
      else {
        p = primitive(v);
        if (p === undefined) continue;
        if (typeof p === 'string') p = this.normal(p);
      }
      out[k] = p;
      n++;
    }
    return out;
  }

  push(entry: RecordingEntry): void {
    const line = JSON.stringify(entry);
    this.hash.update(line);
    this.hash.update('\n');
    if (!this.keepRecording) return;
    this.entries.push(entry);
    if (this.entries.length > RECORDING_CAPACITY) this.entries.shift();
  }

  note(what: string, data: Record<string, Primitive> = {}): void {
    this.push({
      seq: ++this.seq,
      t: this.clock.now(),
      kind: 'telemetry',
      channel: 'sim',
      data: { what, ...data },
    });
  }

  fault(kind: string, data: Record<string, Primitive> = {}): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + 1;
    this.note(`fault:${kind}`, data);
  }

  violate(check: string, message: string, about?: AnyActorRef): void {
    if (this.violations.some((v) => v.check === check && v.message === message)) return;
    this.violations.push({ check, message, step: this.step, t: this.clock.now() });
    // `step` (the recorder's later format field; a reader of the first ignores it) names the
    // entry that broke the check: the last snapshot of the actor it is about, else the last
    // entry. Passed as a variable, so it compiles against the format with or without it.
    const entry = {
      seq: this.seq + 1,
      t: this.clock.now(),
      kind: 'invariant' as const,
      check,
      actor: about ? this.idOf(about) : null,
      message,
      step: (about && this.lastSnapshot.get(about)) ?? (this.seq > 0 ? this.seq : null),
    };
    this.seq++;
    this.push(entry);
  }

  idOf(ref: AnyActorRef): string {
    let id = this.actorIds.get(ref);
    if (id === undefined) {
      id = `a${this.actorIds.size + 1}`;
      this.actorIds.set(ref, id);
    }
    return id;
  }

  readonly inspect = (event: InspectionEvent): void => {
    const ref = event.actorRef as AnyActorRef;
    if (event.type === '@xstate.actor') {
      const id = this.idOf(ref);
      const logic = (ref as { logic?: { id?: string } }).logic;
      const chart = typeof logic?.id === 'string' ? logic.id : null;
      const parent = (ref as { _parent?: AnyActorRef })._parent;
      this.actors.push({
        actor: id,
        chart,
        name: this.normal(chart ?? String(ref.id)),
        parent: parent ? this.idOf(parent) : null,
      });
      this.tracked.push(ref);
      if (chart) this.charts.set(ref, chart);
      this.push({ seq: ++this.seq, t: this.clock.now(), kind: 'actor', actor: id });
    } else if (event.type === '@xstate.event') {
      const type = (event.event as { type?: unknown }).type;
      if (typeof type !== 'string') return;
      this.push({
        seq: ++this.seq,
        t: this.clock.now(),
        kind: 'event',
        actor: this.idOf(ref),
        source: event.sourceRef ? this.idOf(event.sourceRef as AnyActorRef) : null,
        event: { ...this.payload(event.event), type: this.normal(type) },
      });
    } else if (event.type === '@xstate.snapshot') {
      const s = event.snapshot as { status?: string; value?: unknown; context?: unknown };
      this.lastSnapshot.set(ref, this.seq + 1);
      const chart = this.charts.get(ref);
      if (chart && s.value !== undefined) this.visited.add(`${chart} ${stateString(s.value)}`);
      this.push({
        seq: ++this.seq,
        t: this.clock.now(),
        kind: 'snapshot',
        actor: this.idOf(ref),
        status: s.status ?? '',
        value: s.value === undefined ? '' : stateString(s.value),
        details: this.payload(s.context),
      });
    }
  };

  // --- the run ---------------------------------------------------------------------------

  async run(): Promise<SimResult> {
    const restore = this.clock.install();
    // XState's development build (vitest resolves it) warns when a child's completion reaches a
    // parent already final (a Render ending after its coordinator stopped): counted, not
    // printed, and kept out of the trace so the hash is the same under either build.
    const warn = console.warn;
    console.warn = () => {
      this.warnings++;
    };
    let system: System | null = null;
    try {
      system = this.build();
      this.schedule(system);
      await this.drive(system);
      this.finalChecks(system);
    } catch (error) {
      this.violate(
        'crash',
        error instanceof Error ? (error.stack ?? error.message) : String(error),
      );
    } finally {
      if (system) await this.teardown(system);
      restore();
      console.warn = warn;
    }
    return {
      seed: this.seed,
      plant: this.plant ?? null,
      steps: this.step,
      virtualMs: this.clock.now(),
      hash: this.hash.digest('hex'),
      violations: this.violations,
      outcomes: this.outcomes,
      faults: this.faults,
      warnings: this.warnings,
      visited: [...this.visited],
      recording: this.keepRecording ? this.recording() : null,
    };
  }

  recording(): Recording {
    return {
      header: {
        format: RECORDING_FORMAT,
        version: RECORDING_VERSION,
        reason: `simulator seed=${this.seed}${this.plant ? ` plant=${this.plant}` : ''}`,
        timeOrigin: 0,
        capacity: RECORDING_CAPACITY,
        dropped: Math.max(0, this.seq - this.entries.length),
        actors: this.actors,
        initial: [],
      },
      entries: this.entries,
    };
  }

  build(): System {
    const p = this.profile;
    const config = staticConfig(
      loadConfig({
        AP_ALLOW_INSECURE: '1',
        AP_MAX_CONCURRENCY: String(p.capacity),
        AP_QUEUE_SIZE: String(p.queueSize),
        AP_RENDER_TIMEOUT: '10',
        ...(p.roomSlots > 0
          ? {
              AP_WAITING_ROOM_SLOTS: String(p.roomSlots),
              AP_WAITING_ROOM_MAX_LENGTH: String(p.roomLength),
            }
          : {}),
      }),
    );
    const semaphore = createActor(semaphoreMachine, {
      input: { capacity: p.capacity, queueSize: p.queueSize, now: this.clock.now },
      clock: this.clock,
      inspect: this.inspect,
    });
    semaphore.start();
    const process = new SimProcess(this);
    const supervisorInput = {
      process,
      maxTasks: () => p.maxTasks,
      healthIntervalMs: p.healthIntervalMs,
      healthDeadlineMs: 50,
      drainTimeoutMs: p.drainTimeoutMs,
      now: this.clock.now,
    };
    validateSupervisorInput(supervisorInput);
    const supervisor = createActor(supervisorLogic(this.plant), {
      input: supervisorInput,
      clock: this.clock,
      inspect: this.inspect,
    });
    supervisor.start();
    const store = new SimStore(this);
    const tees = new TeeService({ store, config, inspect: this.inspect });
    const budget = createBacklogBudget(() => 16_384);
    const renderLogic = renderMachine.provide({
      actors: { renderWorker: simEncoder(this, supervisor) },
    });
    const service = new RenderService({
      semaphore,
      config,
      renderLogic,
      tees,
      backlogBudget: budget,
      inspect: this.inspect,
      renderInput: (request: RenderRequest) => this.planRender(request.key),
    });
    const room =
      p.roomSlots > 0
        ? new WaitingRoomService({
            semaphore,
            config,
            now: this.clock.now,
            inspect: this.inspect,
          })
        : null;
    return { semaphore, supervisor, process, store, tees, budget, service, room };
  }

  planRender(key: string): RenderWorkerInput {
    const p = this.profile;
    const total = p.keyBytes.get(key) ?? 1;
    const chunks: number[] = [];
    for (let left = total; left > 0; ) {
      const n = Math.min(left, this.r.int(1, 1024));
      chunks.push(n);
      left -= n;
    }
    let fault: EncoderPlan['fault'] = null;
    const at = this.r.int(0, chunks.length);
    if (this.r.chance(p.p.crash)) fault = { kind: 'crash', at };
    else if (this.r.chance(p.p.hang)) fault = { kind: 'hang', at };
    else if (this.r.chance(p.p.death)) fault = { kind: 'death', at };
    const spec: RenderSpec = {
      executable: 'sim-encoder',
      argv: [key],
      timeoutMs: this.r.int(100, 2_000),
    };
    this.plans.set(spec, { key, chunks, intervalMs: this.r.int(1, 60), fault });
    this.renders++;
    return { spec, pool: null };
  }

  schedule(sys: System): void {
    const p = this.profile;
    for (let i = 0; i < p.clients; i++) {
      const client: Client = {
        id: `c${i + 1}`,
        key: this.r.pick(p.keys),
        slow: this.r.chance(p.p.slow) ? this.r.int(5, 200) : 0,
        outcome: null,
        received: [],
        bytes: 0,
        coordinator: null,
        open: 0,
        leaveWanted: false,
      };
      this.clients.push(client);
      // Most clients arrive through the run; some in a crowd around the shutdown, when the
      // listener has not yet closed (the instant most races of a stop live in).
      const at = this.r.chance(0.3)
        ? Math.max(0, p.shutdownAt + this.r.int(-100, 300))
        : this.r.int(0, Math.max(0, p.arrivalsUntil));
      const abortAfter = this.r.chance(p.p.abort) ? this.r.int(0, 400) : null;
      const viaRoom = sys.room !== null && this.r.chance(p.p.room);
      setTimeout(() => {
        this.note('arrive', { client: client.id, key: client.key, room: viaRoom });
        void this.clientRun(sys, client, viaRoom, abortAfter);
      }, at);
    }
    const shutdownSteps: Array<() => void> = [
      () => {
        this.note('shutdown:renders');
        void sys.service.shutdown().catch((e) => this.violate('shutdown', String(e)));
      },
      () => {
        // The room is a system child: it stops after the listener drained, i.e. once every
        // client's run ended (and sent its `runEnded`).
        this.note('shutdown:room');
        const stopWhenDrained = () => {
          if (this.clients.every((c) => c.outcome !== null && c.open === 0)) sys.room?.stop();
          else setTimeout(stopWhenDrained, 25);
        };
        if (sys.room) stopWhenDrained();
      },
      () => {
        this.note('shutdown:tees');
        void sys.tees.drain();
      },
      () => {
        this.note('shutdown:pool');
        void stopSupervisor(sys.supervisor, { drainTimeoutMs: this.r.int(0, 300) }).catch((e) =>
          this.violate('shutdown', `supervisor stop: ${String(e)}`),
        );
      },
    ];
    for (const stepFn of shutdownSteps) setTimeout(stepFn, p.shutdownAt + this.r.int(0, 200));
  }

  async clientRun(
    sys: System,
    client: Client,
    viaRoom: boolean,
    abortAfter: number | null,
  ): Promise<void> {
    const settle = (outcome: string) => {
      if (client.outcome !== null) return;
      client.outcome = outcome;
      const kind = outcome.split(' ')[0] as string;
      this.outcomes[kind] = (this.outcomes[kind] ?? 0) + 1;
      this.note('outcome', { client: client.id, outcome });
    };
    let claimed = false;
    // Every room claim is ended once, whatever ended the response (http/stages/render.ts).
    const endRun = (cancelled: boolean) => {
      if (claimed && sys.room) sys.room.runEnded(client.id, cancelled);
      claimed = false;
    };
    const leave = () => {
      if (client.outcome !== null) return;
      if (!client.coordinator) {
        client.leaveWanted = true;
        return;
      }
      settle('aborted');
      endRun(true);
      client.open++;
      sys.service
        .unsubscribe(client.coordinator, client.id)
        .catch((e) => this.violate('unsubscribe', `${client.id}: ${String(e)}`))
        .finally(() => client.open--);
    };
    if (abortAfter !== null) {
      setTimeout(() => {
        if (client.outcome === null) this.fault('client_abort', { client: client.id });
        leave();
      }, abortAfter);
    }
    if (client.slow > 0) {
      // A slow client still has the delivery's consumer deadline: past it, it is dropped.
      setTimeout(() => {
        if (client.outcome === null) this.fault('slow_client_dropped', { client: client.id });
        leave();
      }, client.slow * 8);
    }
    let adoptSlotId: string | undefined;
    if (viaRoom && sys.room) {
      client.open++;
      try {
        const joined = await sys.room.endpoints().join(client.id);
        if (joined.type === 'ticket') {
          // Heartbeat until ready (or until it is gone), then claim.
          for (let polls = 0; polls < 50 && client.outcome === null; polls++) {
            const s = await sys.room.endpoints().status(client.id);
            if (s.type !== 'ticket' || s.ticket.status !== 'queued') break;
            await new Promise((r) => setTimeout(r, 100));
          }
          const claim = await sys.room.claim(client.id);
          if (claim) {
            claimed = true;
            if (claim.adoptSlotId) adoptSlotId = claim.adoptSlotId;
          }
        }
      } catch (error) {
        if (!(error instanceof CallError && error.code === 'ERR_CALLEE_STOPPED')) {
          this.violate('room', `${client.id}: ${String(error)}`);
        }
      } finally {
        client.open--;
      }
    }
    if (client.outcome !== null || client.leaveWanted) {
      settle('aborted');
      endRun(true);
      return;
    }
    const early: SubscriberMessage[] = [];
    let ready = false;
    const queue: SubscriberMessage[] = [];
    let draining = false;
    const handle = (m: SubscriberMessage) => {
      if (client.outcome !== null) return;
      if (m.type === 'chunk') {
        client.received.push(m.data);
        client.bytes += m.data.length;
      } else if (m.type === 'done') {
        const expected = this.profile.keyBytes.get(client.key) ?? -1;
        const data = Buffer.concat(client.received);
        if (!sameAsVariant(client.key, data, expected)) {
          this.violate(
            'bytes_delivered',
            `${client.id} (${client.key}) got ${data.length} bytes, the variant has ${expected}${data.length === expected ? ' (content differs)' : ''}`,
          );
        }
        if (m.info.bytes !== expected) {
          this.violate(
            'bytes_rendered',
            `done reports ${m.info.bytes} bytes, rendered ${expected}`,
          );
        }
        settle('done');
        endRun(false);
      } else if (m.type === 'error') {
        settle(`error ${m.failure.class}`);
        endRun(true);
      }
    };
    const drain = () => {
      if (draining) return;
      const next = queue.shift();
      if (!next) return;
      draining = true;
      setTimeout(() => {
        draining = false;
        handle(next);
        drain();
      }, client.slow);
    };
    const deliver = (m: SubscriberMessage) => {
      if (client.slow > 0) {
        queue.push(m);
        drain();
      } else handle(m);
    };
    const onMessage = (m: SubscriberMessage) => {
      if (!ready) early.push(m);
      else deliver(m);
    };
    const request: RenderRequest = {
      key: client.key,
      options: REQUEST_OPTIONS,
      source: {
        source: { scheme: 'local', path: `${client.key}.wav` },
        canonical: `local://${client.key}.wav`,
        input: { url: `${client.key}.wav`, kind: 'local' },
      } as unknown as RenderRequest['source'],
      ...(adoptSlotId ? { adoptSlotId } : {}),
    };
    client.open++;
    let outcome: Awaited<ReturnType<RenderService['subscribe']>>;
    try {
      outcome = await sys.service.subscribe(request, client.id, onMessage);
    } catch (error) {
      this.violate('subscribe', `${client.id}: ${String(error)}`);
      settle('crashed');
      endRun(true);
      return;
    } finally {
      client.open--;
    }
    if (outcome.type === 'failed') {
      settle(`failed ${outcome.failure.class}`);
      endRun(true);
      return;
    }
    client.coordinator = outcome.coordinator;
    ready = true;
    for (const data of outcome.backlog) deliver({ type: 'chunk', data });
    for (const m of early.splice(0)) deliver(m);
    if (client.leaveWanted) leave();
  }

  async drive(sys: System): Promise<void> {
    for (;;) {
      await settleMicrotasks();
      this.checkStep(sys);
      if (this.clock.pending === 0) return;
      if (this.step >= MAX_STEPS || this.clock.now() > MAX_VIRTUAL_MS) {
        this.violate(
          'quiescence',
          `still busy after ${this.step} steps and ${this.clock.now()} simulated ms`,
        );
        return;
      }
      this.step++;
      this.clock.fireNext();
    }
  }

  checkStep(sys: System): void {
    const p = this.profile;
    const table = (
      sys.semaphore.getSnapshot().context as {
        table: { holders: Map<string, unknown>; waiters: Map<string, unknown> };
      }
    ).table;
    if (table.holders.size > p.capacity) {
      this.violate(
        'slots',
        `${table.holders.size} slots held, capacity ${p.capacity}`,
        sys.semaphore,
      );
    }
    if (table.waiters.size > p.queueSize) {
      this.violate(
        'queue_bound',
        `${table.waiters.size} waiting, bound ${p.queueSize}`,
        sys.semaphore,
      );
    }
    if (this.alive > 1) this.violate('one_process', `${this.alive} process incarnations alive`);
    const sup = sys.supervisor.getSnapshot();
    const ctx = sup.context as ProcessSupervisorContext;
    if (sup.matches('stopped') && (ctx.waiters.length > 0 || ctx.active.length > 0)) {
      this.violate(
        'participant_released',
        `the supervisor stopped with ${ctx.waiters.length} acquire(s) never answered and ${ctx.active.length} task(s) admitted`,
        sys.supervisor,
      );
    }
    if (sys.budget.heldBytes < 0 || sys.budget.heldBytes > sys.budget.limitBytes()) {
      this.violate('backlog_budget', `${sys.budget.heldBytes} backlog bytes held`);
    }
  }

  finalChecks(sys: System): void {
    if (this.violations.some((v) => v.check === 'quiescence')) return;
    for (const c of this.clients) {
      if (c.outcome === null) this.violate('participant_released', `${c.id} never settled`);
      if (c.open > 0) this.violate('participant_released', `${c.id} still waits on a call`);
    }
    const table = (
      sys.semaphore.getSnapshot().context as {
        table: { holders: Map<string, unknown>; waiters: Map<string, unknown> };
      }
    ).table;
    if (table.holders.size > 0 || table.waiters.size > 0) {
      const held = [...table.holders.keys(), ...table.waiters.keys()].map((k) => this.normal(k));
      this.violate(
        'participant_released',
        `semaphore still holds or queues ${held.join(', ')}`,
        sys.semaphore,
      );
    }
    if (sys.service.live > 0) {
      this.violate('no_actor_left', `${sys.service.live} coordinator(s) alive`);
    }
    if (sys.tees.live > 0) this.violate('no_actor_left', `${sys.tees.live} tee(s) alive`);
    if (sys.budget.heldBytes !== 0) {
      this.violate('participant_released', `${sys.budget.heldBytes} backlog bytes still held`);
    }
    if (this.tasksOpen !== 0) {
      this.violate('participant_released', `${this.tasksOpen} encoder task(s) never reported`);
    }
    if (!sys.supervisor.getSnapshot().matches('stopped')) {
      this.violate('no_actor_left', 'the supervisor did not reach stopped');
    }
    const system = new Set<AnyActorRef>([sys.semaphore, sys.supervisor]);
    if (sys.room) system.add(sys.room.room);
    for (const ref of this.tracked) {
      if (system.has(ref)) continue;
      if (ref.getSnapshot().status === 'active') {
        this.violate(
          'no_actor_left',
          `${this.idOf(ref)} (${this.normal(String(ref.id))}) still running`,
          ref,
        );
      }
    }
  }

  async teardown(sys: System): Promise<void> {
    // What the system's stop does last: the singletons go. Late settlements run on the clock.
    sys.room?.stop();
    sys.supervisor.stop();
    sys.semaphore.stop();
    await settleMicrotasks();
    for (let i = 0; i < 10_000 && this.clock.fireNext(); i++) await settleMicrotasks();
  }
}

interface System {
  readonly semaphore: AnyActorRef;
  readonly supervisor: AnyActorRef;
  readonly process: SimProcess;
  readonly store: SimStore;
  readonly tees: TeeService;
  readonly budget: ReturnType<typeof createBacklogBudget>;
  readonly service: RenderService;
  readonly room: WaitingRoomService | null;
}

function stateString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || typeof value !== 'object') return String(value);
  return Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => {
      const inner = stateString(v);
      return inner === '' || (typeof v === 'object' && Object.keys(v as object).length === 0)
        ? k
        : `${k}.${inner}`;
    })
    .join(', ');
}

const realSetImmediate = globalThis.setImmediate;

/** Lets every promise job the last step queued run (they all run before a macrotask). */
function settleMicrotasks(): Promise<void> {
  return new Promise((resolve) => realSetImmediate(resolve));
}

// --- the simulated edges ---------------------------------------------------------------------

interface Job {
  readonly generation: number;
  /** The process died or was force-stopped under the task. */
  kill(): void;
}

/** The worker pool's stand-in under the supervisor: one incarnation at a time, by contract. */
class SimProcess implements Process {
  readonly #w: World;
  incarnation = 0;
  #up = false;
  #dead = false;
  #wedged = false;
  readonly jobs = new Set<Job>();

  constructor(world: World) {
    this.#w = world;
  }

  get usable(): boolean {
    return this.#up && !this.#dead;
  }

  die(): void {
    this.#dead = true;
  }

  start(): Promise<void> {
    const w = this.#w;
    const fails = w.r.chance(w.profile.p.startFail);
    return new Promise((resolve, reject) => {
      setTimeout(
        () => {
          if (fails) {
            w.fault('process_start_failed');
            reject(new Error('sim: the pool did not start'));
            return;
          }
          this.incarnation++;
          this.#up = true;
          this.#dead = false;
          this.#wedged = w.r.chance(w.profile.p.wedge);
          w.alive++;
          w.note('process:up', { incarnation: this.incarnation, wedged: this.#wedged });
          resolve();
        },
        w.r.int(1, w.profile.slowProcess ? 300 : 40),
      );
    });
  }

  stop({ force }: { readonly force: boolean }): Promise<void> {
    const w = this.#w;
    const fails = !force && w.r.chance(w.profile.p.stopFail);
    return new Promise((resolve, reject) => {
      setTimeout(
        () => {
          if (fails) {
            w.fault('process_stop_failed');
            reject(new Error('sim: the pool did not stop'));
            return;
          }
          if (this.#up) {
            for (const job of [...this.jobs]) job.kill();
            this.#up = false;
            w.alive--;
            w.note('process:down', { incarnation: this.incarnation, force });
          }
          resolve();
        },
        w.r.int(1, w.profile.slowProcess ? 300 : 40),
      );
    });
  }

  healthy(deadlineMs: number): Promise<boolean> {
    const w = this.#w;
    const answerIn = this.#wedged ? deadlineMs * 2 : w.r.int(0, 5);
    const verdict = this.usable && !this.#wedged;
    return new Promise((resolve) => setTimeout(() => resolve(verdict), answerIn));
  }
}

/** The variant store: keeps committed variants in memory, fails a put when the seed says so. */
class SimStore implements VariantStore {
  readonly kind = 'file' as const;
  readonly canPresign = false;
  readonly #w: World;

  constructor(world: World) {
    this.#w = world;
  }

  async put(
    key: string,
    chunks: AsyncIterable<Buffer>,
    metadata: VariantMetadata,
  ): Promise<StoredVariant> {
    const w = this.#w;
    const failAt = w.r.chance(w.profile.p.storeFail) ? w.r.int(0, 3) : -1;
    const parts: Buffer[] = [];
    let n = 0;
    for await (const chunk of chunks) {
      if (n === failAt) {
        w.fault('store_write_failed', { key });
        throw new StoreError('ERR_STORE_WRITE', 'io', 'sim: the store refused a part');
      }
      parts.push(chunk);
      n++;
    }
    if (failAt >= n) {
      w.fault('store_write_failed', { key });
      throw new StoreError('ERR_STORE_WRITE', 'io', 'sim: the commit failed');
    }
    const data = Buffer.concat(parts);
    const expected = w.profile.keyBytes.get(key) ?? -1;
    if (!sameAsVariant(key, data, expected)) {
      w.violate(
        'bytes_stored',
        `the store committed ${data.length} bytes of ${key}, the variant has ${expected}`,
      );
    }
    w.committed.set(key, data);
    w.note('store:commit', { key, bytes: data.length });
    return { key, size: data.length, ...metadata };
  }

  head(): Promise<undefined> {
    return Promise.resolve(undefined);
  }
  get(): Promise<undefined> {
    return Promise.resolve(undefined);
  }
  presign(): Promise<string> {
    return Promise.reject(new StoreError('ERR_STORE_UNSUPPORTED', 'unsupported', 'sim store'));
  }
  delete(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The Render's worker actor, simulated: one task under the supervisor (as the real one runs in
 * the supervised pool), the same events in the same order, faults from the render's plan.
 */
function simEncoder(world: World, supervisor: AnyActorRef) {
  return fromCallback<RenderWorkerCommand, RenderWorkerInput, RenderWorkerEvent>(
    ({ input, sendBack, receive }) => {
      const plan = world.plans.get(input.spec) as EncoderPlan;
      const timers: unknown[] = [];
      const after = (ms: number, fn: () => void) => timers.push(setTimeout(fn, ms));
      const clearAll = () => {
        for (const t of timers.splice(0)) clearTimeout(t as number);
      };
      let phase: 'acquiring' | 'running' | 'exited' | 'over' = 'acquiring';
      let detached = false;
      let pid: number | null = null;
      let sent = 0;
      let finish: ((error?: Error) => void) | null = null;
      let killing: 'worker' | 'main' | null = null;
      let job: Job | null = null;
      const abort = new AbortController();
      const send = (event: RenderWorkerEvent) => {
        if (!detached) sendBack(event);
      };
      const end = (error?: Error) => {
        clearAll();
        phase = 'over';
        const f = finish;
        finish = null;
        f?.(error);
      };
      const settleError = (cls: 'render_failed', exitStatus: number | null, detail: string) => {
        const outcome: RenderOutcome = {
          type: 'error',
          class: cls,
          exitStatus,
          stderrTail: '',
          bytes: sent,
          detail,
        };
        send({ type: 'worker.settled', outcome });
      };
      const emit = (i: number) => {
        if (phase !== 'running') return;
        if (plan.fault && plan.fault.at === i) {
          const kind = plan.fault.kind;
          world.fault(`encoder_${kind}`, { key: plan.key, pid });
          if (kind === 'hang') return; // silent: the Render's watchdog takes over
          if (kind === 'crash') {
            phase = 'exited';
            send({ type: 'worker.exited', exitStatus: 1 });
            settleError('render_failed', 1, 'sim: the encoder crashed');
            end();
            return;
          }
          (job as Job).kill();
          return;
        }
        if (i >= plan.chunks.length) {
          phase = 'exited';
          send({ type: 'worker.exited', exitStatus: 0 });
          send({
            type: 'worker.settled',
            outcome: { type: 'done', exitStatus: 0, bytes: sent, stderrTail: '' },
          });
          end();
          return;
        }
        const n = plan.chunks[i] as number;
        send({ type: 'worker.chunk', data: variantBytes(plan.key, sent, n) });
        sent += n;
        after(plan.intervalMs, () => emit(i + 1));
      };
      const dead = (
        by: 'worker' | 'main' | 'none',
        outcome: 'terminated' | 'killed' | 'already_dead',
      ) => send({ type: 'worker.dead', report: { pid, by, outcome } });
      world.tasksOpen++;
      runSupervised<void>(
        supervisor as Parameters<typeof runSupervised>[0],
        (process, lease) => {
          const sim = process as SimProcess;
          return new Promise<void>((resolve, reject) => {
            finish = (error) => {
              if (job) sim.jobs.delete(job);
              if (error) reject(error);
              else resolve();
            };
            job = {
              generation: lease.generation,
              kill: () => {
                if (phase === 'over') return;
                world.fault('worker_death', { key: plan.key, pid });
                sim.die();
                // A kill already asked for is confirmed by the death (the real handle's cancel
                // resolves when the thread goes); otherwise the task fails.
                if (killing) dead(killing, killing === 'worker' ? 'terminated' : 'killed');
                else settleError('render_failed', null, 'sim: the worker died');
                end(new WorkerDied('sim: the worker died'));
              },
            };
            sim.jobs.add(job);
            if (detached) {
              end();
              return;
            }
            if (!sim.usable) {
              settleError('render_failed', null, 'sim: the pool is not running');
              end(new WorkerDied('sim: the pool is not running'));
              return;
            }
            phase = 'running';
            after(world.r.int(0, 20), () => {
              pid = ++world.pids;
              send({ type: 'worker.pid', pid });
              emit(0);
            });
          });
        },
        { signal: abort.signal, isProcessFault: (e) => e instanceof WorkerDied },
      )
        .catch((error: unknown) => {
          if (phase !== 'acquiring') return; // the task itself failed: already reported
          phase = 'over';
          // Never admitted: refused by the supervisor or withdrawn by a cancel.
          if (abort.signal.aborted) dead('none', 'already_dead');
          else settleError('render_failed', null, `sim: not admitted (${String(error)})`);
        })
        .finally(() => {
          world.tasksOpen--;
        });
      receive((command) => {
        if (command.type === 'ack') return;
        const by = command.type === 'cancel' ? 'worker' : 'main';
        if (phase === 'acquiring') {
          abort.abort();
          return;
        }
        if (phase === 'over') {
          after(0, () => dead('none', 'already_dead'));
          return;
        }
        if (killing) return; // already on its way
        killing = by;
        clearAll();
        after(world.r.int(0, 30), () => {
          dead(by, by === 'worker' ? 'terminated' : 'killed');
          end();
        });
      });
      return () => {
        detached = true;
        if (phase === 'acquiring') abort.abort();
        else if (phase !== 'over') end(); // the worker kills ffmpeg on detach
      };
    },
  );
}
