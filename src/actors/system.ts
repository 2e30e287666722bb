/**
 * The system: the ordered list of singletons (semaphore, limiter, metrics, readiness, pools,
 * registries, listeners), started top-down and stopped bottom-up, and the policy that an actor
 * which fails is a bug that ends the system (never the process: that is the host's decision).
 *
 * ## Invariants
 * - **Declared order up, reverse order down.** A child starts only after every child above it
 *   has started, and is stopped only after every child below it has stopped. Coordinators
 *   release into the semaphore, listeners need every consumer: the order is the dependency list.
 * - **A failed start leaves nothing running.** The children already started are stopped in
 *   reverse and the start error is rethrown.
 * - **Each stop is bounded** by the child's `stopTimeoutMs`; a child that overruns is reported
 *   and the shutdown moves on, so one wedged child cannot keep the others alive.
 * - **An actor error is fatal.** Machines are pure: a throw is a bug, and a half-updated
 *   singleton (a semaphore that forgot its holders) must not keep serving. The default fatal
 *   path logs, runs the bounded shutdown (so ffmpeg processes are killed), then calls
 *   `afterFatal`. Nothing here calls `process.exit`: a host (the CLI) exits with
 *   `FATAL_EXIT_CODE` from its own hook; an embedding app decides for itself. A singleton actor
 *   that stops or finishes while the system is running is fatal too; dynamic actors put under
 *   `supervise` are fatal only on error.
 * - **Fatal fires once.** Later failures are logged, not acted on again.
 * - **Hooks are given, never patched in.** `onFatal`, `afterFatal` and `onSupervise` are options
 *   of `createSystem`; a child's `start` is handed the system (`get`, `supervise`), so a service
 *   that supervises its dynamic actors is built inside its child, after the system exists.
 *
 * ## Races
 * - *Fatal or stop during start.* `stop()` waits for the start in flight to settle; the start
 *   loop sees the stop request before each child and unwinds what it started.
 * - *A child's own stop ends its actor.* The child is marked stopping before `stop(handle)`
 *   runs, so its actor reaching `stopped` is expected; an `error` is still fatal.
 *
 * ## Events
 * | Log (level)  | Fields                        | When                                  |
 * |--------------|-------------------------------|---------------------------------------|
 * | error        | `child`, `reason`, `err`      | an actor failed (fatal)               |
 * | warn         | `child`, `outcome`, `err?`    | a child's stop timed out or threw     |
 */
import type { AnyActorRef } from 'xstate';
import { type GoneReason, type Unwatch, watch } from './monitor.js';

/**
 * EX_SOFTWARE from sysexits.h: an internal software error, which is what a throwing machine is.
 * The library never exits; this is the code the CLI (a host) exits with after a fatal error.
 */
export const FATAL_EXIT_CODE = 70;
/** Per-child stop bound when the child names none; OTP's default worker shutdown. */
export const DEFAULT_CHILD_STOP_TIMEOUT_MS = 5_000;
/** Whole-shutdown bound on the fatal path; above the coordinators' 13 s stop budget. */
export const FATAL_STOP_BUDGET_MS = 15_000;

/** The slice of a pino logger the system uses; `console` fits too. */
export interface SystemLogger {
  error(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
}

/** Handles of the children started so far, for a child's `start` to find its dependencies. */
export interface StartedChildren {
  get<H = unknown>(name: string): H;
}

/** What a child's `start` is handed: the children started before it, and the fatal policy. */
export interface SystemContext extends StartedChildren {
  /** Treats an `error` of `actor` (a dynamic actor, e.g. a coordinator) as fatal. */
  supervise(actor: AnyActorRef, name: string): Unwatch;
}

export interface ChildSpec<H = unknown> {
  /** Unique within the system; used in logs and `get`. */
  readonly name: string;
  /**
   * Starts the child. A service whose dynamic actors the system must supervise is built here,
   * from `system.supervise`, so nothing is wired into it after the system exists.
   */
  start(system: SystemContext): H | Promise<H>;
  stop(handle: H): void | Promise<void>;
  /** The XState actor inside the handle, if any: it is watched for errors and early stops. */
  actor?(handle: H): AnyActorRef | undefined;
  /** Bound on `stop(handle)`; `Infinity` waits forever. @default 5000 */
  readonly stopTimeoutMs?: number;
}

export interface Fatal {
  /** The child name, or the name given to `supervise`. */
  readonly child: string;
  readonly reason: GoneReason;
}

export interface ChildStopReport {
  readonly name: string;
  readonly outcome: 'stopped' | 'timeout' | 'failed';
  readonly error?: unknown;
}

export interface SystemOptions {
  /** Replaces the default fatal path (log, bounded shutdown, `afterFatal`). */
  readonly onFatal?: (fatal: Fatal) => void;
  /** Called with every actor put under `supervise`, before it is watched (a live view follows it). */
  readonly onSupervise?: (actor: AnyActorRef, name: string) => void;
  /** @default a console-backed logger */
  readonly logger?: SystemLogger;
  /**
   * Called once by the default fatal path, when the bounded shutdown has ended (or its
   * `FATAL_STOP_BUDGET_MS` ran out). The host decides what follows, e.g. `process.exit(70)`.
   * @default nothing: the system is stopped and the process left to its host
   */
  readonly afterFatal?: (fatal: Fatal) => void;
}

export type SystemStatus = 'starting' | 'running' | 'stopping' | 'stopped';

export interface System extends SystemContext {
  readonly status: SystemStatus;
  /** Stops every started child in reverse order. Idempotent: every call gets the same promise. */
  stop(): Promise<readonly ChildStopReport[]>;
}

interface StartedChild {
  readonly spec: ChildSpec<any>;
  readonly handle: unknown;
  stopping: boolean;
  unwatch: Unwatch;
}

const consoleLogger: SystemLogger = {
  error: (fields, message) => console.error(message ?? 'error', fields),
  warn: (fields, message) => console.warn(message ?? 'warning', fields),
};

/** setTimeout's ceiling; a longer bound would fire after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

const TIMED_OUT: unique symbol = Symbol('timed out');

class ActorSystem implements System {
  readonly #specs: readonly ChildSpec<any>[];
  readonly #logger: SystemLogger;
  readonly #afterFatal: ((fatal: Fatal) => void) | undefined;
  readonly #onFatal: ((fatal: Fatal) => void) | undefined;
  readonly #onSupervise: ((actor: AnyActorRef, name: string) => void) | undefined;
  readonly #started: StartedChild[] = [];
  readonly #handles = new Map<string, unknown>();
  #status: SystemStatus = 'starting';
  #starting: Promise<void> | undefined;
  #stopping: Promise<readonly ChildStopReport[]> | undefined;
  #fatal = false;

  constructor(specs: readonly ChildSpec<any>[], options: SystemOptions) {
    const names = new Set<string>();
    for (const spec of specs) {
      if (typeof spec?.name !== 'string' || spec.name === '') {
        throw new TypeError('every child needs a non-empty name');
      }
      if (names.has(spec.name)) throw new TypeError(`duplicate child name "${spec.name}"`);
      if (typeof spec.start !== 'function' || typeof spec.stop !== 'function') {
        throw new TypeError(`child "${spec.name}" needs start() and stop()`);
      }
      const limit = spec.stopTimeoutMs;
      if (
        limit !== undefined &&
        !(limit >= 0 && (limit <= MAX_TIMER_MS || limit === Number.POSITIVE_INFINITY))
      ) {
        throw new RangeError(
          `child "${spec.name}": stopTimeoutMs must be 0..${MAX_TIMER_MS} or Infinity`,
        );
      }
      names.add(spec.name);
    }
    this.#specs = specs;
    this.#logger = options.logger ?? consoleLogger;
    this.#afterFatal = options.afterFatal;
    this.#onFatal = options.onFatal;
    this.#onSupervise = options.onSupervise;
  }

  get status(): SystemStatus {
    return this.#status;
  }

  get<H = unknown>(name: string): H {
    if (!this.#handles.has(name)) throw new RangeError(`no started child named "${name}"`);
    return this.#handles.get(name) as H;
  }

  start(): Promise<void> {
    this.#starting ??= this.#startAll();
    return this.#starting;
  }

  async #startAll(): Promise<void> {
    try {
      for (const spec of this.#specs) {
        if (this.#stopping) throw new Error(`system stopped while starting "${spec.name}"`);
        const handle = await spec.start(this);
        const child: StartedChild = { spec, handle, stopping: false, unwatch: noop };
        this.#started.push(child);
        this.#handles.set(spec.name, handle);
        const actor = spec.actor?.(handle);
        if (actor) child.unwatch = watch(actor, (reason) => this.#childGone(child, reason));
      }
    } catch (error) {
      await this.#stopStarted();
      if (!this.#stopping) this.#status = 'stopped';
      throw error;
    }
    if (!this.#stopping) this.#status = 'running';
  }

  stop(): Promise<readonly ChildStopReport[]> {
    this.#stopping ??= (async () => {
      this.#status = 'stopping';
      await this.#starting?.catch(noop);
      const reports = await this.#stopStarted();
      this.#status = 'stopped';
      return reports;
    })();
    return this.#stopping;
  }

  supervise(actor: AnyActorRef, name: string): Unwatch {
    this.#onSupervise?.(actor, name);
    return watch(actor, (reason) => {
      if (reason.type === 'error') this.#raise({ child: name, reason });
    });
  }

  async #stopStarted(): Promise<ChildStopReport[]> {
    const reports: ChildStopReport[] = [];
    for (let child = this.#started.pop(); child; child = this.#started.pop()) {
      child.stopping = true;
      this.#handles.delete(child.spec.name);
      reports.push(await this.#stopChild(child));
      child.unwatch();
    }
    return reports;
  }

  async #stopChild(child: StartedChild): Promise<ChildStopReport> {
    const { name } = child.spec;
    const limitMs = child.spec.stopTimeoutMs ?? DEFAULT_CHILD_STOP_TIMEOUT_MS;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const stopped = (async () => child.spec.stop(child.handle))();
      const outcome =
        limitMs === Number.POSITIVE_INFINITY
          ? await stopped
          : await Promise.race([
              stopped,
              new Promise<typeof TIMED_OUT>((resolve) => {
                timer = setTimeout(resolve, limitMs, TIMED_OUT);
              }),
            ]);
      if (outcome === TIMED_OUT) {
        this.#logger.warn({ child: name, outcome: 'timeout', limitMs }, 'child stop timed out');
        return { name, outcome: 'timeout' };
      }
      return { name, outcome: 'stopped' };
    } catch (error) {
      this.#logger.warn({ child: name, outcome: 'failed', err: error }, 'child stop failed');
      return { name, outcome: 'failed', error };
    } finally {
      clearTimeout(timer);
    }
  }

  #childGone(child: StartedChild, reason: GoneReason): void {
    if (child.stopping && reason.type !== 'error') return; // its own stop, as planned
    if (this.#stopping && reason.type !== 'error') return; // shutdown in progress
    this.#raise({ child: child.spec.name, reason });
  }

  #raise(fatal: Fatal): void {
    const err = fatal.reason.type === 'error' ? fatal.reason.error : undefined;
    this.#logger.error(
      { child: fatal.child, reason: fatal.reason.type, err },
      fatal.reason.type === 'error'
        ? 'actor failed: a machine threw, which is a bug; shutting down'
        : 'singleton actor ended while the system was running; shutting down',
    );
    if (this.#fatal) return;
    this.#fatal = true;
    if (this.#onFatal) {
      this.#onFatal(fatal);
      return;
    }
    let done = false;
    const settle = () => {
      if (done) return;
      done = true;
      clearTimeout(budget);
      this.#afterFatal?.(fatal);
    };
    const budget = setTimeout(settle, FATAL_STOP_BUDGET_MS);
    budget.unref?.(); // the budget bounds the hook's wait; it never keeps a host alive
    this.stop().then(settle, settle);
  }
}

function noop(): void {}

/**
 * A child that is one XState actor: started with the system, stopped with it, and watched (an
 * error, or an end while the system runs, is fatal). `attach` runs once the actor has started
 * (e.g. publishing its telemetry); what it returns runs once the actor has stopped.
 */
export function actorChild<A extends AnyActorRef>(
  name: string,
  actor: A,
  attach?: (actor: A) => () => void,
): ChildSpec<A> {
  let detach: () => void = noop;
  return {
    name,
    start: () => {
      actor.start();
      detach = attach?.(actor) ?? noop;
      return actor;
    },
    stop: () => {
      actor.stop();
      detach();
    },
    actor: () => actor,
  };
}

/**
 * Starts `children` in the declared order and resolves with the running system. If a child's
 * start throws, the ones already started are stopped in reverse and the error is rethrown.
 * Throws `TypeError` synchronously for malformed specs (missing or duplicate names).
 */
export function createSystem(
  children: readonly ChildSpec<any>[],
  options: SystemOptions = {},
): Promise<System> {
  const system = new ActorSystem(children, options);
  return system.start().then(() => system);
}
