/**
 * The async face of a process supervisor: start one, run a task under it, read its stats,
 * restart it, stop it. Owns the caller's half of the acquire → task → taskDone protocol.
 *
 * ## Invariants
 * - **Every admitted task is reported exactly once.** `runSupervised` sends `taskDone` from a
 *   `finally`, carrying the generation it ran on, so a task that outlives its process (abandoned
 *   by a drain timeout) cannot free a slot of the next one.
 * - **A caller that gives up leaves nothing behind.** A timed-out or aborted acquire sends
 *   `withdraw`: the supervisor drops the waiter, or ends the task if the grant crossed the abort.
 * - **Bad options throw at the boundary** (`TypeError`/`RangeError` naming the option); what the
 *   supervisor can refuse at runtime arrives as a `SupervisorError` with a stable `code`.
 *
 * ## Races
 * - *Grant vs. abort*: the `ready` reply may be emitted after the call settled; `call()` drops it
 *   and `withdraw` (sent after the call settled, by id) forgets the task either way.
 * - *A task fails because its process died*: `taskDone {fault}` marks the health evidence stale,
 *   so the next acquire waits for a probe and a dead process is replaced before it is reused.
 *
 * ## Events
 * | Helper | Sends | Settles with |
 * |---|---|---|
 * | `runSupervised` | `acquire` (call), then `taskDone` or `withdraw` (casts) | the task's result or error |
 * | `restartSupervisor` | `restart` (call) | `true` when a restart was started |
 * | `stopSupervisor` | `stop` (call) | `StopReply` once the process is down |
 * | `supervisorStats` | nothing: reads the snapshot | `SupervisorStats` |
 */
import { type ActorOptions, createActor } from 'xstate';
import { call, cast } from '../actors/call.js';
import {
  type AcquireFailure,
  type AcquireReply,
  DRAIN_TIMEOUT_MS,
  isHealthy,
  type Process,
  type ProcessSupervisorActor,
  type ProcessSupervisorInput,
  processSupervisorMachine,
  type RestartReply,
  type StopReply,
  type SupervisorStats,
  statsOf,
} from '../machines/processSupervisor.js';

/** A drain at its bound plus a minute for the stop and the start: waiting longer means the
 * supervisor is stuck, and the caller hears `ERR_CALL_TIMEOUT` instead of hanging. */
export const ACQUIRE_TIMEOUT_MS = DRAIN_TIMEOUT_MS + 60_000;
/** Stop replies come after the drain and the kill; the same reasoning as an acquire. */
export const STOP_CALL_TIMEOUT_MS = DRAIN_TIMEOUT_MS + 60_000;
/** setTimeout's ceiling; a longer delay fires after 1 ms instead. */
const MAX_TIMER_MS = 2_147_483_647;

export type SupervisorErrorCode =
  | 'ERR_SUPERVISOR_START_FAILED'
  | 'ERR_SUPERVISOR_STOP_FAILED'
  | 'ERR_SUPERVISOR_STOPPING';

const CODE_OF: Record<AcquireFailure, SupervisorErrorCode> = {
  start_failed: 'ERR_SUPERVISOR_START_FAILED',
  stop_failed: 'ERR_SUPERVISOR_STOP_FAILED',
  stopping: 'ERR_SUPERVISOR_STOPPING',
};

/** Why a task was not run. Match on `code`. */
export class SupervisorError extends Error {
  override readonly name = 'SupervisorError';
  readonly code: SupervisorErrorCode;
  readonly reason: AcquireFailure;
  constructor(reason: AcquireFailure, options?: { cause?: unknown }) {
    super(`process supervisor refused the task: ${reason}`, options);
    this.reason = reason;
    this.code = CODE_OF[reason];
  }
}

export interface StartSupervisorOptions {
  /** Timer source for the supervisor's delays (XState `SimulatedClock` in tests). */
  readonly clock?: ActorOptions<typeof processSupervisorMachine>['clock'];
  /** XState inspection observer (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<typeof processSupervisorMachine>['inspect'];
}

function checkMs(name: string, value: unknown, min = 1): void {
  if (value === undefined) return;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < min ||
    value > MAX_TIMER_MS
  ) {
    throw new RangeError(`${name} must be an integer in ${min}..${MAX_TIMER_MS} ms, got ${value}`);
  }
}

/** Throws `TypeError`/`RangeError` for input the machine would misread. */
export function validateSupervisorInput(input: ProcessSupervisorInput): void {
  const process = input?.process as Partial<Process> | undefined;
  for (const method of ['start', 'stop', 'healthy'] as const) {
    if (typeof process?.[method] !== 'function') {
      throw new TypeError(`process.${method} must be a function`);
    }
  }
  if (input.maxTasks !== undefined) {
    if (typeof input.maxTasks !== 'function') throw new TypeError('maxTasks must be a function');
    const limit = input.maxTasks();
    if (!Number.isInteger(limit) || limit < 0) {
      throw new RangeError(`maxTasks() must return an integer >= 0, got ${limit}`);
    }
  }
  if (input.now !== undefined && typeof input.now !== 'function') {
    throw new TypeError('now must be a function');
  }
  checkMs('healthIntervalMs', input.healthIntervalMs);
  checkMs('healthDeadlineMs', input.healthDeadlineMs);
  checkMs('drainTimeoutMs', input.drainTimeoutMs, 0);
}

/** Validates `input`, then creates and starts a supervisor. Nothing is started until a task. */
export function startProcessSupervisor(
  input: ProcessSupervisorInput,
  options: StartSupervisorOptions = {},
): ProcessSupervisorActor {
  validateSupervisorInput(input);
  const actor = createActor(processSupervisorMachine, {
    input,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.inspect ? { inspect: options.inspect } : {}),
  });
  actor.start();
  return actor;
}

export interface Lease {
  /** The incarnation the task runs on (1 for the first start). */
  readonly generation: number;
}

export interface RunSupervisedOptions {
  /** Aborting while waiting withdraws the acquire; the running task gets it too. */
  readonly signal?: AbortSignal;
  /** @default ACQUIRE_TIMEOUT_MS */
  readonly acquireTimeoutMs?: number;
  /**
   * Whether a task error implicates the process (a dead worker) rather than the input. A fault
   * costs one health round trip before the next task. @default every error is a fault
   */
  readonly isProcessFault?: (error: unknown) => boolean;
}

/**
 * Runs `task` on the supervisor's current process: waits (in the supervisor, in arrival order)
 * while it starts or restarts, then runs the task here, outside the machine, and reports it done.
 * Rejects with `SupervisorError` when the supervisor refuses, `CallError` when the wait is given
 * up, and otherwise settles exactly as `task` does.
 */
export async function runSupervised<T, P extends Process = Process>(
  actor: ProcessSupervisorActor,
  task: (process: P, lease: Lease, signal: AbortSignal | undefined) => Promise<T>,
  options: RunSupervisedOptions = {},
): Promise<T> {
  const request: { type: 'acquire'; callId?: number } = { type: 'acquire' };
  let answer: AcquireReply;
  try {
    answer = await call<AcquireReply>(actor, request, {
      timeout: options.acquireTimeoutMs ?? ACQUIRE_TIMEOUT_MS,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if (request.callId !== undefined) cast(actor, { type: 'withdraw', taskId: request.callId });
    throw error;
  }
  if (answer.type === 'failed') throw new SupervisorError(answer.reason);
  const taskId = request.callId as number;
  const { generation } = answer;
  let fault = false;
  try {
    return await task(answer.process as P, { generation }, options.signal);
  } catch (error) {
    fault = options.isProcessFault ? options.isProcessFault(error) : true;
    throw error;
  } finally {
    cast(actor, { type: 'taskDone', taskId, generation, fault });
  }
}

/** Asks for a manual restart; `false` when one is already under way or there is nothing to restart. */
export async function restartSupervisor(actor: ProcessSupervisorActor): Promise<boolean> {
  const answer = await call<RestartReply>(actor, { type: 'restart' });
  return answer.accepted;
}

export interface StopSupervisorOptions {
  /** How long running tasks may finish before the process is killed. @default the input's drainTimeoutMs */
  readonly drainTimeoutMs?: number;
  /** @default STOP_CALL_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

/** Stops accepting, drains, kills what is left, and resolves once the process is down. */
export async function stopSupervisor(
  actor: ProcessSupervisorActor,
  options: StopSupervisorOptions = {},
): Promise<StopReply> {
  checkMs('drainTimeoutMs', options.drainTimeoutMs, 0);
  const request: { type: 'stop'; drainTimeoutMs?: number } = { type: 'stop' };
  if (options.drainTimeoutMs !== undefined) request.drainTimeoutMs = options.drainTimeoutMs;
  return call<StopReply>(actor, request, { timeout: options.timeoutMs ?? STOP_CALL_TIMEOUT_MS });
}

/** The supervisor's gauges, read from its current snapshot (what `/metrics` samples). */
export function supervisorStats(actor: ProcessSupervisorActor): SupervisorStats {
  return statsOf(actor.getSnapshot());
}

/** What `/health` reports for this supervisor: false only while it is `failed`. */
export function supervisorHealthy(actor: ProcessSupervisorActor): boolean {
  return isHealthy(actor.getSnapshot());
}
