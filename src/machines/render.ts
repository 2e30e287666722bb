/**
 * Render: the owner of one ffmpeg, as its parent (a RenderCoordinator) sees it.
 *
 * ffmpeg itself runs in a Piscina worker thread (the `renderWorker` actor, provided by the render
 * service (`services/renderLogic.ts`): a render task, its
 * Comlink control, and the main-thread kill fallback). This chart is the contract around it:
 * what the parent hears and when, and what a `cancel` call waits for. It does no I/O.
 *
 * ## Invariants
 * - **Exactly one terminal message** to the parent: `render.done`, `render.error` or
 *   `render.cancelled`, and the machine is final right after it.
 * - **Final only once ffmpeg is dead**: the task settles after the worker reaped ffmpeg, and
 *   every kill path (worker, main thread) completes before `worker.dead` arrives.
 * - **`cancel` is a barrier**: its reply, and `render.cancelled`, are sent only once the kill is
 *   confirmed; chunks arriving meanwhile are dropped.
 * - **Chunks before done**: the worker settles only after every chunk was delivered, so
 *   `render.done` never overtakes a `render.chunk`.
 *
 * ## Races
 * - *Cancel vs. natural end*: whichever reaches the chart first wins; a cancel after ffmpeg
 *   exited still waits for the task to leave its thread, then answers `render.cancelled`.
 * - *A hung worker*: the watchdog (ffmpeg's timeout plus the whole kill budget plus slack) runs
 *   until ffmpeg's exit is reported; when it fires the main thread kills the pid and the render
 *   fails with `timeout`. After the exit nothing is timed: draining is the consumer's pace.
 * - *A dead worker*: its task rejects; the actor kills the pid from the main thread and only
 *   then reports `render_failed`.
 * - *Cancel to a finished Render*: the actor has stopped, so `call` rejects with
 *   `ERR_CALLEE_STOPPED`, which means ffmpeg is already gone.
 *
 * ## Events
 * | Event | From → to | When |
 * |---|---|---|
 * | `ack(bytes)` | parent → Render | the parent consumed `bytes`; forwarded to the worker |
 * | `cancel` (call or cast) | parent → Render | reply `{type:'dead', …}` once ffmpeg is dead |
 * | `render.pid` | Render → parent | ffmpeg spawned |
 * | `render.chunk` | Render → parent | a batch of output (a transferred buffer) |
 * | `render.done` / `render.error` | Render → parent | ffmpeg finished / failed or timed out |
 * | `render.cancelled` | Render → parent | after a cancel, ffmpeg is dead |
 */
import {
  type AnyActorRef,
  assign,
  type CallbackActorLogic,
  enqueueActions,
  sendParent,
  sendTo,
  setup,
} from 'xstate';
import type { ProcessFailure, RenderInfo } from '../core/failure.js';
import { answer, type CallEnvelope, type ReplyEvent } from '../core/protocol.js';
import {
  type CancelReport,
  KILL_WAIT_MS,
  type RenderOutcome,
  type RenderSpec,
  type RenderWorkerCommand,
  type RenderWorkerEvent,
  type RenderWorkerInput,
  TERM_GRACE_MS,
} from '../core/worker.js';

/** Margin past the worker's own timeout and kill budget before the main thread steps in. */
export const WATCHDOG_SLACK_MS = 1_000; // a live worker reports well within this; only a hung one misses it

/** The render's input: what to run, and the pool it runs in (opaque to the chart). */
export type RenderInput = RenderWorkerInput;

/** The reply to a `cancel` call, sent once ffmpeg is dead. */
export type CancelReply = { readonly type: 'dead' } & CancelReport;

export type RenderEvent =
  | { readonly type: 'ack'; readonly bytes: number }
  | ({ readonly type: 'cancel' } & CallEnvelope)
  | RenderWorkerEvent;

/** What the parent receives (via `sendParent`). */
export type RenderParentEvent =
  | { readonly type: 'render.pid'; readonly pid: number }
  | { readonly type: 'render.chunk'; readonly data: Buffer }
  | { readonly type: 'render.done'; readonly info: RenderInfo }
  | { readonly type: 'render.error'; readonly failure: ProcessFailure }
  | { readonly type: 'render.cancelled'; readonly report: CancelReport };

export const RENDER_PARENT_EVENTS = [
  'render.pid',
  'render.chunk',
  'render.done',
  'render.error',
  'render.cancelled',
] as const;

interface Parked {
  readonly callId: number;
  readonly replyTo?: AnyActorRef;
}

export interface RenderContext {
  readonly spec: RenderSpec;
  readonly pool: unknown;
  pid: number | null;
  bytes: number;
  failure: ProcessFailure | null;
  report: CancelReport | null;
  /** Cancel calls waiting for the kill (a handful at most, so copied, not mutated). */
  parked: readonly Parked[];
}

function failureOf(outcome: RenderOutcome): ProcessFailure {
  if (outcome.type === 'done') throw new TypeError('a done outcome is not a failure');
  return {
    class: outcome.class,
    exitStatus: outcome.exitStatus,
    stderrTail: outcome.stderrTail,
    ...(outcome.detail ? { detail: outcome.detail } : {}),
  };
}

export const renderMachine = setup({
  types: {
    input: {} as RenderInput,
    context: {} as RenderContext,
    events: {} as RenderEvent,
    emitted: {} as ReplyEvent<CancelReply>,
  },
  actors: {
    // Provided by the render service (`services/renderLogic.ts`): one task in the worker pool,
    // its callbacks as events, its commands as calls. The chart only names the contract.
    renderWorker: {} as CallbackActorLogic<
      RenderWorkerCommand,
      RenderWorkerInput,
      RenderWorkerEvent
    >,
  },
  guards: {
    succeeded: ({ event }) => event.type === 'worker.settled' && event.outcome.type === 'done',
  },
  actions: {
    recordPid: assign({
      pid: ({ context, event }) => (event.type === 'worker.pid' ? event.pid : context.pid),
    }),
    forwardPid: sendParent(({ event }) => ({
      type: 'render.pid',
      pid: event.type === 'worker.pid' ? event.pid : -1,
    })),
    countBytes: assign({
      bytes: ({ context, event }) =>
        context.bytes + (event.type === 'worker.chunk' ? event.data.length : 0),
    }),
    forwardChunk: sendParent(({ event }) => ({
      type: 'render.chunk',
      data: event.type === 'worker.chunk' ? event.data : Buffer.alloc(0),
    })),
    forwardAck: sendTo('worker', ({ event }) => ({
      type: 'ack' as const,
      bytes: event.type === 'ack' ? event.bytes : 0,
    })),
    askWorkerToCancel: sendTo('worker', { type: 'cancel' as const }),
    killFromMainThread: sendTo('worker', { type: 'kill' as const, reason: 'timeout' as const }),
    park: assign({
      parked: ({ context, event }) =>
        event.type === 'cancel' && event.callId !== undefined
          ? [
              ...context.parked,
              { callId: event.callId, ...(event.replyTo ? { replyTo: event.replyTo } : {}) },
            ]
          : context.parked,
    }),
    recordFailure: assign({
      failure: ({ context, event }) =>
        event.type === 'worker.settled' && event.outcome.type === 'error'
          ? failureOf(event.outcome)
          : context.failure,
    }),
    recordWatchdogFailure: assign({
      failure: ({ context }) => ({
        class: 'timeout' as const,
        exitStatus: null,
        stderrTail: '',
        detail: `the worker gave no word within ${watchdogMs(context)} ms; ffmpeg was killed from the main thread`,
      }),
      report: ({ context, event }) =>
        event.type === 'worker.dead' ? event.report : context.report,
    }),
    recordReport: assign({
      report: ({ context, event }) =>
        event.type === 'worker.dead' ? event.report : context.report,
    }),
    sendDone: sendParent(({ context }) => ({
      type: 'render.done',
      info: { exitStatus: 0, bytes: context.bytes },
    })),
    sendError: sendParent(({ context }) => ({ type: 'render.error', failure: context.failure! })),
    sendCancelled: sendParent(({ context }) => ({
      type: 'render.cancelled',
      report: context.report!,
    })),
    answerParked: enqueueActions(({ context, enqueue }) => {
      const report: CancelReport = context.report ?? {
        pid: context.pid,
        by: 'none',
        outcome: 'already_dead',
      };
      for (const waiter of context.parked) answer(enqueue, waiter, { type: 'dead', ...report });
      enqueue.assign({ parked: [] });
    }),
  },
  delays: {
    watchdog: ({ context }) => watchdogMs(context),
  },
}).createMachine({
  id: 'render',
  context: ({ input }) => ({
    spec: input.spec,
    pool: input.pool,
    pid: null,
    bytes: 0,
    failure: null,
    report: null,
    parked: [],
  }),
  initial: 'active',
  states: {
    /** The worker task exists; the actor is invoked here and detached when this state is left. */
    active: {
      invoke: {
        id: 'worker',
        src: 'renderWorker',
        input: ({ context }) => ({ spec: context.spec, pool: context.pool }),
      },
      initial: 'timed',
      on: {
        'worker.pid': { actions: ['recordPid', 'forwardPid'] },
        'worker.chunk': { actions: ['countBytes', 'forwardChunk'] },
        ack: { actions: 'forwardAck' },
        'worker.settled': [
          { guard: 'succeeded', target: 'done' },
          { target: 'failed', actions: 'recordFailure' },
        ],
        cancel: { target: '.cancelling', actions: 'park' },
      },
      states: {
        /** ffmpeg has not exited yet: the watchdog runs. */
        timed: {
          initial: 'starting',
          after: { watchdog: { target: 'reaping' } },
          on: { 'worker.exited': { target: 'draining' } },
          states: {
            /** Submitted; waiting for the worker to report ffmpeg's pid. */
            starting: {
              on: {
                'worker.pid': { target: 'encoding', actions: ['recordPid', 'forwardPid'] },
              },
            },
            /** ffmpeg is running; chunks flow. */
            encoding: {},
          },
        },
        /** ffmpeg exited; the last chunks are on their way and the task is about to settle. */
        draining: {},
        /** Waiting for the kill to be confirmed; output is dropped, more cancels park. */
        cancelling: {
          entry: 'askWorkerToCancel',
          on: {
            cancel: { actions: 'park' },
            'worker.chunk': {},
            'worker.settled': {},
            'worker.exited': {},
            ack: {},
            'worker.dead': { target: '#render.cancelled', actions: 'recordReport' },
          },
        },
        /** The worker went silent past its deadline: the main thread kills ffmpeg itself. */
        reaping: {
          entry: 'killFromMainThread',
          on: {
            cancel: { actions: 'park' },
            'worker.chunk': {},
            'worker.settled': {},
            'worker.exited': {},
            ack: {},
            'worker.dead': { target: '#render.failed', actions: 'recordWatchdogFailure' },
          },
        },
      },
    },
    done: { type: 'final', entry: ['sendDone', 'answerParked'] },
    failed: { type: 'final', entry: ['sendError', 'answerParked'] },
    cancelled: { type: 'final', entry: ['sendCancelled', 'answerParked'] },
  },
});

function watchdogMs(context: RenderContext): number {
  return context.spec.timeoutMs + TERM_GRACE_MS + KILL_WAIT_MS + WATCHDOG_SLACK_MS;
}
