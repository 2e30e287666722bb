/**
 * Tee: the write-back subscriber of one render. It receives the coordinator's broadcast like any
 * client and feeds the bytes to the variant store, so the variant is encoded once and every later
 * request is a HIT.
 *
 * The chart does no I/O: it forwards chunks to its invoked `writer` (which owns the store's
 * streaming `put`) and reacts to what the writer reports. Leaving `active` for any reason stops
 * the writer, and a writer stopped before it committed discards its staging.
 *
 * ## Invariants
 * - **Started with the render, never while queued**, so it sees byte 0 (the join backlog covers
 *   any chunk broadcast before it joined) and a queued render every client left can still stop.
 * - **Never throttles**: every chunk is forwarded at once; the writer queues, the render runs at
 *   full speed.
 * - **Atomic or absent**: only `done` ends the write normally; `error`, the coordinator going
 *   away, and silence for the deadline all abort it, and an aborted write leaves nothing readable.
 * - **Aborts are silent**: the render path already reported the failure. Only a write failure
 *   under a healthy render emits `write_failure`; clients never see it.
 * - **Exactly one final state**: `committed`, `aborted` or `write_failed`, with the outcome as
 *   the actor's output.
 *
 * ## Races
 * - *The coordinator stops after `done` (its linger ends) while the commit is still running*:
 *   `finishing` ignores `coordinator.gone`; only the writer decides the outcome from there.
 * - *The writer fails while chunks are still arriving*: `write_failed` is final, so later chunks
 *   are dropped and the coordinator is told the tee is gone (by its watcher), which may cancel a
 *   render no client wants any more.
 *
 * ## Events
 * | Event | From | Effect |
 * |---|---|---|
 * | `rendering` / `chunk` | coordinator (via inbox) | restart the deadline; forward the bytes |
 * | `done` | coordinator | end the write → `finishing` |
 * | `error` / `coordinator.gone` / deadline | coordinator, its watcher, timer | → `aborted` |
 * | `writer.committed` / `writer.failed` | writer | → `committed` / emit `write_failure` → `write_failed` |
 */
import { type AnyActorLogic, assign, emit, sendTo, setup } from 'xstate';
import type { SubscriberMessage } from './renderCoordinator.js';

/** Slack past `AP_RENDER_TIMEOUT` before a silent render is written off. */
export const TEE_SLACK_MS = 2_000; // outlasts the HTTP consumer's own slack (1 s), so clients report first

export type TeeOutcome = 'committed' | 'aborted' | 'write_failed';

export interface TeeInput {
  readonly key: string;
  /** Silence limit in ms, restarted on every message: `AP_RENDER_TIMEOUT` + `TEE_SLACK_MS`. */
  readonly deadlineMs: number;
}

export interface TeeContext {
  readonly key: string;
  readonly deadlineMs: number;
  bytes: number;
  outcome: TeeOutcome | null;
  reason: string | null;
}

export type TeeEvent =
  | SubscriberMessage
  | { readonly type: 'coordinator.gone' }
  | { readonly type: 'writer.committed'; readonly size: number }
  | { readonly type: 'writer.failed'; readonly reason: string };

/** What the writer receives. */
export type WriterEvent =
  | { readonly type: 'write'; readonly data: Buffer }
  | { readonly type: 'end' };

export type TeeEmitted = {
  readonly type: 'write_failure';
  readonly key: string;
  readonly reason: string;
};

export interface TeeOutput {
  readonly outcome: TeeOutcome;
  readonly bytes: number;
  readonly reason?: string;
}

export const teeMachine = setup({
  types: {
    input: {} as TeeInput,
    context: {} as TeeContext,
    events: {} as TeeEvent,
    emitted: {} as TeeEmitted,
    output: {} as TeeOutput,
  },
  actors: {
    // Provided by the service: owns `VariantStore.put`, answers writer.committed/failed.
    writer: {} as AnyActorLogic,
  },
  actions: {
    forward: sendTo('writer', ({ event }) => ({
      type: 'write' as const,
      data: event.type === 'chunk' ? event.data : Buffer.alloc(0),
    })),
    count: assign({
      bytes: ({ context, event }) =>
        context.bytes + (event.type === 'chunk' ? event.data.length : 0),
    }),
    endWrite: sendTo('writer', { type: 'end' as const }),
    recordFailure: assign({
      reason: ({ event }) => (event.type === 'writer.failed' ? event.reason : 'timeout'),
    }),
    reportWriteFailure: emit(({ context }) => ({
      type: 'write_failure' as const,
      key: context.key,
      reason: context.reason ?? 'unknown',
    })),
    settle: assign({ outcome: (_, params: { outcome: TeeOutcome }) => params.outcome }),
  },
  delays: {
    deadline: ({ context }) => context.deadlineMs,
  },
}).createMachine({
  id: 'tee',
  context: ({ input }) => {
    if (!Number.isSafeInteger(input.deadlineMs) || input.deadlineMs < 1) {
      throw new RangeError(`tee deadlineMs must be a positive integer, got ${input.deadlineMs}`);
    }
    return { key: input.key, deadlineMs: input.deadlineMs, bytes: 0, outcome: null, reason: null };
  },
  initial: 'active',
  states: {
    active: {
      invoke: {
        id: 'writer',
        src: 'writer',
        input: ({ context }: { context: TeeContext }) => ({ key: context.key }),
      },
      on: {
        'writer.failed': {
          target: 'write_failed',
          actions: ['recordFailure', 'reportWriteFailure'],
        },
        error: { target: 'aborted' },
        'coordinator.gone': { target: 'aborted' },
      },
      initial: 'streaming',
      states: {
        streaming: {
          after: { deadline: { target: '#tee.aborted' } },
          on: {
            rendering: { target: 'streaming', reenter: true },
            chunk: { target: 'streaming', reenter: true, actions: ['count', 'forward'] },
            done: { target: 'finishing', actions: 'endWrite' },
          },
        },
        /** `done` received; the writer is committing. */
        finishing: {
          after: {
            deadline: {
              target: '#tee.write_failed',
              actions: ['recordFailure', 'reportWriteFailure'],
            },
          },
          on: {
            'writer.committed': { target: '#tee.committed' },
            'coordinator.gone': {},
            error: {},
          },
        },
      },
    },
    committed: {
      type: 'final',
      entry: { type: 'settle', params: { outcome: 'committed' } },
    },
    aborted: {
      type: 'final',
      entry: { type: 'settle', params: { outcome: 'aborted' } },
    },
    write_failed: {
      type: 'final',
      entry: { type: 'settle', params: { outcome: 'write_failed' } },
    },
  },
  output: ({ context }) => ({
    outcome: context.outcome ?? 'aborted',
    bytes: context.bytes,
    ...(context.reason !== null ? { reason: context.reason } : {}),
  }),
});
