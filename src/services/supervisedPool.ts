/**
 * A worker pool owned by a process supervisor: the supervisor decides when the pool starts
 * (lazily, on the first task), when it is recycled (after `maxTasks` tasks, with a drain) and
 * when it is replaced (unhealthy); this module adapts a Piscina pool to that contract.
 *
 * Piscina cannot recycle its threads, so a "restart" here is a swap of the whole pool: `start`
 * creates a fresh pool, `stop` drains or destroys the current one. A task binds to the pool that
 * is current when the supervisor admits it, so the old pool finishes its own tasks while the
 * supervisor holds new ones until the fresh pool is up.
 *
 * `SupervisedPool` presents the same `WorkerPool` surface the Render machine and the probe path
 * already use, so neither knows it is supervised: `run` simply waits inside the supervisor while
 * a pool starts or restarts. No second admission queue exists here: every task reaching `run`
 * already holds a semaphore (or probe limiter) grant, so at most `size` tasks ever wait.
 *
 * `createSupervisedPool` builds one (Piscina pool, process, supervisor; every supervisor
 * transition published on `WORKER_POOL_TRANSITION_CHANNEL`, labelled with the pool's name);
 * `poolsChild` is the system child that warms the pools at boot and drains them at shutdown
 * (up to `POOL_STOP_DRAIN_MS`, then their threads, and ffmpeg with them, are killed).
 */
import diagnostics from 'node:diagnostics_channel';
import type { TransferListItem, Worker } from 'node:worker_threads';
import type { ActorOptions } from 'xstate';
import type { ChildSpec } from '../actors/system.js';
import type {
  Process,
  ProcessSupervisorActor,
  processSupervisorMachine,
  SupervisorTelemetry,
} from '../machines/processSupervisor.js';
import { WORKER_POOL_TRANSITION_CHANNEL } from '../telemetry/channels.js';
import {
  createWorkerPool,
  PoolError,
  type RunOptions,
  type StopOptions,
  type WorkerPool,
} from '../workers/pool.js';
import { runSupervised, startProcessSupervisor, stopSupervisor } from './supervisorClient.js';

/** How long a planned recycle lets the old pool's running tasks finish before killing them. */
export const RECYCLE_DRAIN_MS = 5_000;

/** At shutdown, how long running tasks get before their threads (and ffmpeg) are killed. */
export const POOL_STOP_DRAIN_MS = 10_000;

/** The supervisor's view of one pool incarnation after another. */
export class PoolProcess implements Process {
  readonly #factory: () => WorkerPool;
  #pool: WorkerPool | null = null;
  /** Pools created over the process's life (1 + restarts once started). */
  created = 0;

  constructor(factory: () => WorkerPool) {
    this.#factory = factory;
  }

  get current(): WorkerPool | null {
    return this.#pool;
  }

  async start(): Promise<void> {
    const pool = this.#factory();
    this.created++;
    try {
      await pool.start();
    } catch (error) {
      await pool.destroy().catch(() => {});
      throw error;
    }
    this.#pool = pool;
  }

  async stop({ force }: { readonly force: boolean }): Promise<void> {
    const pool = this.#pool;
    if (!pool) return;
    if (force) await pool.destroy();
    else await pool.stop({ drainMs: RECYCLE_DRAIN_MS });
  }

  healthy(deadlineMs: number): Promise<boolean> {
    return this.#pool ? this.#pool.healthy(deadlineMs) : Promise.resolve(false);
  }
}

/** Errors that mean the pool (a thread), not the task's input, is at fault. */
export function isPoolFault(error: unknown): boolean {
  if (error instanceof PoolError) return error.code !== 'ERR_POOL_QUEUE';
  if (!(error instanceof Error)) return true;
  // Our own cancellation aborts the task: that is not the pool's fault.
  if (error.name === 'AbortError') return false;
  return true;
}

export class SupervisedPool implements WorkerPool {
  readonly name: string;
  readonly size: number;
  readonly supervisor: ProcessSupervisorActor;
  readonly process: PoolProcess;

  constructor(options: {
    name: string;
    size: number;
    supervisor: ProcessSupervisorActor;
    process: PoolProcess;
  }) {
    this.name = options.name;
    this.size = options.size;
    this.supervisor = options.supervisor;
    this.process = options.process;
  }

  get inFlight(): number {
    return this.process.current?.inFlight ?? 0;
  }
  get queueSize(): number {
    return this.process.current?.queueSize ?? 0;
  }
  get utilization(): number {
    return this.process.current?.utilization ?? 0;
  }
  get threads(): readonly Worker[] {
    return this.process.current?.threads ?? [];
  }
  get failure(): Error | null {
    return this.process.current?.failure ?? null;
  }
  get started(): boolean {
    return this.process.current?.started ?? false;
  }

  run<R = unknown>(task: unknown, options: RunOptions = {}): Promise<R> {
    return runSupervised<R, PoolProcess>(
      this.supervisor,
      (proc) => {
        const pool = proc.current;
        if (!pool) throw new PoolError('ERR_POOL_FAILED', `pool ${this.name} is not running`);
        const runOptions: { signal?: AbortSignal; transferList?: readonly TransferListItem[] } = {};
        if (options.signal) runOptions.signal = options.signal;
        if (options.transferList) runOptions.transferList = options.transferList;
        return pool.run<R>(task, runOptions);
      },
      { ...(options.signal ? { signal: options.signal } : {}), isProcessFault: isPoolFault },
    );
  }

  healthy(deadlineMs?: number): Promise<boolean> {
    return this.process.current ? this.process.current.healthy(deadlineMs) : Promise.resolve(false);
  }

  /** Starting is the supervisor's decision (lazily, on the first task). */
  async start(): Promise<void> {}

  async stop(_options?: StopOptions): Promise<void> {
    await this.process.current?.stop(_options);
  }

  async destroy(): Promise<void> {
    await this.process.current?.destroy();
  }
}

export interface SupervisedPoolOptions {
  readonly name: 'render' | 'probe';
  /** Concurrent tasks: the admission capacity the pool serves. */
  readonly size: number;
  /** Recycle budget, read on every admission; 0 = never. */
  readonly maxTasks: () => number;
  /** XState inspection observer for the supervisor (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<typeof processSupervisorMachine>['inspect'];
}

/**
 * A worker pool under a started process supervisor, which creates the pool lazily (on the
 * first task), recycles it after `maxTasks` tasks and replaces it when it stops answering
 * health probes.
 */
export function createSupervisedPool(options: SupervisedPoolOptions): SupervisedPool {
  const { name, size } = options;
  const process = new PoolProcess(() => createWorkerPool({ name, size }));
  const supervisor = startProcessSupervisor(
    { process, maxTasks: options.maxTasks },
    options.inspect ? { inspect: options.inspect } : {},
  );
  // Every supervisor transition goes out on the diagnostics channel, labelled with its pool.
  const transitions = diagnostics.channel(WORKER_POOL_TRANSITION_CHANNEL);
  supervisor.on('telemetry', (event: SupervisorTelemetry) => {
    if (transitions.hasSubscribers) transitions.publish({ pool: name, ...event });
  });
  return new SupervisedPool({ name, size, supervisor, process });
}

/**
 * The system child owning `pools`. Starting warms each with one echo, so the first request does
 * not pay for the threads' start (and a probe deadline is never spent waiting for a pool to come
 * up); stopping drains each up to `drainMs`, then kills what is left and stops the supervisors.
 */
export function poolsChild(
  pools: readonly SupervisedPool[],
  drainMs: number = POOL_STOP_DRAIN_MS,
): ChildSpec<readonly SupervisedPool[]> {
  return {
    name: 'pools',
    start: async () => {
      await Promise.all(pools.map((p) => p.run({ kind: 'echo', value: 'warm' })));
      return pools;
    },
    stop: async (started) => {
      await Promise.all(
        started.map((p) => stopSupervisor(p.supervisor, { drainTimeoutMs: drainMs })),
      );
      for (const p of started) p.supervisor.stop();
    },
    stopTimeoutMs: drainMs + 10_000,
  };
}
