/**
 * Async helpers over a running `waitingRoomMachine`: one function per call, each a `call()`
 * with the session checked at the boundary, and `withAdmission`, which walks one job through
 * the room (join, heartbeat until ready, claim, run, report the end) for an embedder that wants
 * a gate in front of any expensive job.
 *
 * ## Invariants
 * - **Every claimed run is reported once**: `withAdmission` sends `runEnded` in a `finally`,
 *   after the job settled, so the next window never overlaps the job's cleanup.
 * - **A caller that gives up leaves**: an abort while waiting sends `leave`, so its place (or
 *   its reservation) goes to the next ticket at once instead of lapsing.
 * - **The heartbeat is the poll**: waiting polls `status` every `pollMs`; keep it well under the
 *   room's `heartbeatSeconds`, or the ticket is dropped as stale.
 *
 * ## Races
 * - *Ready between two polls*: the room's `notify { type: 'ready' }` wakes the waiter at once, so
 *   the reservation window is not spent sleeping; the next poll would have found it too.
 * - *Reservation lapsed before the claim*: the claim is refused (`reservation_expired`) and
 *   `withAdmission` answers `lost`; it never retries behind the caller's back.
 */
import { type Actor, type ActorOptions, type AnyActorRef, createActor } from 'xstate';
import { type CallOptions, call, cast, inbox } from '../actors/call.js';
import {
  type JoinOutcome,
  type LeaveOutcome,
  type RoomClaimOutcome,
  type RunEndedOutcome,
  type StatusOutcome,
  waitingRoomMachine,
} from '../machines/waitingRoom.js';
import {
  initialRoom,
  type TicketView,
  type WaitingRoomInput,
  type WaitingRoomMessage,
} from '../machines/waitingRoomSlots.js';

/** How often `withAdmission` polls by default: a quarter of a 4 s heartbeat leaves three misses. */
export const DEFAULT_POLL_MS = 1_000;

function checkSession(session: unknown): string {
  if (typeof session !== 'string' || session.length === 0) {
    throw new TypeError('session must be a non-empty string');
  }
  return session;
}

/** Takes a ticket, or returns the existing one; `full` says when to come back. */
export function join(
  room: AnyActorRef,
  session: string,
  options?: CallOptions,
): Promise<JoinOutcome> {
  return call<JoinOutcome>(room, { type: 'join', session: checkSession(session) }, options);
}

/** The heartbeat: refreshes the ticket and returns its view, or `unknown`. */
export function status(
  room: AnyActorRef,
  session: string,
  options?: CallOptions,
): Promise<StatusOutcome> {
  return call<StatusOutcome>(room, { type: 'status', session: checkSession(session) }, options);
}

/** Drops the session's ticket; a held reservation passes to the next ticket. */
export function leave(
  room: AnyActorRef,
  session: string,
  options?: CallOptions,
): Promise<LeaveOutcome> {
  return call<LeaveOutcome>(room, { type: 'leave', session: checkSession(session) }, options);
}

/** Starts the session's run: in its reserved slot, or in an idle one when it holds none. */
export function claim(
  room: AnyActorRef,
  session: string,
  options?: CallOptions,
): Promise<RoomClaimOutcome> {
  return call<RoomClaimOutcome>(room, { type: 'claim', session: checkSession(session) }, options);
}

/** Reports the session's run over, after its cleanup; `cancelled` runs under 5 s are not timed. */
export function runEnded(
  room: AnyActorRef,
  session: string,
  options: CallOptions & { readonly cancelled?: boolean } = {},
): Promise<RunEndedOutcome> {
  const { cancelled = false, ...callOptions } = options;
  return call<RunEndedOutcome>(
    room,
    { type: 'runEnded', session: checkSession(session), cancelled },
    callOptions,
  );
}

/** Settles expiry now (a cast: no reply). The room also sweeps by itself every `sweepMs`. */
export function tick(room: AnyActorRef): void {
  cast(room, { type: 'tick' });
}

export interface AdmissionOptions {
  /** Milliseconds between heartbeats while waiting. @default 1000 */
  readonly pollMs?: number;
  /** Aborting leaves the room while waiting, and is passed to the job once it runs. */
  readonly signal?: AbortSignal;
  /** Sees every ticket view the waiting produced (for progress displays). */
  readonly onTicket?: (ticket: TicketView) => void;
}

/** How one `withAdmission` ended. A job's own failure is thrown, after its run was reported. */
export type AdmissionResult<T> =
  | { readonly type: 'ran'; readonly value: T; readonly slot: number }
  | { readonly type: 'full'; readonly retryAfterS: number }
  | {
      readonly type: 'lost';
      readonly reason: 'ticket_gone' | 'reservation_expired' | 'busy' | 'already_running';
    };

/**
 * Runs `job` once the room admits `session`: joins, polls `status` (the heartbeat) until the
 * ticket is ready, claims, runs, and reports the end. Tickets are served in join order.
 */
export async function withAdmission<T>(
  room: AnyActorRef,
  session: string,
  job: (signal: AbortSignal) => Promise<T>,
  options: AdmissionOptions = {},
): Promise<AdmissionResult<T>> {
  checkSession(session);
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  if (!Number.isFinite(pollMs) || pollMs <= 0)
    throw new RangeError(`pollMs must be > 0, got ${pollMs}`);
  const signal = options.signal ?? new AbortController().signal;
  signal.throwIfAborted();

  const joined = await join(room, session);
  if (joined.type === 'full') return joined;
  options.onTicket?.(joined.ticket);
  let ticket = joined.ticket;

  if (ticket.status === 'queued') {
    const woken = await waitUntilReady(room, session, pollMs, signal, options.onTicket);
    if (woken === null) return { type: 'lost', reason: 'ticket_gone' };
    ticket = woken;
  }
  if (ticket.status === 'running') return { type: 'lost', reason: 'already_running' };

  const claimed = await claim(room, session);
  if (claimed.type === 'refused') return { type: 'lost', reason: claimed.reason };
  try {
    const value = await job(signal);
    return { type: 'ran', value, slot: claimed.slot };
  } finally {
    await runEnded(room, session, { cancelled: signal.aborted });
  }
}

/** Polls until the ticket is ready (its view) or gone (`null`); leaves the room on abort. */
async function waitUntilReady(
  room: AnyActorRef,
  session: string,
  pollMs: number,
  signal: AbortSignal,
  onTicket: ((ticket: TicketView) => void) | undefined,
): Promise<TicketView | null> {
  let wake: (() => void) | undefined;
  let readySignalled = false; // a notify that came while no sleep was pending is not lost
  const stopInbox = inbox<WaitingRoomMessage>(room, session, (message) => {
    if (message.type !== 'ready') return;
    readySignalled = true;
    wake?.();
  });
  try {
    for (;;) {
      signal.throwIfAborted();
      if (!readySignalled) await sleepUnlessWoken();
      readySignalled = false;
      const polled = await status(room, session);
      if (polled.type === 'unknown') return null;
      onTicket?.(polled.ticket);
      if (polled.ticket.status !== 'queued') return polled.ticket;
    }
  } catch (error) {
    await leave(room, session);
    throw error;
  } finally {
    stopInbox();
  }

  function sleepUnlessWoken(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
        wake = undefined;
      };
      const aborted = () => {
        done();
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        done();
        resolve();
      }, pollMs);
      wake = () => {
        done();
        resolve();
      };
      signal.addEventListener('abort', aborted, { once: true });
    });
  }
}

/**
 * Starts a room. The input is checked here, synchronously (TypeError/RangeError naming the
 * option), instead of surfacing later as an actor error. Stop the actor to end its sweep timer.
 */
export function startWaitingRoom(
  input: WaitingRoomInput,
  options: { inspect?: ActorOptions<typeof waitingRoomMachine>['inspect'] } = {},
): Actor<typeof waitingRoomMachine> {
  initialRoom(input);
  return createActor(waitingRoomMachine, {
    input,
    ...(options.inspect ? { inspect: options.inspect } : {}),
  }).start();
}
