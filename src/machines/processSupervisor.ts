/**
 * Owns one long-lived restartable `Process` (a worker pool): starts it on the first task,
 * recycles it after a task budget, replaces it when a health probe fails, and shuts it down.
 *
 * ## Invariants
 * - **At most one incarnation is alive.** A new one is started only after the old one's `stop`
 *   resolved; a stop that rejects is retried once with `force`, and a forced stop that rejects
 *   leaves the supervisor `failed` rather than starting a second process beside the first.
 * - **A task is admitted only in `running`**, on a process whose start resolved and whose stop
 *   has not begun. `taskDone` for an older generation is ignored, so it cannot free a slot of
 *   the new process.
 * - **Nobody is refused while the process changes.** In starting, draining and restarting
 *   acquires wait in `waiters` (FIFO, released in order); only shutdown answers `failed`.
 * - **Health does not flap.** `isHealthy` is false in `failed` only: not started, starting,
 *   draining and restarting all count as healthy.
 * - **No task runs on stale evidence.** An acquire waits for a probe when the last healthy
 *   verdict is older than interval + deadline (the periodic probe is overdue) or a task faulted.
 *
 * ## Races
 * - *Concurrent first tasks*: the first acquire enters `starting`, later ones join `waiters`;
 *   one start, and its outcome (ready or `start_failed`) reaches every one of them.
 * - *Old tasks vs. new process*: draining holds new tasks back until `running` is empty (or the
 *   drain bound abandons the rest: stop with `force`), so a stop never overlaps a live task; an
 *   unhealthy process is stopped with `force` too, as a graceful stop would wait on it.
 * - *Late probe or timer*: probes and their deadline are scoped to `running.probing`; leaving the
 *   state cancels both, so a stale verdict cannot restart a fresh process.
 * - *Stop during start*: `start` cannot be cancelled, so a shutdown waits for it to settle and
 *   then stops whatever it produced; it never races a start with a stop.
 * - *Acquire after a stop request, mid-restart*: it joins `waiters`; if stopping the old process
 *   then ends the run (straight to `stopped`), `stopped`'s entry refuses it with `stopping`.
 *
 * ## Events
 * | Event | Fields | Answer |
 * |---|---|---|
 * | `acquire` | callId (the task id), replyTo? | `ready {generation, process}` now or later, or `failed {reason}` |
 * | `taskDone` | taskId, generation?, fault? | none; `fault` makes the next acquire probe first |
 * | `withdraw` | taskId | none; forgets a waiter or a running task (a caller that gave up) |
 * | `restart` | callId? | `{type:'restart', accepted}`; accepted only in `running` or `failed` |
 * | `stop` | callId?, drainTimeoutMs? | `{type:'stopped', abandoned, stopFailed}` once the process is down |
 * | `stats` | callId? | `SupervisorStats` |
 * Emitted: `reply`; `telemetry {event:'transition', from, to, ...stats after}` per leaf entered.
 */
import {
  type ActorRefFrom,
  type AnyActorRef,
  enqueueActions,
  fromPromise,
  type SnapshotFrom,
  setup,
} from 'xstate';
import { answer, type Caller, callerOf, type ReplyEvent } from '../core/protocol.js';

/** A restartable thing the supervisor owns. `stop` must be idempotent and must also clean up
 * after a `start` that rejected half way; `stop({force:true})` must not wait for running work. */
export interface Process {
  start(): Promise<void>;
  stop(opts: { readonly force: boolean }): Promise<void>;
  /** Resolves `false` (or rejects) when the process cannot answer within `deadlineMs`. */
  healthy(deadlineMs: number): Promise<boolean>;
}

/** A probe is one worker round trip (tens of µs): every 10 s is free and still bounds how long
 * a wedged pool goes unnoticed when it is idle. */
export const HEALTH_INTERVAL_MS = 10_000;
/** An idle worker answers a ping in well under 1 ms; 2 s of silence means a blocked event loop,
 * not a busy one (renders run in ffmpeg, outside the worker's loop). */
export const HEALTH_DEADLINE_MS = 2_000;
/** The render deadline (300 s) plus ffmpeg's TERM→KILL budget (2 s) plus margin: a task still
 * running after this has outlived its own deadline, so abandoning it abandons nothing that could
 * still succeed. Callers shorten it for shutdown via `stop {drainTimeoutMs}`. */
export const DRAIN_TIMEOUT_MS = 310_000;
/** Tasks per incarnation before a recycle (`AP_MAX_RENDERS_PER_WORKER_POOL`; 0 = never). A swap
 * of a 3-thread Piscina pool blocked tasks for ~0.65 s here (measured, 2 cores); at 2 slots and
 * ~0.5 s per render, 500 renders are ~2 min of work, so recycling costs ~0.5 % of throughput. */
export const DEFAULT_MAX_TASKS = 500;

export type RestartReason = 'max_tasks' | 'unhealthy' | 'manual';
export type AcquireFailure = 'start_failed' | 'stop_failed' | 'stopping';
export type SupervisorState =
  | 'notStarted'
  | 'starting'
  | 'running'
  | 'draining'
  | 'restarting'
  | 'failed'
  | 'stopping'
  | 'stopped';

export type AcquireReply =
  | { readonly type: 'ready'; readonly generation: number; readonly process: Process }
  | { readonly type: 'failed'; readonly reason: AcquireFailure };
export interface RestartReply {
  readonly type: 'restart';
  readonly accepted: boolean;
}
export interface StopReply {
  readonly type: 'stopped';
  /** Tasks still running when the last drain bound expired (their owners see process errors). */
  readonly abandoned: number;
  readonly stopFailed: boolean;
}

export interface SupervisorStats {
  readonly state: SupervisorState;
  readonly generation: number;
  readonly restarts: number;
  readonly tasksSinceStart: number;
  readonly running: number;
  readonly waiting: number;
  readonly lastRestartReason: RestartReason | null;
  readonly healthy: boolean;
}

export interface ProcessSupervisorInput {
  readonly process: Process;
  /** Recycle budget, read on every admission; 0 = never. @default () => DEFAULT_MAX_TASKS */
  readonly maxTasks?: () => number;
  /** @default HEALTH_INTERVAL_MS */
  readonly healthIntervalMs?: number;
  /** @default HEALTH_DEADLINE_MS */
  readonly healthDeadlineMs?: number;
  /** @default DRAIN_TIMEOUT_MS */
  readonly drainTimeoutMs?: number;
  /** Clock for health freshness; the same clock as the actor's timers in tests. @default Date.now */
  readonly now?: () => number;
}

export interface ProcessSupervisorContext {
  readonly process: Process;
  readonly maxTasks: () => number;
  readonly healthIntervalMs: number;
  readonly healthDeadlineMs: number;
  readonly drainTimeoutMs: number;
  readonly now: () => number;
  /** Leaf state last published, e.g. `running.serving`; '' before the first entry. */
  readonly phase: string;
  /** Successful starts so far; the current incarnation's number. */
  readonly generation: number;
  readonly restarts: number;
  readonly tasksSinceStart: number;
  /** Task ids admitted on the current generation and not yet done. */
  readonly active: readonly number[];
  /** Acquires waiting for `running`, oldest first. */
  readonly waiters: readonly Caller[];
  readonly lastRestartReason: RestartReason | null;
  /** `now()` of the last successful start or probe; -Infinity after a task reported a fault. */
  readonly lastHealthyAt: number;
  /** Whether the next stop of the current incarnation uses `force`. */
  readonly forceStop: boolean;
  readonly abandoned: number;
  readonly stopRequested: boolean;
  readonly stopDrainTimeoutMs: number;
  readonly stoppers: readonly Caller[];
  readonly stopFailed: boolean;
}

export type ProcessSupervisorEvent =
  | { readonly type: 'acquire'; readonly callId?: number; readonly replyTo?: AnyActorRef }
  | {
      readonly type: 'taskDone';
      readonly taskId: number;
      readonly generation?: number;
      readonly fault?: boolean;
    }
  | { readonly type: 'withdraw'; readonly taskId: number }
  | { readonly type: 'restart'; readonly callId?: number; readonly replyTo?: AnyActorRef }
  | {
      readonly type: 'stop';
      readonly callId?: number;
      readonly replyTo?: AnyActorRef;
      readonly drainTimeoutMs?: number;
    }
  | { readonly type: 'stats'; readonly callId?: number; readonly replyTo?: AnyActorRef };

export const SUPERVISOR_EVENTS = ['transition'] as const;

export interface SupervisorTelemetry extends SupervisorStats {
  readonly type: 'telemetry';
  readonly event: (typeof SUPERVISOR_EVENTS)[number];
  /** The leaf state left (`null` for the initial entry), e.g. `running.probing`. */
  readonly from: string | null;
  readonly to: string;
  readonly abandoned: number;
}

export type ProcessSupervisorEmitted = ReplyEvent | SupervisorTelemetry;

/** The recycle budget as read now; anything but a positive integer means "never". */
export function taskLimitOf(context: ProcessSupervisorContext): number {
  const limit = context.maxTasks();
  return Number.isFinite(limit) && limit >= 1 ? Math.floor(limit) : 0;
}

function stateOf(phase: string): SupervisorState {
  return (phase === '' ? 'notStarted' : phase.split('.')[0]) as SupervisorState;
}

/** Stats from a context (what the last transition published). */
export function statsOfContext(context: ProcessSupervisorContext): SupervisorStats {
  const state = stateOf(context.phase);
  return {
    state,
    generation: context.generation,
    restarts: context.restarts,
    tasksSinceStart: context.tasksSinceStart,
    running: context.active.length,
    waiting: context.waiters.length,
    lastRestartReason: context.lastRestartReason,
    healthy: state !== 'failed',
  };
}

function stopReplyOf(context: ProcessSupervisorContext): StopReply {
  return { type: 'stopped', abandoned: context.abandoned, stopFailed: context.stopFailed };
}

const startProcess = fromPromise<void, { process: Process }>(({ input }) => input.process.start());
const stopProcess = fromPromise<void, { process: Process; force: boolean }>(({ input }) =>
  input.process.stop({ force: input.force }),
);
const probeProcess = fromPromise<boolean, { process: Process; deadlineMs: number }>(({ input }) =>
  input.process.healthy(input.deadlineMs),
);

export const processSupervisorMachine = setup({
  types: {
    context: {} as ProcessSupervisorContext,
    events: {} as ProcessSupervisorEvent,
    emitted: {} as ProcessSupervisorEmitted,
    input: {} as ProcessSupervisorInput,
  },
  actors: { startProcess, stopProcess, probeProcess },
  delays: {
    healthInterval: ({ context }) => context.healthIntervalMs,
    healthDeadline: ({ context }) => context.healthDeadlineMs,
    drainTimeout: ({ context }) => context.drainTimeoutMs,
    stopDrainTimeout: ({ context }) => context.stopDrainTimeoutMs,
  },
  guards: {
    hasTaskId: ({ event }) => event.type === 'acquire' && event.callId !== undefined,
    recycleDue: ({ context }) => {
      const limit = taskLimitOf(context);
      return limit > 0 && context.tasksSinceStart >= limit;
    },
    healthStale: ({ context }) =>
      context.now() - context.lastHealthyAt >= context.healthIntervalMs + context.healthDeadlineMs,
    idle: ({ context }) => context.active.length === 0,
    stopRequested: ({ context }) => context.stopRequested,
    stopWasGraceful: ({ context }) => !context.forceStop,
    probeSaysHealthy: ({ event }) => (event as { output?: unknown }).output === true,
  },
  actions: {
    publish: enqueueActions(({ context, enqueue }, params: { to: string }) => {
      enqueue.assign({ phase: params.to });
      const next = { ...context, phase: params.to };
      enqueue.emit({
        type: 'telemetry',
        event: 'transition',
        from: context.phase === '' ? null : context.phase,
        to: params.to,
        abandoned: context.abandoned,
        ...statsOfContext(next),
      });
    }),
    enqueueWaiter: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'acquire' || event.callId === undefined) return;
      enqueue.assign({
        waiters: [...context.waiters, { callId: event.callId, replyTo: event.replyTo }],
      });
    }),
    // The one admission path: oldest waiters first, never past the recycle budget.
    admitWaiters: enqueueActions(({ context, enqueue }) => {
      const limit = taskLimitOf(context);
      const room =
        limit > 0 ? Math.max(0, limit - context.tasksSinceStart) : context.waiters.length;
      const admitted = context.waiters.slice(0, room);
      if (admitted.length === 0) return;
      enqueue.assign({
        waiters: context.waiters.slice(admitted.length),
        active: [...context.active, ...admitted.map((w) => w.callId)],
        tasksSinceStart: context.tasksSinceStart + admitted.length,
      });
      const ready: AcquireReply = {
        type: 'ready',
        generation: context.generation,
        process: context.process,
      };
      for (const waiter of admitted) answer(enqueue, waiter, ready);
    }),
    failWaiters: enqueueActions(({ context, enqueue }, params: { reason: AcquireFailure }) => {
      if (context.waiters.length === 0) return;
      enqueue.assign({ waiters: [] });
      const failed: AcquireReply = { type: 'failed', reason: params.reason };
      for (const waiter of context.waiters) answer(enqueue, waiter, failed);
    }),
    refuse: enqueueActions(({ event, enqueue }, params: { reason: AcquireFailure }) => {
      if (event.type !== 'acquire') return;
      const caller = callerOf(event);
      if (caller) answer(enqueue, caller, { type: 'failed', reason: params.reason });
    }),
    // One funnel for a task that ends, a caller that gives up, and a late report.
    forget: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'taskDone' && event.type !== 'withdraw') return;
      const { taskId } = event;
      if (event.type === 'taskDone' && event.generation !== undefined) {
        if (event.generation !== context.generation) return; // an abandoned incarnation's task
      }
      if (context.active.includes(taskId)) {
        enqueue.assign({
          active: context.active.filter((id) => id !== taskId),
          lastHealthyAt:
            event.type === 'taskDone' && event.fault ? -Infinity : context.lastHealthyAt,
        });
      } else if (context.waiters.some((w) => w.callId === taskId)) {
        enqueue.assign({ waiters: context.waiters.filter((w) => w.callId !== taskId) });
      }
    }),
    beginGeneration: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({
        generation: context.generation + 1,
        restarts: context.restarts + (context.generation > 0 ? 1 : 0),
        tasksSinceStart: 0,
        active: [],
        lastHealthyAt: context.now(),
        forceStop: false,
        abandoned: 0,
      });
    }),
    setRestartReason: enqueueActions(({ enqueue }, params: { reason: RestartReason }) => {
      enqueue.assign({ lastRestartReason: params.reason });
    }),
    recordHealthy: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ lastHealthyAt: context.now() });
    }),
    abandonActive: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ abandoned: context.active.length, active: [], forceStop: true });
    }),
    forceNextStop: enqueueActions(({ enqueue }) => {
      enqueue.assign({ forceStop: true });
    }),
    // An unhealthy process is stopped with force even after a clean drain: a graceful stop
    // would wait on the very worker that stopped answering.
    condemn: enqueueActions(({ enqueue }) => {
      enqueue.assign({ lastRestartReason: 'unhealthy', forceStop: true });
    }),
    recordStop: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'stop') return;
      const caller = callerOf(event);
      enqueue.assign({
        stopDrainTimeoutMs: context.stopRequested
          ? context.stopDrainTimeoutMs
          : (event.drainTimeoutMs ?? context.drainTimeoutMs),
        stopRequested: true,
        stoppers: caller ? [...context.stoppers, caller] : context.stoppers,
      });
    }),
    recordStopFailed: enqueueActions(({ enqueue }) => {
      enqueue.assign({ stopFailed: true });
    }),
    answerStoppers: enqueueActions(({ context, enqueue }) => {
      const done = stopReplyOf(context);
      for (const caller of context.stoppers) answer(enqueue, caller, done);
      enqueue.assign({ stoppers: [] });
    }),
    // Immediate answers, in the same transition as the request (the `call()` contract).
    answerStopped: enqueueActions(({ context, event, enqueue }) => {
      const caller = callerOf(event);
      if (caller) answer(enqueue, caller, stopReplyOf(context));
    }),
    acceptRestart: enqueueActions(({ event, enqueue }) => {
      const caller = callerOf(event);
      if (caller)
        answer(enqueue, caller, { type: 'restart', accepted: true } satisfies RestartReply);
    }),
    declineRestart: enqueueActions(({ event, enqueue }) => {
      const caller = callerOf(event);
      if (caller)
        answer(enqueue, caller, { type: 'restart', accepted: false } satisfies RestartReply);
    }),
    answerStats: enqueueActions(({ context, event, enqueue }) => {
      const caller = callerOf(event);
      if (caller) answer(enqueue, caller, statsOfContext(context));
    }),
  },
}).createMachine({
  id: 'processSupervisor',
  context: ({ input }) => ({
    process: input.process,
    maxTasks: input.maxTasks ?? (() => DEFAULT_MAX_TASKS),
    healthIntervalMs: input.healthIntervalMs ?? HEALTH_INTERVAL_MS,
    healthDeadlineMs: input.healthDeadlineMs ?? HEALTH_DEADLINE_MS,
    drainTimeoutMs: input.drainTimeoutMs ?? DRAIN_TIMEOUT_MS,
    now: input.now ?? Date.now,
    phase: '',
    generation: 0,
    restarts: 0,
    tasksSinceStart: 0,
    active: [],
    waiters: [],
    lastRestartReason: null,
    lastHealthyAt: -Infinity,
    forceStop: false,
    abandoned: 0,
    stopRequested: false,
    stopDrainTimeoutMs: input.drainTimeoutMs ?? DRAIN_TIMEOUT_MS,
    stoppers: [],
    stopFailed: false,
  }),
  initial: 'notStarted',
  on: {
    taskDone: { actions: 'forget' },
    withdraw: { actions: 'forget' },
    stats: { actions: 'answerStats' },
  },
  states: {
    notStarted: {
      entry: { type: 'publish', params: { to: 'notStarted' } },
      on: {
        acquire: { guard: 'hasTaskId', target: 'starting', actions: 'enqueueWaiter' },
        restart: { actions: 'declineRestart' },
        stop: { target: 'stopped', actions: 'recordStop' },
      },
    },
    starting: {
      entry: { type: 'publish', params: { to: 'starting' } },
      invoke: {
        id: 'start',
        src: 'startProcess',
        input: ({ context }) => ({ process: context.process }),
        onDone: [
          { guard: 'stopRequested', target: 'stopping.killing', actions: 'beginGeneration' },
          { target: 'running', actions: 'beginGeneration' },
        ],
        onError: [
          { guard: 'stopRequested', target: 'stopping.killing' },
          {
            target: 'failed',
            actions: { type: 'failWaiters', params: { reason: 'start_failed' } },
          },
        ],
      },
      on: {
        acquire: { actions: 'enqueueWaiter' },
        restart: { actions: 'declineRestart' },
        stop: {
          actions: ['recordStop', { type: 'failWaiters', params: { reason: 'stopping' } }],
        },
      },
    },
    running: {
      entry: 'admitWaiters',
      initial: 'serving',
      always: {
        guard: 'recycleDue',
        target: 'draining',
        actions: { type: 'setRestartReason', params: { reason: 'max_tasks' } },
      },
      on: {
        restart: {
          target: 'draining',
          actions: ['acceptRestart', { type: 'setRestartReason', params: { reason: 'manual' } }],
        },
        stop: { target: 'stopping', actions: 'recordStop' },
      },
      states: {
        serving: {
          entry: { type: 'publish', params: { to: 'running.serving' } },
          after: { healthInterval: 'probing' },
          on: {
            acquire: [
              { guard: 'healthStale', target: 'probing', actions: 'enqueueWaiter' },
              { actions: ['enqueueWaiter', 'admitWaiters'] },
            ],
          },
        },
        probing: {
          entry: { type: 'publish', params: { to: 'running.probing' } },
          invoke: {
            id: 'probe',
            src: 'probeProcess',
            input: ({ context }) => ({
              process: context.process,
              deadlineMs: context.healthDeadlineMs,
            }),
            onDone: [
              {
                guard: 'probeSaysHealthy',
                target: 'serving',
                actions: ['recordHealthy', 'admitWaiters'],
              },
              {
                target: '#processSupervisor.draining',
                actions: 'condemn',
              },
            ],
            onError: {
              target: '#processSupervisor.draining',
              actions: 'condemn',
            },
          },
          after: {
            healthDeadline: {
              target: '#processSupervisor.draining',
              actions: 'condemn',
            },
          },
          on: {
            acquire: [
              { guard: 'healthStale', actions: 'enqueueWaiter' },
              { actions: ['enqueueWaiter', 'admitWaiters'] },
            ],
          },
        },
      },
    },
    draining: {
      entry: { type: 'publish', params: { to: 'draining' } },
      always: { guard: 'idle', target: 'restarting' },
      after: { drainTimeout: { target: 'restarting', actions: 'abandonActive' } },
      on: {
        acquire: { actions: 'enqueueWaiter' },
        restart: { actions: 'declineRestart' },
        stop: { target: 'stopping', actions: 'recordStop' },
      },
    },
    restarting: {
      initial: 'stoppingOld',
      on: {
        acquire: { actions: 'enqueueWaiter' },
        restart: { actions: 'declineRestart' },
        stop: {
          actions: ['recordStop', { type: 'failWaiters', params: { reason: 'stopping' } }],
        },
      },
      states: {
        stoppingOld: {
          entry: { type: 'publish', params: { to: 'restarting.stoppingOld' } },
          invoke: {
            id: 'stopOld',
            src: 'stopProcess',
            input: ({ context }) => ({ process: context.process, force: context.forceStop }),
            onDone: [
              { guard: 'stopRequested', target: '#processSupervisor.stopped' },
              { target: 'startingNew' },
            ],
            onError: [
              { guard: 'stopRequested', target: '#processSupervisor.stopping.killing' },
              {
                guard: 'stopWasGraceful',
                target: 'stoppingOld',
                reenter: true,
                actions: 'forceNextStop',
              },
              {
                target: '#processSupervisor.failed',
                actions: { type: 'failWaiters', params: { reason: 'stop_failed' } },
              },
            ],
          },
        },
        startingNew: {
          entry: { type: 'publish', params: { to: 'restarting.startingNew' } },
          invoke: {
            id: 'start',
            src: 'startProcess',
            input: ({ context }) => ({ process: context.process }),
            onDone: [
              {
                guard: 'stopRequested',
                target: '#processSupervisor.stopping.killing',
                actions: 'beginGeneration',
              },
              { target: '#processSupervisor.running', actions: 'beginGeneration' },
            ],
            onError: [
              { guard: 'stopRequested', target: '#processSupervisor.stopping.killing' },
              {
                target: '#processSupervisor.failed',
                actions: { type: 'failWaiters', params: { reason: 'start_failed' } },
              },
            ],
          },
        },
      },
    },
    failed: {
      entry: { type: 'publish', params: { to: 'failed' } },
      on: {
        // A retry is a full replacement: whatever the failed start or stop left behind is
        // stopped with force before a new start, so two incarnations never overlap.
        acquire: {
          guard: 'hasTaskId',
          target: 'restarting',
          actions: ['enqueueWaiter', 'forceNextStop'],
        },
        restart: {
          target: 'restarting',
          actions: [
            'acceptRestart',
            'forceNextStop',
            { type: 'setRestartReason', params: { reason: 'manual' } },
          ],
        },
        stop: { target: 'stopping.killing', actions: 'recordStop' },
      },
    },
    stopping: {
      initial: 'draining',
      entry: { type: 'failWaiters', params: { reason: 'stopping' } },
      on: {
        acquire: { actions: { type: 'refuse', params: { reason: 'stopping' } } },
        restart: { actions: 'declineRestart' },
        stop: { actions: 'recordStop' },
      },
      states: {
        draining: {
          entry: { type: 'publish', params: { to: 'stopping.draining' } },
          always: { guard: 'idle', target: 'killing' },
          after: { stopDrainTimeout: { target: 'killing', actions: 'abandonActive' } },
        },
        killing: {
          entry: { type: 'publish', params: { to: 'stopping.killing' } },
          invoke: {
            id: 'kill',
            src: 'stopProcess',
            input: ({ context }) => ({ process: context.process, force: true }),
            onDone: { target: '#processSupervisor.stopped' },
            onError: { target: '#processSupervisor.stopped', actions: 'recordStopFailed' },
          },
        },
      },
    },
    stopped: {
      // A stop requested while an old incarnation was being stopped for a restart comes here
      // without passing `stopping`: a waiter that joined after the request is refused here.
      entry: [
        { type: 'publish', params: { to: 'stopped' } },
        { type: 'failWaiters', params: { reason: 'stopping' } },
        'answerStoppers',
      ],
      on: {
        acquire: { actions: { type: 'refuse', params: { reason: 'stopping' } } },
        restart: { actions: 'declineRestart' },
        stop: { actions: 'answerStopped' },
      },
    },
  },
});

export type ProcessSupervisorActor = ActorRefFrom<typeof processSupervisorMachine>;
export type ProcessSupervisorSnapshot = SnapshotFrom<typeof processSupervisorMachine>;

/** Stats as `/metrics` and `stats()` report them. */
export function statsOf(snapshot: ProcessSupervisorSnapshot): SupervisorStats {
  return statsOfContext(snapshot.context);
}

/** What `/health` reports for this process: false only in `failed`. */
export function isHealthy(snapshot: ProcessSupervisorSnapshot): boolean {
  return !snapshot.matches('failed');
}
