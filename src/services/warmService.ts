/**
 * Warming (issue #19): an operator's list of variants rendered into the variant store at a class
 * below `interactive`, so that a later listener gets a HIT. The HTTP side (`http/stages/warm.ts`)
 * validates each entry exactly as a GET of the same path would be and hands the valid ones here
 * as render requests; this service owns them from then on, whatever happens to that request.
 * Prefetch is the same job with a reason: `prefetch(request)` is what a stage that can predict
 * the next request (an HLS playlist's next segments, a range continuing a range) calls.
 *
 * A job's life: `waiting` (held here, no place in the semaphore) → `queued` / `rendering` (a
 * subscriber of the variant's coordinator, the slot asked at the job's class) → `stored`, or
 * back to `backoff` → `waiting` after a setback, or `failed`. `peer` is an entry a cluster peer
 * holds the claim of: that node renders it, this one does not.
 *
 * ## Invariants
 * - **The job is the render's subscriber from admission, queued or not**: it joins with
 *   `store: true`, so a queued warm coordinator is kept by the service, not by the HTTP request
 *   that asked for it (the original's hazard: a queued warm render with no tee yet stopped when
 *   its request went away). The store's Tee joins when the render starts, from byte 0, as for
 *   every render; a job holds no staging file while it waits.
 * - **Warm work never makes a listener wait**: its renders are orphans from their first byte
 *   (preempted for a queued listener), a listener joining a queued one promotes it, and a live
 *   arrival into a full queue displaces the newest warm waiter (`machines/semaphore.ts`).
 * - **Warm ffmpeg yields the CPU as well**: a render a job starts is `background`, so its ffmpeg
 *   runs at the weakest niceness (19) beside a listener's (`AP_FFMPEG_NICE`). A listener who
 *   joins a warm render that is already running is served by that ffmpeg, at that niceness.
 * - **At most `AP_WARM_ADMITTED` jobs are admitted at once**; the rest wait here, in order.
 * - **Every setback is reported and bounded**: displaced, refused (queue full) and preempted are
 *   recorded as `rejected(reason)` and retried after the semaphore's Retry-After doubled per
 *   attempt, at most `AP_WARM_BACKOFF_MAX_SECONDS`, for at most `AP_WARM_ATTEMPTS` attempts;
 *   any other failure is final (`failed(reason)`).
 * - **`stored` means the store has it**: after `done`, the Tee's commit is awaited and the store
 *   asked (`head`); a render that finished without a stored variant is `failed(not_stored)`.
 * - **One job per key** on this node; in cluster mode one per key cluster-wide: the render claim
 *   is taken before the job exists and released when it settles (`claim`).
 * - **No timer outlives `close()`**: backoffs are cleared and waiting jobs fail `shutting_down`.
 *
 * ## Races
 * - *A message before `subscribe` resolved* (a short render that completed at once): the job
 *   follows messages addressed to its current subscriber id only, and the resolution never
 *   moves a job backwards.
 * - *Displaced while the HTTP request is still being answered*: the entry's report is what the
 *   job is when the report is written; the status view has the rest.
 *
 * ## Events
 * None published; `status()` is the view (served on the metrics listener, `/debug/warm`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConfigProvider } from '../config/index.js';
import type { RenderFailure } from '../core/failure.js';
import type { RenderRequest, SubscribeOutcome } from '../core/request.js';
import type { SubscriberMessage } from '../machines/renderCoordinator.js';
import type { AdmissionClass } from '../machines/semaphore.js';
import type { StoredVariant } from '../store/types.js';
import type { MetricsRoute } from './metricsRouter.js';
import type { SubscribeOptions } from './renderService.js';

/** The classes a warm entry may name: never `interactive`, which is a listener's. */
export const WARM_CLASSES = ['high', 'normal', 'low'] as const;
export type WarmClass = (typeof WARM_CLASSES)[number] & AdmissionClass;

/** Settled jobs kept for the status view, newest last. */
export const WARM_RECENT = 200;

export type WarmJobState =
  | 'waiting'
  | 'queued'
  | 'rendering'
  | 'backoff'
  | 'stored'
  | 'failed'
  | 'peer';

/** Setbacks that are retried: each costs one attempt. */
export type WarmSetback = 'displaced' | 'queue_full' | 'preempted';

/** One valid entry, as the HTTP side built it. */
export interface WarmEntry {
  readonly path: string;
  readonly class: WarmClass;
  readonly request: RenderRequest;
  /** Why it is rendered: an operator's warm, or a prefetch a stage predicted. @default 'warm' */
  readonly reason?: 'warm' | 'prefetch';
}

/** What one entry is reported as, in the order they were given. */
export type WarmReport =
  | { readonly status: 'hit' }
  | {
      readonly status: 'started';
      readonly job: string;
      readonly state: WarmJobState;
      /** The cluster peer that holds the key's claim (state `peer`). */
      readonly node?: string;
    }
  | {
      readonly status: 'rejected';
      readonly reason: WarmSetback | 'warm_full' | 'shutting_down';
      /** Set when the job is retried: seconds until its next attempt. */
      readonly retryInS?: number;
      readonly job?: string;
    };

/** A job as the status view shows it. */
export interface WarmJobView {
  readonly job: string;
  readonly key: string;
  readonly path: string;
  readonly class: WarmClass;
  readonly reason: 'warm' | 'prefetch';
  readonly state: WarmJobState;
  readonly attempts: number;
  /** `started`, `rejected(displaced)`, `stored`, … in order. */
  readonly history: readonly string[];
  readonly failure?: string;
  readonly retryInS?: number;
  readonly node?: string;
}

export interface WarmStatus {
  readonly limits: {
    readonly maxEntries: number;
    readonly maxPending: number;
    readonly admitted: number;
    readonly attempts: number;
    readonly backoffMaxS: number;
  };
  /** Jobs admitted to the semaphore now (queued or rendering there). */
  readonly admitted: number;
  readonly counts: Readonly<Record<WarmJobState, number>>;
  /** Jobs not settled, oldest first. */
  readonly jobs: readonly WarmJobView[];
  /** The last `WARM_RECENT` settled jobs, oldest first. */
  readonly recent: readonly WarmJobView[];
}

/** A claim of a key cluster-wide (cluster mode); `peer` when another node holds it. */
export type WarmClaim =
  | { readonly type: 'local'; release(): void }
  | { readonly type: 'peer'; readonly nodeId: string };

export interface WarmServiceOptions {
  readonly renders: {
    subscribe(
      request: RenderRequest,
      subscriberId: string,
      onMessage: (message: SubscriberMessage) => void,
      options?: SubscribeOptions,
    ): Promise<SubscribeOutcome>;
  };
  readonly store: { head(key: string): Promise<StoredVariant | undefined> };
  /** The store's tees: a finished render is `stored` once its tee has settled. */
  readonly tees?: { settled(key: string): Promise<{ outcome: string }> | undefined };
  readonly config: ConfigProvider;
  /** Cluster mode: claims the key before a job exists (absent: a single node). */
  readonly claim?: (key: string) => Promise<WarmClaim>;
  /** Monotonic ms. @default performance.now */
  readonly now?: () => number;
}

interface Job {
  readonly id: string;
  readonly entry: WarmEntry;
  state: WarmJobState;
  attempts: number;
  readonly history: string[];
  failure?: string;
  retryAt?: number;
  timer?: ReturnType<typeof setTimeout>;
  /** The subscriber id of the current attempt; messages for any other are stale. */
  subscriberId?: string;
  release?: () => void;
  node?: string;
}

let jobSeq = 0;

export class WarmService {
  readonly #opts: WarmServiceOptions;
  readonly #now: () => number;
  /** Jobs not settled, by key. */
  readonly #byKey = new Map<string, Job>();
  /** Jobs waiting for admission, in order. */
  readonly #fifo: Job[] = [];
  readonly #recent: Job[] = [];
  #admitted = 0;
  #pumping = false;
  #closed = false;

  constructor(options: WarmServiceOptions) {
    this.#opts = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Jobs not settled (any state but stored, failed, peer). */
  get pending(): number {
    return this.#byKey.size;
  }

  /** Takes the entries in order; each report says what its entry is now. */
  async submit(entries: readonly WarmEntry[]): Promise<WarmReport[]> {
    const reports: WarmReport[] = [];
    for (const entry of entries) reports.push(await this.#submitOne(entry));
    return reports;
  }

  /**
   * Renders a predicted variant at `class` (default `low`) unless it is stored or already
   * rendering: what an HLS playlist stage or a range continuing a range calls. Never waits for
   * the render; the report says what happened to the prediction.
   */
  prefetch(request: RenderRequest, path: string, cls: WarmClass = 'low'): Promise<WarmReport> {
    return this.#submitOne({ path, class: cls, request, reason: 'prefetch' });
  }

  async #submitOne(entry: WarmEntry): Promise<WarmReport> {
    if (this.#closed) return { status: 'rejected', reason: 'shutting_down' };
    const key = entry.request.key;
    const existing = this.#byKey.get(key);
    if (existing) return { status: 'started', job: existing.id, state: existing.state };
    if (await this.#opts.store.head(key)) return { status: 'hit' };
    const config = this.#opts.config.get();
    if (this.#byKey.size >= config.warmMaxPending) {
      return { status: 'rejected', reason: 'warm_full' };
    }
    // Checked again: the store's head was an await, and another submit may have taken the key.
    const raced = this.#byKey.get(key);
    if (raced) return { status: 'started', job: raced.id, state: raced.state };
    const job: Job = {
      id: `w${++jobSeq}`,
      entry,
      state: 'waiting',
      attempts: 0,
      history: [],
    };
    this.#byKey.set(key, job);
    if (this.#opts.claim) {
      const claim = await this.#opts.claim(key);
      if (claim.type === 'peer') {
        job.node = claim.nodeId;
        this.#settle(job, 'peer', `claimed by ${claim.nodeId}`);
        return { status: 'started', job: job.id, state: 'peer', node: claim.nodeId };
      }
      job.release = () => claim.release();
      if (this.#closed) {
        this.#settle(job, 'failed', 'shutting_down');
        return { status: 'rejected', reason: 'shutting_down' };
      }
    }
    this.#fifo.push(job);
    await this.#pump();
    return this.#reportOf(job);
  }

  #reportOf(job: Job): WarmReport {
    if (job.state === 'backoff') {
      const last = job.history[job.history.length - 1] ?? '';
      const reason = (/^rejected\((\w+)\)$/.exec(last)?.[1] ?? 'queue_full') as WarmSetback;
      return {
        status: 'rejected',
        reason,
        retryInS: Math.max(0, Math.ceil(((job.retryAt ?? 0) - this.#now()) / 1000)),
        job: job.id,
      };
    }
    return { status: 'started', job: job.id, state: job.state };
  }

  /** Admits waiting jobs while fewer than `AP_WARM_ADMITTED` are admitted. One loop at a time. */
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (
        !this.#closed &&
        this.#fifo.length > 0 &&
        this.#admitted < this.#opts.config.get().warmAdmitted
      ) {
        await this.#attempt(this.#fifo.shift()!);
      }
    } finally {
      this.#pumping = false;
    }
  }

  async #attempt(job: Job): Promise<void> {
    job.attempts++;
    const id = `warm-${job.id}.${job.attempts}`;
    job.subscriberId = id;
    job.state = 'queued';
    this.#admitted++;
    let outcome: SubscribeOutcome;
    try {
      outcome = await this.#opts.renders.subscribe(
        { ...job.entry.request, background: true },
        id,
        (message) => this.#onMessage(job, id, message),
        { class: job.entry.class, store: true },
      );
    } catch (error) {
      outcome = { type: 'failed', failure: { class: 'render_failed', detail: String(error) } };
    }
    if (outcome.type === 'failed') {
      if (job.subscriberId === id) this.#ended(job, outcome.failure);
      return;
    }
    if (job.subscriberId !== id) return; // already ended by a message
    job.history.push('started');
    if (outcome.state === 'rendering' && job.state === 'queued') job.state = 'rendering';
  }

  #onMessage(job: Job, id: string, message: SubscriberMessage): void {
    if (job.subscriberId !== id) return;
    switch (message.type) {
      case 'rendering':
        if (job.state === 'queued') job.state = 'rendering';
        return;
      case 'chunk':
        return;
      case 'done':
        job.subscriberId = undefined;
        this.#admitted--;
        void this.#pump();
        void this.#verify(job);
        return;
      case 'error':
        this.#ended(job, message.failure);
        return;
    }
  }

  /** The attempt is over without a variant: retried if it was a setback, else failed. */
  #ended(job: Job, failure: RenderFailure): void {
    job.subscriberId = undefined;
    this.#admitted--;
    const setback = setbackOf(failure);
    if (setback === undefined || this.#closed) {
      const reason = this.#closed ? 'shutting_down' : (failure.class as string);
      this.#settle(job, 'failed', failure.detail ? `${reason}: ${failure.detail}` : reason);
    } else {
      job.history.push(`rejected(${setback})`);
      const config = this.#opts.config.get();
      if (job.attempts >= config.warmAttempts) {
        this.#settle(job, 'failed', `${setback}: ${job.attempts} attempts`);
      } else {
        const base = Math.max(1, failure.retryAfterS ?? 1);
        const delayS = Math.min(base * 2 ** (job.attempts - 1), config.warmBackoffMaxS);
        job.state = 'backoff';
        job.retryAt = this.#now() + delayS * 1000;
        job.timer = setTimeout(() => {
          job.timer = undefined;
          job.retryAt = undefined;
          job.state = 'waiting';
          this.#fifo.push(job);
          void this.#pump();
        }, delayS * 1000);
        job.timer.unref?.();
      }
    }
    void this.#pump();
  }

  /** After `done`: the Tee's commit, then the store, decide `stored`. */
  async #verify(job: Job): Promise<void> {
    const key = job.entry.request.key;
    let teeOutcome: string | undefined;
    try {
      teeOutcome = (await this.#opts.tees?.settled(key))?.outcome;
    } catch {
      teeOutcome = undefined;
    }
    let stored: StoredVariant | undefined;
    try {
      stored = await this.#opts.store.head(key);
    } catch {
      stored = undefined;
    }
    if (stored) this.#settle(job, 'stored');
    else this.#settle(job, 'failed', `not_stored${teeOutcome ? ` (${teeOutcome})` : ''}`);
  }

  #settle(job: Job, state: 'stored' | 'failed' | 'peer', failure?: string): void {
    if (job.timer) clearTimeout(job.timer);
    job.timer = undefined;
    job.retryAt = undefined;
    job.state = state;
    if (failure !== undefined) job.failure = failure;
    job.history.push(state === 'failed' ? `failed(${failure ?? ''})` : state);
    if (this.#byKey.get(job.entry.request.key) === job) this.#byKey.delete(job.entry.request.key);
    job.release?.();
    job.release = undefined;
    this.#recent.push(job);
    if (this.#recent.length > WARM_RECENT) this.#recent.shift();
  }

  /** What is warming now, and what settled last. */
  status(): WarmStatus {
    const config = this.#opts.config.get();
    const counts: Record<WarmJobState, number> = {
      waiting: 0,
      queued: 0,
      rendering: 0,
      backoff: 0,
      stored: 0,
      failed: 0,
      peer: 0,
    };
    const jobs = [...this.#byKey.values()];
    for (const job of jobs) counts[job.state]++;
    for (const job of this.#recent) counts[job.state]++;
    return {
      limits: {
        maxEntries: config.warmMaxEntries,
        maxPending: config.warmMaxPending,
        admitted: config.warmAdmitted,
        attempts: config.warmAttempts,
        backoffMaxS: config.warmBackoffMaxS,
      },
      admitted: this.#admitted,
      counts,
      jobs: jobs.map((j) => this.#view(j)),
      recent: this.#recent.map((j) => this.#view(j)),
    };
  }

  #view(job: Job): WarmJobView {
    return {
      job: job.id,
      key: job.entry.request.key,
      path: job.entry.path,
      class: job.entry.class,
      reason: job.entry.reason ?? 'warm',
      state: job.state,
      attempts: job.attempts,
      history: [...job.history],
      ...(job.failure !== undefined ? { failure: job.failure } : {}),
      ...(job.retryAt !== undefined
        ? { retryInS: Math.max(0, Math.ceil((job.retryAt - this.#now()) / 1000)) }
        : {}),
      ...(job.node !== undefined ? { node: job.node } : {}),
    };
  }

  /**
   * Stops taking entries: backoffs are cleared and jobs not admitted fail `shutting_down`.
   * Admitted ones end with their coordinators (the render service's shutdown cancels them).
   */
  close(): void {
    this.#closed = true;
    for (const job of [...this.#byKey.values()]) {
      if (job.state === 'waiting' || job.state === 'backoff') {
        this.#settle(job, 'failed', 'shutting_down');
      }
    }
    this.#fifo.length = 0;
  }
}

/** The setbacks retried: displaced, refused for a full queue, preempted for a listener. */
export function setbackOf(failure: RenderFailure): WarmSetback | undefined {
  if (failure.class === 'queue_full') {
    return failure.detail?.includes('displaced') ? 'displaced' : 'queue_full';
  }
  if (failure.class === 'cancelled' && failure.detail?.startsWith('preempted')) return 'preempted';
  return undefined;
}

/** `GET /debug/warm` on the metrics listener: `WarmService.status()` as JSON. */
export function warmStatusRoute(warm: WarmService): MetricsRoute {
  return {
    handle(req: IncomingMessage, res: ServerResponse, path: string): boolean {
      if (path !== '/debug/warm' || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
      const body = JSON.stringify(warm.status());
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
        'content-length': Buffer.byteLength(body),
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
  };
}
