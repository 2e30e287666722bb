/**
 * The main thread's half of a render (or probe) task: the MessageChannel, the Comlink sink the
 * worker calls, the Comlink control it calls back, and the kill the main thread finishes itself
 * when the worker cannot.
 *
 * `startTask` submits one task to a pool and turns the worker's calls into callbacks. It is the
 * I/O behind the Render machine's `renderWorker` actor, and `runRender`/`runProbe` drive it
 * end-to-end for tests and benchmarks.
 *
 * ## Invariants
 * - **`onSettled` fires exactly once, after ffmpeg is dead**, and nothing fires after it.
 * - **`cancel()` resolves only once ffmpeg is dead and the task has left its thread**, so the
 *   caller can release the slot and hand the thread to the next grant at once.
 * - **The main thread kills only a pid the worker has not reported as exited** (a reaped pid may
 *   be recycled), and checks the start time it read at spawn before every signal.
 * - **The source descriptor outlives the task.** With `openInput` the source is opened before
 *   the task is submitted and its lease released only once the task is over (ffmpeg reaped, or
 *   its thread gone), so a descriptor number is never closed (and reused) under a spawn.
 * - **A thread is terminated (task aborted) only after its ffmpeg was killed**: the other order
 *   would orphan ffmpeg with nobody left to reap it.
 * - **Nothing outlives the task**: settling releases the Comlink control proxy and closes the
 *   port, so no registry or listener keeps the callbacks (and what they reach) alive.
 * - **Acks are coalesced, never withheld from a waiting worker**: they are sent once half the
 *   window is unacknowledged at the worker, which pauses only at the full mark. Every message
 *   costs both threads a wake-up, so this saves one round trip per chunk.
 *
 * ## Races
 * - *Worker dies during a cancel*: the cancel stops waiting at once and kills from here.
 * - *Worker hangs*: `cancel()` waits `CANCEL_CONFIRM_MS` for the worker's own kill, then kills
 *   from here and aborts the task (worst case ≈ 6.3 s: the worker's budget plus ours).
 * - *Chunks still in the port when a task is aborted*: dropped, because the task has settled.
 * - *Consumer stops without cancelling* (`detach`): closing the port makes the worker kill
 *   ffmpeg; if the task has not settled within `CANCEL_CONFIRM_MS`, this side kills it.
 *
 * ## Events (callbacks)
 * | Callback | When |
 * |---|---|
 * | `onPid(pid)` | ffmpeg spawned |
 * | `onChunk(data)` | a batch arrived (its ArrayBuffer was transferred, not copied) |
 * | `onExited(status, signal)` | ffmpeg was reaped by the worker |
 * | `onSettled(outcome)` | the task is over and ffmpeg is dead |
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { fromCallback } from 'xstate';
import type { ProcessFailureClass } from '../core/failure.js';
import type { OpenOutcome, SourceLease } from '../core/source.js';
import {
  type CancelReport,
  HIGH_WATER_BYTES,
  KILL_WAIT_MS,
  type KillOutcome,
  type ProbeTaskOutcome,
  type ProcessControl,
  type ProcessSink,
  type ProcessSpec,
  type RenderOutcome,
  type RenderSpec,
  type RenderWorkerCommand,
  type RenderWorkerEvent,
  type RenderWorkerInput,
  type TaskFailure,
  TERM_GRACE_MS,
} from '../core/worker.js';
import { isAlive, killAndReap, processStartTime } from './liveness.js';
import { PoolError, type WorkerPool } from './pool.js';

/** Acks are held here until this much output is unacknowledged at the worker. */
export const ACK_COALESCE_BYTES = HIGH_WATER_BYTES / 2; // each ack is a round trip; the worker pauses only at the full mark
/** How long the worker gets to confirm a kill before this thread does it. */
export const CANCEL_CONFIRM_MS = TERM_GRACE_MS + KILL_WAIT_MS + 250; // its own budget plus a beat

export interface TaskCallbacks<O> {
  onPid?(pid: number): void;
  onChunk?(data: Buffer): void;
  onExited?(exitStatus: number | null, signal: string | null): void;
  onSettled(outcome: O): void;
}

export interface TaskHandle {
  /** ffmpeg's pid once reported; stays set after it exits (for logs). */
  readonly pid: number | null;
  /** True once the worker reported ffmpeg reaped. */
  readonly exited: boolean;
  readonly settled: boolean;
  /** Tell the worker the consumer took `bytes` (reopens the high-water window). */
  ack(bytes: number): void;
  /** Kill ffmpeg (through the worker, else from here); resolves once it is dead. */
  cancel(): Promise<CancelReport>;
  /** Kill from this thread now, then abort the task: for a worker that stopped answering. */
  kill(reason: ProcessFailureClass): Promise<CancelReport>;
  /** The consumer is gone: stop delivering, let the worker kill ffmpeg, back it up from here. */
  detach(): void;
}

type Kind = 'render' | 'probe';

class TaskClient<O extends { type: string }> implements TaskHandle {
  readonly #port: MessagePort;
  readonly #control: Comlink.Remote<ProcessControl>;
  readonly #abort = new AbortController();
  readonly #callbacks: TaskCallbacks<O>;
  readonly #taskDone: Promise<void>;
  #pid: number | null = null;
  #startTime: string | null = null;
  #exited = false;
  #bytes = 0;
  #acked = 0;
  #ackSent = 0;
  #outcome: O | null = null;
  #taskOver = false;
  #detached = false;
  #killReason: ProcessFailureClass | null = null;
  #mainKill: Promise<CancelReport> | null = null;
  #cancel: Promise<CancelReport> | null = null;
  #watchdog: NodeJS.Timeout | null = null;
  /** False while the source is still opening: a cancel then aborts the open at once. */
  #submitted = true;

  constructor(pool: WorkerPool, kind: Kind, spec: RenderSpec, callbacks: TaskCallbacks<O>) {
    this.#callbacks = callbacks;
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    const endpoint = nodeEndpoint(port1);
    const sink: ProcessSink = {
      pid: (pid) => this.#onPid(pid),
      chunk: (data) => this.#onChunk(data),
      exited: (status, signal) => this.#onExited(status, signal),
    };
    Comlink.expose(sink, endpoint);
    this.#control = Comlink.wrap<ProcessControl>(endpoint);

    const task = (inputFd: number | undefined) => ({
      kind,
      executable: spec.executable,
      argv: [...spec.argv],
      timeoutMs: spec.timeoutMs,
      ...(spec.maxBytes !== undefined ? { maxBytes: spec.maxBytes } : {}),
      ...(spec.exactBytes !== undefined ? { exactBytes: spec.exactBytes } : {}),
      ...(spec.prefix !== undefined ? { prefix: spec.prefix } : {}),
      ...(spec.flacTotalSamples !== undefined ? { flacTotalSamples: spec.flacTotalSamples } : {}),
      ...(spec.mp3InfoFrame === true ? { mp3InfoFrame: true } : {}),
      ...(spec.nice !== undefined ? { nice: spec.nice } : {}),
      ...(inputFd !== undefined ? { inputFd } : {}),
      ...(spec.peaks !== undefined ? { peaks: spec.peaks } : {}),
      ...(spec.decodeTimeShiftS !== undefined ? { decodeTimeShiftS: spec.decodeTimeShiftS } : {}),
      ...(spec.batchBytes !== undefined ? { batchBytes: spec.batchBytes } : {}),
      ...(spec.flushMs !== undefined ? { flushMs: spec.flushMs } : {}),
      ...(spec.outputBytesPerSecond !== undefined
        ? { outputBytesPerSecond: spec.outputBytesPerSecond }
        : {}),
      port: port2,
    });
    const submit = (inputFd: number | undefined): Promise<O> => {
      try {
        return pool.run<O>(task(inputFd), { signal: this.#abort.signal, transferList: [port2] });
      } catch (error) {
        // A pool that refuses synchronously is a refusal like any other: settled through the
        // rejection path, so the port is closed and the proxy released all the same.
        return Promise.reject(error);
      }
    };
    // The source is opened first (when the spec says how); its lease outlives the task.
    let lease: SourceLease | undefined;
    if (spec.openInput) this.#submitted = false;
    const running = spec.openInput
      ? spec.openInput(this.#abort.signal).then((opened: OpenOutcome) => {
          if (!opened.ok) throw new SourceRefused(opened.refusal, opened.detail);
          lease = opened.lease;
          // Cancelled or detached meanwhile: nothing is submitted (the port may be closed).
          if (this.#killReason !== null) {
            throw new SourceRefused('cancelled', 'cancelled while the source was opening');
          }
          this.#submitted = true;
          return submit(lease.fd);
        })
      : spec.inputFd !== undefined
        ? submit(spec.inputFd)
        : submit(undefined);
    const over = () => {
      this.#taskOver = true;
      lease?.release(); // ffmpeg is reaped (or its thread is gone): nobody reads it any more
    };
    this.#taskDone = running.then(over, over);
    running.then(
      (outcome) => this.#settle(outcome),
      (error: unknown) => void this.#onTaskRejected(error),
    );
  }

  get pid(): number | null {
    return this.#pid;
  }

  get exited(): boolean {
    return this.#exited;
  }

  get settled(): boolean {
    return this.#outcome !== null;
  }

  ack(bytes: number): void {
    if (!Number.isFinite(bytes) || bytes < 0) {
      throw new RangeError(`ack bytes must be a non-negative number, got ${String(bytes)}`);
    }
    if (this.#outcome || this.#detached || bytes === 0) return;
    this.#acked += bytes;
    this.#flushAcks();
  }

  /** Sends the acks held here once half the worker's window is in use (see the header). */
  #flushAcks(): void {
    const pending = this.#acked - this.#ackSent;
    if (pending <= 0 || this.#bytes - this.#ackSent < ACK_COALESCE_BYTES) return;
    this.#ackSent = this.#acked;
    this.#control.ack(pending).catch(() => {});
  }

  cancel(): Promise<CancelReport> {
    this.#cancel ??= this.#cancelOnce();
    return this.#cancel;
  }

  kill(reason: ProcessFailureClass): Promise<CancelReport> {
    this.#killReason ??= reason;
    return this.#killFromHere();
  }

  detach(): void {
    if (this.#detached) return;
    this.#detached = true;
    if (this.#outcome) return;
    this.#killReason ??= 'cancelled';
    this.#port.close(); // the worker sees 'close' and kills ffmpeg
    this.#watchdog = setTimeout(() => void this.#killFromHere(), CANCEL_CONFIRM_MS);
  }

  async #cancelOnce(): Promise<CancelReport> {
    if (this.#outcome) return this.#report('none', 'already_dead');
    this.#killReason ??= 'cancelled';
    if (!this.#submitted) this.#abort.abort(); // still opening the source: stop that instead
    // The worker kills (TERM, grace, KILL), waits for the reap, then settles the task with a
    // report of how it went; the task's settlement is the confirmation, on Piscina's channel.
    this.#control.cancel().catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([
      this.#taskDone.then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), CANCEL_CONFIRM_MS);
      }),
    ]).finally(() => clearTimeout(timer));
    const outcome = this.#outcome as (O & { kill?: { outcome: KillOutcome } }) | null;
    // Not settled here means the task was rejected (worker died) or is late (worker hung).
    if (inTime && outcome && !this.#stillAlive()) {
      if (outcome.type === 'error' && outcome.kill)
        return this.#report('worker', outcome.kill.outcome);
      return this.#report('none', 'already_dead'); // it had finished on its own
    }
    return this.#killFromHere();
  }

  #killFromHere(): Promise<CancelReport> {
    this.#mainKill ??= (async () => {
      const pid = this.#exited ? null : this.#pid;
      const report = pid === null ? null : await killAndReap(pid, { startTime: this.#startTime });
      // Only now: the thread may be the last one able to reap ffmpeg.
      if (!this.#taskOver) this.#abort.abort();
      await this.#taskDone;
      return this.#report(report ? 'main' : 'none', report?.outcome ?? 'already_dead');
    })();
    return this.#mainKill;
  }

  #stillAlive(): boolean {
    return this.#pid !== null && !this.#exited && isAlive(this.#pid, this.#startTime);
  }

  #report(by: CancelReport['by'], outcome: KillOutcome): CancelReport {
    return { pid: this.#pid, by, outcome };
  }

  async #onTaskRejected(error: unknown): Promise<void> {
    if (this.#outcome) return;
    // Our own abort, or the worker died: either way make sure ffmpeg is dead before reporting.
    await this.#killFromHere();
    if (error instanceof SourceRefused) {
      const failure: TaskFailure = {
        type: 'error',
        class: error.failureClass,
        exitStatus: null,
        stderrTail: '',
        bytes: 0,
        detail: error.message,
      };
      this.#settle(failure as unknown as O);
      return;
    }
    const reason = this.#killReason;
    const message = error instanceof Error ? error.message : String(error);
    const detail =
      reason !== null
        ? 'the worker did not answer; ffmpeg was killed from the main thread'
        : error instanceof PoolError
          ? `the pool refused the task (${error.code}): ${message}`
          : `the worker thread died: ${message}`;
    const failure: TaskFailure = {
      type: 'error',
      class: reason ?? 'render_failed',
      exitStatus: null,
      stderrTail: '',
      bytes: this.#bytes,
      detail,
    };
    this.#settle(failure as unknown as O);
  }

  #settle(outcome: O): void {
    if (this.#outcome) return;
    this.#outcome = outcome;
    if (this.#watchdog) clearTimeout(this.#watchdog);
    this.#watchdog = null;
    // Comlink's finalization registry holds the endpoint strongly until the proxy is collected,
    // and the endpoint reaches the proxy back (port → sink → this): without the release, every
    // finished task (and the coordinator and backlog its callbacks reach) stays alive forever.
    void this.#control[Comlink.releaseProxy]();
    this.#port.close();
    if (!this.#detached) this.#callbacks.onSettled(outcome);
  }

  #live(): boolean {
    return this.#outcome === null && !this.#detached;
  }

  #onPid(pid: number): void {
    this.#pid = pid;
    this.#startTime = processStartTime(pid);
    if (this.#live()) this.#callbacks.onPid?.(pid);
  }

  #onChunk(data: ArrayBuffer): void {
    if (!this.#live()) return;
    this.#bytes += data.byteLength;
    this.#callbacks.onChunk?.(Buffer.from(data));
    this.#flushAcks(); // acks held back may now be due, even if the consumer is slow
  }

  #onExited(status: number | null, signal: string | null): void {
    this.#exited = true;
    if (this.#live()) this.#callbacks.onExited?.(status, signal);
  }
}

/** The source could not be opened: the task never ran. */
class SourceRefused extends Error {
  override readonly name = 'SourceRefused';
  readonly failureClass: ProcessFailureClass;
  constructor(refusal: string, detail?: string) {
    super(`source ${refusal}${detail ? `: ${detail}` : ''}`);
    // Only a vanished file has its own class; a source that grew past AP_MAX_SRC_BYTES or an
    // origin that failed between the probe and the render is this render's failure.
    this.failureClass =
      refusal === 'not_found'
        ? 'not_found'
        : refusal === 'cancelled'
          ? 'cancelled'
          : 'render_failed';
  }
}

/** Starts a render task on `pool` (which must have a free slot: submit only under a grant). */
export function startRender(
  pool: WorkerPool,
  spec: RenderSpec,
  callbacks: TaskCallbacks<RenderOutcome>,
): TaskHandle {
  return new TaskClient(pool, 'render', spec, callbacks);
}

/** Starts a probe task; stdout comes back in the outcome. */
export function startProbe(
  pool: WorkerPool,
  spec: ProcessSpec,
  callbacks: TaskCallbacks<ProbeTaskOutcome>,
): TaskHandle {
  return new TaskClient(pool, 'probe', spec, callbacks);
}

export interface RunRenderResult {
  readonly outcome: RenderOutcome;
  readonly pid: number | null;
  readonly chunks: readonly Buffer[];
  /** Set when the render was cancelled through `signal`. */
  readonly cancel?: CancelReport;
}

export interface RunRenderOptions {
  /** Aborting cancels the render (a barrier: resolves once ffmpeg is dead). */
  readonly signal?: AbortSignal;
  /** Called for every chunk; chunks are still collected. */
  readonly onChunk?: (data: Buffer) => void;
  /** Acknowledge chunks as they arrive. @default true */
  readonly autoAck?: boolean;
}

/** One render end-to-end outside XState (tests, benchmarks). */
export function runRender(
  pool: WorkerPool,
  spec: RenderSpec,
  options: RunRenderOptions = {},
): Promise<RunRenderResult> {
  const chunks: Buffer[] = [];
  const autoAck = options.autoAck ?? true;
  return new Promise((resolve) => {
    let cancelReport: Promise<CancelReport> | undefined;
    const handle: TaskHandle = startRender(pool, spec, {
      onChunk: (data) => {
        chunks.push(data);
        options.onChunk?.(data);
        if (autoAck) handle.ack(data.length);
      },
      onSettled: async (outcome) => {
        options.signal?.removeEventListener('abort', onAbort);
        const cancel = cancelReport ? await cancelReport : undefined;
        resolve({ outcome, pid: handle.pid, chunks, ...(cancel ? { cancel } : {}) });
      },
    });
    const onAbort = () => {
      cancelReport = handle.cancel();
    };
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One probe end-to-end; aborting `signal` kills ffprobe through the worker. */
export function runProbe(
  pool: WorkerPool,
  spec: ProcessSpec,
  options: { readonly signal?: AbortSignal } = {},
): Promise<ProbeTaskOutcome> {
  return new Promise((resolve) => {
    const onAbort = () => void handle.cancel();
    const handle = startProbe(pool, spec, {
      onSettled: (outcome) => {
        options.signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      },
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The Render machine's worker actor: one render task, its callbacks as events, its commands
 * as calls. Stopping the actor before the task settled detaches (the worker kills ffmpeg).
 */
export const renderWorkerActor = fromCallback<
  RenderWorkerCommand,
  RenderWorkerInput,
  RenderWorkerEvent
>(({ input, sendBack, receive }) => {
  // The chart passes the pool through untouched; it is the one the render service gave it.
  const handle = startRender(input.pool as WorkerPool, input.spec, {
    onPid: (pid) => sendBack({ type: 'worker.pid', pid }),
    onChunk: (data) => sendBack({ type: 'worker.chunk', data }),
    onExited: (exitStatus) => sendBack({ type: 'worker.exited', exitStatus }),
    onSettled: (outcome) => sendBack({ type: 'worker.settled', outcome }),
  });
  receive((command) => {
    switch (command.type) {
      case 'ack':
        handle.ack(command.bytes);
        break;
      case 'cancel':
        void handle.cancel().then((report) => sendBack({ type: 'worker.dead', report }));
        break;
      case 'kill':
        void handle
          .kill(command.reason)
          .then((report) => sendBack({ type: 'worker.dead', report }));
        break;
    }
  });
  return () => {
    if (!handle.settled) handle.detach();
  };
});
