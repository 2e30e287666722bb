/**
 * Processes for the supervisor tests: a `FakeProcess` whose start/stop/healthy are deferred
 * promises settled by hand (and which records every rule it sees broken), and an
 * `EchoWorkerProcess` that owns a real `worker_threads` Worker answering echoes.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { fromPromise } from 'xstate';
import { type Process, processSupervisorMachine } from '../../../src/machines/processSupervisor.js';

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets settled promises and the actor's reactions to them run (a real macrotask turn). */
export async function flush(turns = 3): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A process whose every operation waits for the test. It models incarnations: `start` brings
 * one to life (even a start that later rejects may leave a half-started one behind), a stop
 * that resolves ends it. It records a violation when the supervisor breaks a rule.
 */
export class FakeProcess implements Process {
  readonly log: string[] = [];
  readonly violations: string[] = [];
  /** Settle every new operation successfully on its own (healthy probes answer `true`). */
  auto = false;
  /** Set by a harness while it advances the clock past a drain bound. */
  inTick = false;
  alive = false;
  ready = false;
  stopping = false;
  incarnation = 0;
  readonly #tasks = new Map<number, number>(); // incarnation -> tasks running on it
  readonly #abandoned = new Set<number>();
  readonly starts: Deferred<void>[] = [];
  readonly stops: Array<Deferred<void> & { readonly force: boolean }> = [];
  readonly probes: Deferred<boolean>[] = [];

  start(): Promise<void> {
    this.log.push('start');
    if (this.alive) this.violations.push(`start while incarnation ${this.incarnation} is alive`);
    this.alive = true;
    this.ready = false;
    this.incarnation += 1;
    const d = deferred<void>();
    this.starts.push(d);
    if (this.auto) d.resolve();
    return d.promise.then(() => {
      this.ready = true;
    });
  }

  stop(opts: { readonly force: boolean }): Promise<void> {
    this.log.push(opts.force ? 'stop(force)' : 'stop');
    const running = this.#tasks.get(this.incarnation) ?? 0;
    if (running > 0) {
      if (!opts.force) this.violations.push(`graceful stop with ${running} tasks running`);
      else if (!this.inTick && !this.#abandoned.has(this.incarnation)) {
        this.violations.push(`forced stop of ${running} tasks before any drain bound expired`);
      }
      this.#abandoned.add(this.incarnation);
    }
    this.stopping = true;
    const d = Object.assign(deferred<void>(), { force: opts.force });
    this.stops.push(d);
    if (this.auto) d.resolve();
    return d.promise.then(
      () => {
        this.alive = false;
        this.ready = false;
        this.stopping = false;
      },
      (error: unknown) => {
        this.stopping = false;
        throw error;
      },
    );
  }

  healthy(deadlineMs: number): Promise<boolean> {
    this.log.push(`healthy(${deadlineMs})`);
    const d = deferred<boolean>();
    this.probes.push(d);
    if (this.auto) d.resolve(true);
    return d.promise;
  }

  /** A task begins on the current incarnation; returns the incarnation it runs on. */
  enter(): number {
    if (!this.alive || !this.ready || this.stopping) {
      this.violations.push(
        `task admitted on a process that is ${!this.alive ? 'dead' : !this.ready ? 'not started' : 'stopping'}`,
      );
    }
    this.#tasks.set(this.incarnation, (this.#tasks.get(this.incarnation) ?? 0) + 1);
    return this.incarnation;
  }

  leave(incarnation: number): void {
    this.#tasks.set(incarnation, (this.#tasks.get(incarnation) ?? 1) - 1);
  }

  tasksOn(incarnation: number): number {
    return this.#tasks.get(incarnation) ?? 0;
  }

  /** Settles every operation still waiting (successfully), oldest first. */
  settleAll(): void {
    for (const d of this.starts.splice(0)) d.resolve();
    for (const d of this.stops.splice(0)) d.resolve();
    for (const d of this.probes.splice(0)) d.resolve(true);
  }
}

/** The supervisor with its three I/O actors provided as fakes that delegate to `fake`. */
export function machineWithFake(fake: FakeProcess) {
  return processSupervisorMachine.provide({
    actors: {
      startProcess: fromPromise<void, { process: Process }>(() => fake.start()),
      stopProcess: fromPromise<void, { process: Process; force: boolean }>(({ input }) =>
        fake.stop({ force: input.force }),
      ),
      probeProcess: fromPromise<boolean, { process: Process; deadlineMs: number }>(({ input }) =>
        fake.healthy(input.deadlineMs),
      ),
    },
  });
}

// CommonJS source for an eval'd worker: echoes values; `wedge` blocks its event loop on an
// Atomics gate until the test opens it (a wedged worker, without timers).
const ECHO_WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.kind === 'wedge') Atomics.wait(m.gate, 0, 0);
  else parentPort.postMessage({ id: m.id, value: m.value });
});
`;

/** The error a task sees when its worker dies under it. */
export class WorkerGoneError extends Error {
  override readonly name = 'WorkerGoneError';
  readonly code = 'ERR_WORKER_GONE';
}

class EchoWorker {
  readonly #pending = new Map<number, Deferred<unknown>>();
  #nextId = 1;
  /** Task echoes in flight (health pings excluded). */
  tasks = 0;
  exited = false;
  constructor(readonly worker: Worker) {
    worker.on('message', (m: { id: number; value: unknown }) => {
      const waiting = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      waiting?.resolve(m.value);
    });
    worker.once('exit', () => {
      this.exited = true;
      for (const waiting of this.#pending.values()) {
        waiting.reject(new WorkerGoneError('worker exited mid-task'));
      }
      this.#pending.clear();
    });
  }
  request(value: unknown): Promise<unknown> {
    if (this.exited) return Promise.reject(new WorkerGoneError('worker is gone'));
    const id = this.#nextId++;
    const d = deferred<unknown>();
    this.#pending.set(id, d);
    this.worker.postMessage({ kind: 'echo', id, value });
    return d.promise;
  }
  async task(value: unknown): Promise<unknown> {
    this.tasks += 1;
    try {
      return await this.request(value);
    } finally {
      this.tasks -= 1;
    }
  }
}

/** A real process: one worker thread. Counts how many threads ever overlapped. */
export class EchoWorkerProcess implements Process {
  #current: EchoWorker | null = null;
  readonly violations: string[] = [];
  created = 0;
  alive = 0;
  maxAlive = 0;
  /** Echoes served by each incarnation, in start order. */
  readonly served: number[] = [];

  async start(): Promise<void> {
    const worker = new Worker(ECHO_WORKER_SOURCE, { eval: true });
    this.created += 1;
    this.alive += 1;
    this.maxAlive = Math.max(this.maxAlive, this.alive);
    worker.once('exit', () => {
      this.alive -= 1;
    });
    await once(worker, 'online');
    this.#current = new EchoWorker(worker);
    this.served.push(0);
  }

  async stop(opts: { readonly force: boolean }): Promise<void> {
    const current = this.#current;
    this.#current = null;
    if (current === null) return;
    if (!opts.force && current.tasks > 0) {
      this.violations.push(`graceful stop with ${current.tasks} tasks in flight`);
    }
    if (!current.exited) await current.worker.terminate();
  }

  async healthy(deadlineMs: number): Promise<boolean> {
    const current = this.#current;
    if (current === null || current.exited) return false;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(resolve, deadlineMs, false);
    });
    try {
      return await Promise.race([current.request('ping').then(() => true), late]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** One task: a round trip through the current worker. */
  async echo<T>(value: T): Promise<T> {
    const current = this.#current;
    if (current === null) throw new WorkerGoneError('no worker');
    const incarnation = this.served.length - 1;
    const answer = (await current.task(value)) as T;
    this.served[incarnation] += 1;
    return answer;
  }

  /** Blocks the worker's event loop; call the returned function to release it. */
  wedge(): () => void {
    const gate = new Int32Array(new SharedArrayBuffer(4));
    this.#current?.worker.postMessage({ kind: 'wedge', gate });
    return () => {
      Atomics.store(gate, 0, 1);
      Atomics.notify(gate, 0);
    };
  }

  /** Kills the current thread behind the supervisor's back (a crash). */
  async crash(): Promise<void> {
    await this.#current?.worker.terminate();
  }
}
