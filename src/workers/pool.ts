/**
 * A Piscina pool that never queues: `size` task slots on `size + 1` threads, owned by whoever
 * calls `start`/`stop` (a ProcessSupervisor in the server).
 *
 * The Semaphore actor owns all waiting. A task reaches this pool only under a grant, so a task
 * with no free slot is a bug and fails at once with `ERR_POOL_QUEUE`; Piscina's own queue stays
 * empty (`queueSize`, asserted in tests). The extra thread serves `healthy()` round trips, so a
 * health check never takes the thread a granted render is about to need.
 *
 * **Cancellation.** Aborting a running Piscina task terminates its worker thread, so every
 * abort costs a thread respawn (a few hundred ms with the tsx shim), and any child the thread
 * spawned is orphaned: nothing will ever reap it. Cancel a render over its Comlink control
 * (`cancel()`), which kills ffmpeg and lets the thread live; pass a `signal` only as the fallback
 * for a worker that no longer answers, after killing its process from the main thread.
 *
 * ## Invariants
 * - **Never more tasks than slots**: `run` rejects with `ERR_POOL_QUEUE` rather than wait.
 * - **A stopped pool runs nothing**: Piscina would happily spawn a thread after `close()`;
 *   `run` rejects with `ERR_POOL_STOPPED` instead.
 * - **An `'error'` from Piscina is fatal for this pool** (a worker module that throws at load
 *   makes the next run hang forever): the pool turns unhealthy and rejects new tasks with
 *   `ERR_POOL_FAILED`; its owner restarts it.
 *
 * ## Races
 * - *A slot frees while a new grant arrives*: Piscina marks the thread free before the task's
 *   promise settles, and the slot count drops only when it settles, so the thread is always
 *   free by the time the slot is.
 * - *A replacement thread is still starting* (after an abort or a crash): Piscina parks the task
 *   until it is ready and does not count it as queued; that wait is a thread start, not a queue.
 *
 * ## Events
 * | Method | Effect |
 * |---|---|
 * | `start()` | creates the threads; resolves after one echo round trip |
 * | `run(task, {signal, transferList})` | one task on a free thread, or a `PoolError` |
 * | `healthy(deadlineMs)` | an echo through a worker within the deadline |
 * | `stop({drainMs})` | refuses new tasks, waits for running ones, then destroys threads |
 * | `destroy()` | terminates every thread now; running tasks reject |
 */
import { Worker as NodeWorker, type TransferListItem, type Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';

/** Threads beyond `size`, reserved for health round trips. */
export const HEALTH_THREADS = 1; // a probe must never occupy the thread a granted render needs
/** Default budget for `healthy()`. */
export const POOL_HEALTH_DEADLINE_MS = 2_000; // a worker busy for 2 s on an echo is not healthy
/** Default drain budget for `stop()`. */
export const STOP_DRAIN_MS = 5_000; // the render child shutdown budget

export type PoolErrorCode =
  | 'ERR_POOL_QUEUE'
  | 'ERR_POOL_STOPPED'
  | 'ERR_POOL_FAILED'
  | 'ERR_POOL_START';

/** Why the pool refused or failed a task. Match on `code`. */
export class PoolError extends Error {
  override readonly name = 'PoolError';
  readonly code: PoolErrorCode;
  constructor(code: PoolErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export interface WorkerPoolOptions {
  /** Appears in errors and thread names. */
  readonly name: string;
  /** Concurrent tasks: the admission capacity this pool serves (e.g. AP_MAX_CONCURRENCY). */
  readonly size: number;
  /** The task module. @default this directory's `renderTask` (`.ts` from source, `.js` built) */
  readonly filename?: string | URL;
  /** Per-thread V8 limits. */
  readonly resourceLimits?: {
    readonly maxOldGenerationSizeMb?: number;
    readonly maxYoungGenerationSizeMb?: number;
  };
}

export interface RunOptions {
  /** Aborting terminates the thread (see the header); the fallback, not the way to cancel. */
  readonly signal?: AbortSignal;
  /** Objects moved, not copied, into the worker (a task's MessagePort). */
  readonly transferList?: readonly TransferListItem[];
}

export interface StopOptions {
  /** How long running tasks get before their threads are terminated. @default STOP_DRAIN_MS */
  readonly drainMs?: number;
}

export interface WorkerPool {
  readonly name: string;
  readonly size: number;
  /** Tasks running now (health echoes excluded). */
  readonly inFlight: number;
  /** Piscina's own queue; must always be 0. */
  readonly queueSize: number;
  /** Piscina's utilisation estimate (0 until a task completed). */
  readonly utilization: number;
  /** Live worker threads (diagnostics and tests). */
  readonly threads: readonly Worker[];
  /** The error that made this pool unhealthy, if any. */
  readonly failure: Error | null;
  readonly started: boolean;
  run<R = unknown>(task: unknown, options?: RunOptions): Promise<R>;
  healthy(deadlineMs?: number): Promise<boolean>;
  start(): Promise<void>;
  stop(options?: StopOptions): Promise<void>;
  destroy(): Promise<void>;
}

const SELF_IS_TS = import.meta.url.endsWith('.ts');

function defaultTaskModule(): URL {
  return new URL(SELF_IS_TS ? './renderTask.ts' : './renderTask.js', import.meta.url);
}

/** The process's own flags never change: judged once, not on every pool (re)start. */
let ownExecArgv: string[] | undefined;

/** Whether a worker thread accepts these execArgv tokens (Node validates them synchronously). */
function workerAccepts(tokens: readonly string[]): boolean {
  try {
    void new NodeWorker('', { eval: true, execArgv: [...tokens] }).terminate();
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_WORKER_INVALID_EXEC_ARGV') return false;
    throw error;
  }
}

/**
 * The parent's execArgv minus tsx's own loader flags and minus V8 flags. Under `tsx`, workers
 * would inherit a loader that cannot load `.ts` in a worker anyway and costs ~1 s per thread on
 * top of the shim's `register()`. V8 flags (`--max-semi-space-size`, `--trace-gc`, …) are
 * process-wide, so a worker already runs under them, and Node refuses a worker that restates
 * them (`ERR_WORKER_INVALID_EXEC_ARGV`), which would fail the pool's start. Other flags
 * (--inspect, --conditions, …) are kept.
 */
export function workerExecArgv(args: readonly string[] = process.execArgv): string[] {
  if (args === process.execArgv && ownExecArgv) return ownExecArgv;
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const takesValue =
      arg === '--require' || arg === '-r' || arg === '--import' || arg === '--loader';
    if (takesValue && /[\\/]tsx[\\/]/.test(args[i + 1] ?? '')) {
      i++;
      continue;
    }
    if (/^--(require|import|loader)=.*[\\/]tsx[\\/]/.test(arg)) continue;
    // A flag and the bare values that follow it (`--conditions dev`) are judged together;
    // preloads are kept unjudged (a probe worker would run them).
    const group = [arg];
    while (i + 1 < args.length && !args[i + 1]!.startsWith('-')) group.push(args[++i]!);
    if (takesValue || /^--(require|import|loader|experimental-loader)=/.test(arg))
      kept.push(...group);
    else if (workerAccepts(group)) kept.push(...group);
  }
  if (args === process.execArgv) ownExecArgv = kept;
  return kept;
}

function toHref(file: string | URL): string {
  if (file instanceof URL) return file.href;
  return file.startsWith('file:') ? file : new URL(`file://${file}`).href;
}

class PiscinaWorkerPool implements WorkerPool {
  readonly name: string;
  readonly size: number;
  readonly #taskModule: string;
  readonly #resourceLimits: WorkerPoolOptions['resourceLimits'];
  #piscina: Piscina | null = null;
  #inFlight = 0;
  #echoes = 0;
  #stopped = false;
  #failure: Error | null = null;
  #idle: Array<() => void> = [];

  constructor(options: WorkerPoolOptions) {
    if (typeof options.name !== 'string' || options.name === '') {
      throw new TypeError('name must be a non-empty string');
    }
    if (!Number.isSafeInteger(options.size) || options.size < 1) {
      throw new RangeError(`size must be a positive integer, got ${String(options.size)}`);
    }
    this.name = options.name;
    this.size = options.size;
    this.#taskModule = toHref(options.filename ?? defaultTaskModule());
    this.#resourceLimits = options.resourceLimits;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get queueSize(): number {
    return this.#piscina?.queueSize ?? 0;
  }

  get utilization(): number {
    return this.#piscina?.utilization ?? 0;
  }

  get threads(): readonly Worker[] {
    return this.#piscina?.threads ?? [];
  }

  get failure(): Error | null {
    return this.#failure;
  }

  get started(): boolean {
    return this.#piscina !== null;
  }

  #create(): Piscina {
    const threads = this.size + HEALTH_THREADS;
    // A `.ts` task module needs the tsx shim in the worker; a built `.js` one loads directly.
    const viaShim = this.#taskModule.endsWith('.ts');
    const piscina = new Piscina({
      name: 'default',
      filename: viaShim ? new URL('./workerEntry.mjs', import.meta.url).href : this.#taskModule,
      workerData: { taskModule: this.#taskModule, pool: this.name },
      ...(viaShim ? { execArgv: workerExecArgv() } : {}),
      minThreads: threads,
      maxThreads: threads,
      maxQueue: 0,
      idleTimeout: Number.POSITIVE_INFINITY,
      // With 'sync' atomics an idle worker blocks in Atomics.wait and its event loop stops;
      // a worker that still owns port or child-process callbacks must keep its loop running.
      atomics: 'disabled',
      ...(this.#resourceLimits ? { resourceLimits: this.#resourceLimits } : {}),
    });
    piscina.on('error', (error: Error) => {
      this.#failure ??= error;
    });
    return piscina;
  }

  #ensure(): Piscina {
    this.#piscina ??= this.#create();
    return this.#piscina;
  }

  run<R = unknown>(task: unknown, options: RunOptions = {}): Promise<R> {
    if (this.#stopped) {
      return Promise.reject(new PoolError('ERR_POOL_STOPPED', `pool ${this.name} is stopped`));
    }
    if (this.#failure) {
      return Promise.reject(
        new PoolError('ERR_POOL_FAILED', `pool ${this.name} failed: ${this.#failure.message}`, {
          cause: this.#failure,
        }),
      );
    }
    if (this.#inFlight >= this.size) {
      return Promise.reject(
        new PoolError(
          'ERR_POOL_QUEUE',
          `pool ${this.name}: all ${this.size} slots busy; a task was submitted without a grant`,
        ),
      );
    }
    const piscina = this.#ensure();
    this.#inFlight++;
    const running = piscina.run(task, {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.transferList ? { transferList: options.transferList as TransferListItem[] } : {}),
    }) as Promise<R>;
    return running.finally(() => {
      this.#inFlight--;
      if (this.#inFlight === 0) for (const wake of this.#idle.splice(0)) wake();
    });
  }

  async healthy(deadlineMs: number = POOL_HEALTH_DEADLINE_MS): Promise<boolean> {
    if (this.#stopped || this.#failure || this.#piscina === null) return false;
    // Every thread busy (all slots plus an echo already out): running tasks vouch for them.
    if (this.#inFlight + this.#echoes >= this.size + HEALTH_THREADS) return true;
    const token = Math.random();
    this.#echoes++;
    let timer: NodeJS.Timeout | undefined;
    try {
      // No AbortSignal: aborting a running echo would terminate a healthy thread. A late
      // answer is simply ignored.
      const echo = this.#piscina.run({ kind: 'echo', value: token }) as Promise<unknown>;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), deadlineMs);
      });
      const answer = await Promise.race([echo.finally(() => this.#echoes--), late]).catch(
        () => 'failed',
      );
      return answer === token && this.#failure === null;
    } finally {
      clearTimeout(timer);
    }
  }

  async start(): Promise<void> {
    if (this.#failure && this.#piscina) {
      // A pool that saw 'error' may hang its next run: replace it rather than reuse it.
      const broken = this.#piscina;
      this.#piscina = null;
      await broken.destroy();
    }
    this.#stopped = false;
    this.#failure = null;
    this.#ensure();
    let answer: unknown;
    this.#echoes++;
    try {
      answer = await this.#piscina!.run({ kind: 'echo', value: 'start' });
    } catch (error) {
      this.#failure ??= error as Error;
      throw new PoolError('ERR_POOL_START', `pool ${this.name} could not start a worker`, {
        cause: error,
      });
    } finally {
      this.#echoes--;
    }
    if (answer !== 'start') {
      throw new PoolError('ERR_POOL_START', `pool ${this.name}: the task module has no echo`);
    }
  }

  async stop(options: StopOptions = {}): Promise<void> {
    this.#stopped = true;
    const drainMs = options.drainMs ?? STOP_DRAIN_MS;
    if (this.#inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.#idle.push(resolve)),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, drainMs);
        }),
      ]);
      clearTimeout(timer);
    }
    await this.destroy();
  }

  async destroy(): Promise<void> {
    this.#stopped = true;
    const piscina = this.#piscina;
    this.#piscina = null;
    if (piscina) await piscina.destroy();
  }
}

/** A pool of `size` task slots; threads start on `start()` or the first `run()`. */
export function createWorkerPool(options: WorkerPoolOptions): WorkerPool {
  return new PiscinaWorkerPool(options);
}
