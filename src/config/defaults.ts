/**
 * The tunables: every default a variable falls back to, every bound a value is checked against,
 * and the closed vocabularies (boolean words, serve modes, log levels, S3 addressing styles).
 *
 * ## Invariants
 * - **One number, one place.** The rows' readers, their documentation and the error messages
 *   all read these constants, so the docs cannot state a default the loader does not apply.
 * - **Units are in the names** (`_S`, `_MS`, `_BYTES`, `_CHARS`), and each constant says why it
 *   has its value.
 *
 * Not here: the render timeout's default, `DEFAULT_RENDER_TIMEOUT_S`, which the semaphore chart
 * shares and therefore lives in `core/worker.ts`.
 */

/** Listener port when neither `AP_PORT` nor `PORT` is set; the original's, so swaps are drop-in. */
export const DEFAULT_PORT = 4000;
/** Waiters for a render slot; deep enough for a burst, shallow enough that 429 comes quickly. */
export const DEFAULT_QUEUE_SIZE = 32;
/** Largest source accepted, in bytes; about a 3-hour 24-bit/96 kHz stereo master. */
export const DEFAULT_MAX_SRC_BYTES = 2_000_000_000;
/** ffprobe limit, in seconds; a probe reads headers only, so a slow one is a broken source. */
export const DEFAULT_PROBE_TIMEOUT_S = 10;
/** Six hours: past any album or long-form recording a listener streams; beyond it a source is a 413. */
export const DEFAULT_MAX_DURATION_S = 21_600;
/** Niceness of every ffmpeg and ffprobe child: encodes yield the CPU to the event loop. */
export const DEFAULT_FFMPEG_NICE = 10;
/** The weakest niceness Linux knows. */
export const MAX_NICE = 19;
/** Presigned redirect lifetime, in seconds; the URL serves one playback and is `no-store`. */
export const DEFAULT_PRESIGN_TTL_S = 300;
/**
 * The public listener's bind when `AP_BIND` is unset: every interface (Node's `::`, dual-stack),
 * as the original listens, because a proxy behind a load balancer or in a container must be
 * reachable from outside its own host. Loopback-only is one variable away (`AP_BIND=127.0.0.1`).
 */
export const DEFAULT_BIND = undefined;
/** The unsigned scrape endpoint's bind; loopback, because the bind is its only access control. */
export const DEFAULT_METRICS_BIND = '127.0.0.1';
/** The port Prometheus' allocation list gives a generic exporter. */
export const DEFAULT_METRICS_PORT = 9568;
/** Renders a worker pool serves before it is replaced; ~2 min of work at 2 slots, <1% cost (measured). */
export const DEFAULT_MAX_RENDERS_PER_WORKER_POOL = 500;
/** Probes a probe pool serves before it is replaced; same reasoning, probes are shorter. */
export const DEFAULT_MAX_PROBES_PER_WORKER_POOL = 500;
/** How long a ready ticket's reservation waits for its claim, in seconds. */
export const DEFAULT_WAITING_ROOM_RESERVATION_S = 30;
/** A queued ticket not polled for this long is dropped, in seconds (a few missed polls). */
export const DEFAULT_WAITING_ROOM_HEARTBEAT_S = 30;
/** Tickets the room holds before it answers 429. */
export const DEFAULT_WAITING_ROOM_MAX_LENGTH = 100;
/** Share of the render slots the room may reserve by default: half, so ticketless traffic keeps the rest. */
export const DEFAULT_WAITING_ROOM_SLOT_SHARE = 0.5;
/** Bytes all renders' backlogs may hold in memory together: a few whole lossless variants
 *  coalescing at once; past it a render stops keeping its backlog and late requests re-render. */
export const DEFAULT_BACKLOG_BUDGET_BYTES = 256 * 1024 * 1024;
/** Bytes of hot variant bodies kept in memory for HIT serving (0 = off). */
export const DEFAULT_HIT_CACHE_BYTES = 64 * 1024 * 1024;
/** Smallest non-zero `AP_VARIANT_STORE_MAX_BYTES`: below it a bound is a unit mistake (10 meant
 *  as 10 GB), and it would hold less than one minute of most variants. */
export const MIN_VARIANT_STORE_MAX_BYTES = 1024 * 1024;
/** Cluster render-claim and membership lease, in ms: renewed every third of it, so a busy node
 *  must miss two renewals running before it loses a claim, and a dead node's lapse within 10 s. */
export const DEFAULT_CLUSTER_LEASE_MS = 10_000;
/** Shortest cluster lease, in ms: a renewal every third of it must fit a loaded event loop. */
export const MIN_CLUSTER_LEASE_MS = 300;
/** Longest cluster lease, in ms: Node timers overflow past 2^31-1 ms. */
export const MAX_CLUSTER_LEASE_MS = 2 ** 31 - 1;
/** Longest cluster node id or label, in characters (it is stored in every claim and slot key). */
export const MAX_CLUSTER_NAME_CHARS = 128;
/** Probe slots per render slot; a probe is ~45 ms of CPU, so the probe pool may be wider. */
export const PROBE_CONCURRENCY_FACTOR = 4;
/** Shortest HMAC-SHA256 key, in bytes; RFC 2104 asks for at least the hash length. */
export const MIN_KEY_BYTES = 32;
/** Longest preset name, in characters (`AP_PRESETS`; a URL names it in `pr:NAME`). */
export const MAX_PRESET_NAME_CHARS = 64;
/** Highest TCP port; Node's `listen` throws a bare RangeError past it, naming no variable. */
export const MAX_PORT = 65_535;
/** Longest timeout, in seconds: Node timers overflow past 2^31-1 ms, and deadlines add up to 3 s. */
export const MAX_TIMEOUT_S = Math.floor((2 ** 31 - 1) / 1000) - 3;
/** Longest presigned URL lifetime, in seconds; SigV4 refuses anything past 7 days. */
export const MAX_PRESIGN_TTL_S = 604_800;
/** S3 bucket name length bounds, in characters (S3's own rule). */
export const BUCKET_NAME_MIN_CHARS = 3;
export const BUCKET_NAME_MAX_CHARS = 63;
/** Exclusive upper bound of a random boot-probe file id or node id (randomInt's largest range). */
export const RANDOM_ID_RANGE = 2 ** 48 - 1;

/** The words a boolean accepts, case-insensitively. */
export const TRUTHY_WORDS = ['1', 'true', 'yes', 'on'] as const;
export const FALSY_WORDS = ['0', 'false', 'no', 'off'] as const;

export const SERVE_MODES = ['redirect', 'proxy'] as const;
/** `AP_LOG_LEVEL`'s vocabulary, the original's; the logger maps `warning` to pino's `warn`. */
export const LOG_LEVELS = ['debug', 'info', 'warning', 'error'] as const;
/** `AP_LOG_FORMAT`: `auto` is pretty on a terminal (the CLI), JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export const S3_ADDRESSING_STYLES = ['virtual', 'path'] as const;

export type ServeMode = (typeof SERVE_MODES)[number];
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogFormat = (typeof LOG_FORMATS)[number];
export type S3Addressing = (typeof S3_ADDRESSING_STYLES)[number];

/** Entries one warm request may carry (`AP_WARM_MAX_ENTRIES`). */
export const DEFAULT_WARM_MAX_ENTRIES = 100;
/** Warm entries a node holds at once, in every state but settled (`AP_WARM_MAX_PENDING`). */
export const DEFAULT_WARM_MAX_PENDING = 1_000;
/** Attempts a warm entry gets (displaced, refused, preempted count) (`AP_WARM_ATTEMPTS`). */
export const DEFAULT_WARM_ATTEMPTS = 6;
/** Ceiling on one warm retry's backoff, in seconds (`AP_WARM_BACKOFF_MAX_SECONDS`). */
export const DEFAULT_WARM_BACKOFF_MAX_S = 30;
/** HLS segments a segment's MISS prefetches after it (`AP_PREFETCH_HLS_SEGMENTS`); 0 = off. */
export const DEFAULT_PREFETCH_HLS_SEGMENTS = 1;
