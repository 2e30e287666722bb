/**
 * Prometheus metrics: counters fed by diagnostics-channel events, gauges sampled from their
 * owners when scraped.
 *
 * ## Invariants
 * - **Gauges are read from the owner at scrape time** (semaphore stats with a 1 s deadline, the
 *   registry count, a bounded store's index), never kept up to date from events, so a missed
 *   event cannot skew them. If a sample fails, only those gauges are left out; counters are
 *   still served. (Evictions and refusals are counters, fed by the store's channels.)
 * - **Label values come from closed sets** defined here; nothing derived from a request (source,
 *   options, key, path) is ever a label.
 * - **A handler never throws**: a malformed event is ignored rather than unsubscribing the
 *   handler (diagnostics_channel would otherwise propagate the throw to the publisher).
 * - Every metric is declared (`# HELP`, `# TYPE`) on a fresh scrape; unlabelled counters read 0.
 *
 * One `Metrics` per proxy instance, with its own prom-client Registry, so two proxies in one
 * process (tests, embedders) never share counters. The registry also carries the standard
 * `process_*` and `nodejs_*` metrics (`processMetrics.ts`), whose samplers `close()` stops.
 */
import diagnostics from 'node:diagnostics_channel';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { INTERNAL_ERROR_STAGES, RENDER_CHANNELS, VARIANT_STORE_CHANNELS } from './channels.js';
import { collectProcessMetrics, type ProcessMetrics } from './processMetrics.js';

/** Fixed buckets, in seconds: from sub-second previews to the 300 s default render timeout. */
export const RENDER_DURATION_BUCKETS_S = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** How long a scrape waits for a gauge's owner before leaving that gauge out. */
export const SCRAPE_SAMPLE_TIMEOUT_MS = 1_000;

const FORMATS = new Set(['mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav', 'peaks', 'hls']);
const OUTCOMES = new Set([
  'success',
  'cancelled',
  'not_found',
  'undecodable',
  'timeout',
  'render_failed',
  'queue_full',
]);
const LOOKUPS = new Set(['hit', 'miss', 'coalesced']);
const STAGES = new Set<string>(INTERNAL_ERROR_STAGES);
const DISPLACEABLE = new Set(['high', 'normal', 'low']);
const ENDPOINTS = new Set([
  'render',
  'info',
  'warm',
  'purge',
  'health',
  'ready',
  'metrics',
  'preflight',
  'unknown',
]);

const closed = (set: Set<string>, value: unknown) =>
  typeof value === 'string' && set.has(value) ? value : 'unknown';

export interface GaugeSources {
  /** Semaphore occupancy; may reject or time out. */
  readonly slots: () => Promise<{
    held: number;
    queued: number;
    capacity: number;
    queueSize: number;
    /** Depth of each admission class (absent: no per-class series this scrape). */
    queuedByClass?: Readonly<Record<string, number>>;
  }>;
  /** Coordinators registered (rendering, queued or lingering). */
  readonly rendersRunning: () => number;
  /** Bytes every render's backlog holds now (`AP_BACKLOG_BUDGET_BYTES` bounds it). */
  readonly backlogBytes?: () => number;
  /** Cluster mode's state and counts (absent: a single node; its metrics read 0). */
  readonly cluster?: () => Promise<ClusterSample>;
  /** Optional extra gauges contributed by other owners (e.g. the process supervisors). */
  readonly extra?: () => Promise<ExtraGauge[]>;
  /** What a bounded variant store holds (absent, or `undefined`: no bound; its gauges read 0). */
  readonly variantStore?: () => StoreUsage | undefined;
}

/** What a bounded variant store reports at scrape time (`VariantStore.usage`). */
export interface StoreUsage {
  /** Bytes of the variants it holds: data and metadata files, as its index counts them. */
  readonly bytes: number;
  /** Its bound (`AP_VARIANT_STORE_MAX_BYTES`). */
  readonly maxBytes: number;
  /** Variants it holds. */
  readonly variants: number;
}

/** One series of a gauge another owner contributes (`GaugeSources.extra`); same-name series
 * share one `# HELP`/`# TYPE` block. */
export interface ExtraGauge {
  readonly name: string;
  readonly help: string;
  readonly value: number;
  readonly labels?: Readonly<Record<string, string>>;
}

/** Outcomes of a forward to the claim owner, and of a hand-off to a peer (closed sets). */
export const CLUSTER_FORWARD_OUTCOMES = ['relayed', 'torn', 'unreachable', 'client_gone'] as const;
export const CLUSTER_HAND_OFF_OUTCOMES = [...CLUSTER_FORWARD_OUTCOMES, 'refused'] as const;
export type ClusterForwardOutcome = (typeof CLUSTER_FORWARD_OUTCOMES)[number];
export type ClusterHandOffOutcome = (typeof CLUSTER_HAND_OFF_OUTCOMES)[number];

/** What cluster mode reports at scrape time; counters are cumulative since boot. */
export interface ClusterSample {
  readonly redisUp: boolean;
  readonly claimsHeld: number;
  /** Live nodes the registry lists (this one included); undefined when it could not be read. */
  readonly nodes: number | undefined;
  readonly reserved: number;
  readonly committed: number;
  readonly forwards: Readonly<Record<ClusterForwardOutcome, number>>;
  readonly handOffs: Readonly<Record<ClusterHandOffOutcome, number>>;
}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('sample timed out')), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

export class Metrics {
  readonly registry = new Registry();
  readonly #unsubscribe: Array<() => void> = [];
  readonly #renders: Counter<'format' | 'outcome'>;
  readonly #duration: Histogram<'format' | 'outcome'>;
  readonly #lookups: Counter<'format' | 'outcome'>;
  readonly #rejections: Counter;
  readonly #preempted: Counter;
  readonly #displaced: Counter<'class'>;
  readonly #writeFailures: Counter;
  readonly #evictions: Counter;
  readonly #evictedBytes: Counter;
  readonly #oversize: Counter;
  readonly #http: Counter<'endpoint' | 'status'>;
  readonly #internalErrors: Counter<'stage'>;
  readonly #sources: GaugeSources;
  /** The standard process and runtime metrics; `close()` stops their samplers. */
  readonly process: ProcessMetrics;

  constructor(sources: GaugeSources) {
    this.#sources = sources;
    this.process = collectProcessMetrics(this.registry);
    const registers = [this.registry];
    this.#renders = new Counter({
      name: 'audio_proxy_renders_total',
      help: 'Renders answered to a client, by format and outcome (success: the response finished).',
      labelNames: ['format', 'outcome'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'audio_proxy_render_duration_seconds',
      help: 'Time from subscribe to the end of the response, by format and outcome.',
      labelNames: ['format', 'outcome'],
      buckets: RENDER_DURATION_BUCKETS_S,
      registers,
    });
    this.#lookups = new Counter({
      name: 'audio_proxy_cache_lookups_total',
      help: 'Variant deliveries by how they were served (hit, miss, coalesced).',
      labelNames: ['format', 'outcome'],
      registers,
    });
    this.#rejections = new Counter({
      name: 'audio_proxy_render_queue_rejections_total',
      help: 'Render requests refused because the wait queue was full (a lower bound on 429s).',
      registers,
    });
    this.#displaced = new Counter({
      name: 'audio_proxy_render_displaced_total',
      help: 'Queued renders that lost their place to a higher admission class, by the class displaced.',
      labelNames: ['class'],
      registers,
    });
    for (const cls of ['high', 'normal', 'low']) this.#displaced.inc({ class: cls }, 0);
    this.#preempted = new Counter({
      name: 'audio_proxy_render_orphans_preempted_total',
      help: 'Renders kept only for the variant store that were told to yield their slot to a queued request.',
      registers,
    });
    this.#writeFailures = new Counter({
      name: 'audio_proxy_variant_store_write_failures_total',
      help: 'Finished renders the variant store failed to keep.',
      registers,
    });
    this.#evictions = new Counter({
      name: 'audio_proxy_variant_store_evictions_total',
      help: 'Variants a bounded file store removed, least recently used first, to make room.',
      registers,
    });
    this.#evictedBytes = new Counter({
      name: 'audio_proxy_variant_store_evicted_bytes_total',
      help: 'Bytes those evictions freed (data and metadata files).',
      registers,
    });
    this.#oversize = new Counter({
      name: 'audio_proxy_variant_store_oversize_total',
      help: 'Variants not kept because each alone exceeds AP_VARIANT_STORE_MAX_BYTES.',
      registers,
    });
    this.#http = new Counter({
      name: 'audio_proxy_http_requests_total',
      help: 'HTTP requests on the public listener, by endpoint and status class.',
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.#internalErrors = new Counter({
      name: 'audio_proxy_internal_errors_total',
      help: 'Unexpected exceptions on the request path (bugs, logged at error), by stage.',
      labelNames: ['stage'],
      registers,
    });
    for (const stage of INTERNAL_ERROR_STAGES) this.#internalErrors.inc({ stage }, 0);
    const gauge = (
      name: string,
      help: string,
      pick: (s: Awaited<ReturnType<GaugeSources['slots']>>) => number,
    ) =>
      new Gauge({
        name,
        help,
        registers,
        collect: async function (this: Gauge) {
          this.reset();
          try {
            const stats = await withDeadline(sources.slots(), SCRAPE_SAMPLE_TIMEOUT_MS);
            this.set(pick(stats));
          } catch {
            // left out of this scrape; counters are still served
          }
        },
      });
    gauge('audio_proxy_render_slots_held', 'Render slots in use.', (s) => s.held);
    gauge(
      'audio_proxy_render_slots_capacity',
      'Render slots available (AP_MAX_CONCURRENCY).',
      (s) => s.capacity,
    );
    gauge('audio_proxy_render_queue_depth', 'Renders waiting for a slot.', (s) => s.queued);
    gauge(
      'audio_proxy_render_queue_capacity',
      'Wait queue bound (AP_QUEUE_SIZE).',
      (s) => s.queueSize,
    );
    new Gauge({
      name: 'audio_proxy_render_queue_depth_by_class',
      help: 'Renders waiting for a slot, by admission class (interactive: live requests; high, normal, low: warm work).',
      labelNames: ['class'],
      registers,
      collect: async function (this: Gauge<'class'>) {
        this.reset();
        try {
          const stats = await withDeadline(sources.slots(), SCRAPE_SAMPLE_TIMEOUT_MS);
          for (const [cls, depth] of Object.entries(stats.queuedByClass ?? {})) {
            this.set({ class: cls }, depth);
          }
        } catch {
          // left out of this scrape
        }
      },
    });
    new Gauge({
      name: 'audio_proxy_renders_running',
      help: 'Render coordinators registered: rendering, queued or lingering.',
      registers,
      collect(this: Gauge) {
        this.set(sources.rendersRunning());
      },
    });

    new Gauge({
      name: 'audio_proxy_render_backlog_bytes',
      help: 'Bytes all render backlogs hold in memory (bounded by AP_BACKLOG_BUDGET_BYTES).',
      registers,
      collect(this: Gauge) {
        this.set(sources.backlogBytes?.() ?? 0);
      },
    });

    const storeGauge = (name: string, help: string, pick: (u: StoreUsage) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect(this: Gauge) {
          const usage = sources.variantStore?.();
          this.set(usage ? pick(usage) : 0);
        },
      });
    storeGauge(
      'audio_proxy_variant_store_bytes',
      'Bytes a bounded file store holds (data and metadata files); 0 without a bound.',
      (u) => u.bytes,
    );
    storeGauge(
      'audio_proxy_variant_store_max_bytes',
      'The bound on them (AP_VARIANT_STORE_MAX_BYTES); 0 without a bound.',
      (u) => u.maxBytes,
    );
    storeGauge(
      'audio_proxy_variant_store_variants',
      'Variants a bounded file store holds; 0 without a bound.',
      (u) => u.variants,
    );

    this.#clusterMetrics(sources, registers);

    this.#on(RENDER_CHANNELS.stop, (m) => this.#finished(m, 'success'));
    this.#on(RENDER_CHANNELS.exception, (m) => this.#finished(m, m.class));
    this.#on(RENDER_CHANNELS.cacheLookup, (m) =>
      this.#lookups.inc({ format: closed(FORMATS, m.format), outcome: closed(LOOKUPS, m.status) }),
    );
    this.#on(RENDER_CHANNELS.semaphoreRejected, () => this.#rejections.inc());
    this.#on(RENDER_CHANNELS.semaphorePreempted, () => this.#preempted.inc());
    this.#on(RENDER_CHANNELS.semaphoreDisplaced, (m) =>
      this.#displaced.inc({
        class: closed(DISPLACEABLE, (m.metadata as { class?: unknown } | undefined)?.class),
      }),
    );
    this.#on(RENDER_CHANNELS.writeFailure, () => this.#writeFailures.inc());
    this.#on(VARIANT_STORE_CHANNELS.eviction, (m) => {
      this.#evictions.inc();
      if (typeof m.bytes === 'number' && Number.isFinite(m.bytes) && m.bytes >= 0) {
        this.#evictedBytes.inc(m.bytes);
      }
    });
    this.#on(VARIANT_STORE_CHANNELS.oversize, () => this.#oversize.inc());
    this.#on(RENDER_CHANNELS.internalError, (m) =>
      this.#internalErrors.inc({ stage: closed(STAGES, m.stage) }),
    );
    this.#on(RENDER_CHANNELS.httpRequest, (m) => {
      const status =
        typeof m.status === 'number' && m.status >= 100 && m.status < 600
          ? `${Math.floor(m.status / 100)}xx`
          : 'unknown';
      this.#http.inc({ endpoint: closed(ENDPOINTS, m.endpoint), status });
    });
  }

  /** Always declared; read 0 on a single node. Sampled per proxy, so nodes sharing a process
   *  (tests) never count each other's events. */
  #clusterMetrics(sources: GaugeSources, registers: Registry[]) {
    let pending: Promise<ClusterSample | undefined> | undefined;
    // One sample per scrape, shared by every cluster metric's collect.
    const sample = () => {
      pending ??= (
        sources.cluster
          ? withDeadline(sources.cluster(), SCRAPE_SAMPLE_TIMEOUT_MS).catch(() => undefined)
          : Promise.resolve(undefined)
      ).finally(() => setImmediate(() => (pending = undefined)));
      return pending;
    };
    const gauge = (name: string, help: string, pick: (s: ClusterSample) => number | undefined) =>
      new Gauge({
        name,
        help,
        registers,
        collect: async function (this: Gauge) {
          this.reset();
          const s = await sample();
          const v = s ? pick(s) : sources.cluster ? undefined : 0;
          if (v !== undefined) this.set(v);
        },
      });
    gauge('audio_proxy_cluster_enabled', '1 when cluster mode is on (AP_CLUSTER_REDIS_URL).', () =>
      sources.cluster ? 1 : 0,
    );
    gauge('audio_proxy_cluster_redis_up', '1 while the cluster Redis answers.', (s) =>
      s.redisUp ? 1 : 0,
    );
    gauge(
      'audio_proxy_cluster_render_claims_held',
      'Cache keys this node holds the cluster render claim for.',
      (s) => s.claimsHeld,
    );
    gauge('audio_proxy_cluster_nodes', 'Live nodes in the cluster registry.', (s) => s.nodes);
    new Gauge({
      name: 'audio_proxy_cluster_reservations',
      help: 'Registry slot reservations this node holds, by state.',
      labelNames: ['state'],
      registers,
      collect: async function (this: Gauge<'state'>) {
        this.reset();
        const s = await sample();
        this.set({ state: 'reserved' }, s?.reserved ?? 0);
        this.set({ state: 'committed' }, s?.committed ?? 0);
      },
    });
    const counter = <O extends string>(
      name: string,
      help: string,
      outcomes: readonly O[],
      pick: (s: ClusterSample) => Readonly<Record<O, number>>,
    ) =>
      new Counter({
        name,
        help,
        labelNames: ['outcome'],
        registers,
        collect: async function (this: Counter<'outcome'>) {
          const s = await sample();
          if (!s) return; // keeps the last values: a counter never goes back
          this.reset();
          for (const o of outcomes) this.inc({ outcome: o }, pick(s)[o]);
        },
      });
    counter(
      'audio_proxy_cluster_forwards_total',
      'Requests relayed to the node owning the render claim, by outcome.',
      CLUSTER_FORWARD_OUTCOMES,
      (s) => s.forwards,
    );
    counter(
      'audio_proxy_cluster_hand_offs_total',
      'Requests a full queue handed to a peer (refused: no peer had room), by outcome.',
      CLUSTER_HAND_OFF_OUTCOMES,
      (s) => s.handOffs,
    );
  }

  #finished(m: Record<string, unknown>, outcome: unknown) {
    const o = m.outcome === 'cancelled' ? 'cancelled' : outcome;
    const labels = { format: closed(FORMATS, m.format), outcome: closed(OUTCOMES, o) };
    this.#renders.inc(labels);
    if (typeof m.duration === 'number' && Number.isFinite(m.duration) && m.duration >= 0) {
      this.#duration.observe(labels, m.duration);
    }
  }

  #on(name: string, handler: (message: Record<string, unknown>) => void) {
    const listener = (message: unknown) => {
      try {
        if (message && typeof message === 'object') handler(message as Record<string, unknown>);
      } catch {
        // never let a malformed event reach the publisher
      }
    };
    diagnostics.subscribe(name, listener);
    this.#unsubscribe.push(() => diagnostics.unsubscribe(name, listener));
  }

  /** Prometheus text exposition. */
  async expose(): Promise<{ contentType: string; body: string }> {
    const extra = this.#sources.extra ? await this.#sources.extra().catch(() => []) : [];
    let body = await this.registry.metrics();
    if (extra.length > 0) body += renderExtra(extra);
    return { contentType: 'text/plain; version=0.0.4; charset=utf-8', body };
  }

  /** Detaches every channel handler and stops the process metrics' samplers; safe to call twice. */
  close(): void {
    for (const off of this.#unsubscribe.splice(0)) off();
    this.process.stop();
  }
}

function renderExtra(gauges: readonly ExtraGauge[]): string {
  const byName = new Map<string, typeof gauges>();
  for (const g of gauges) byName.set(g.name, [...(byName.get(g.name) ?? []), g]);
  let out = '';
  for (const [name, series] of byName) {
    out += `# HELP ${name} ${series[0]!.help}\n# TYPE ${name} gauge\n`;
    for (const s of series) {
      const labels = s.labels
        ? `{${Object.entries(s.labels)
            .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
            .join(',')}}`
        : '';
      out += `${name}${labels} ${s.value}\n`;
    }
  }
  return out;
}
