/**
 * Configuration: the environment, read once at boot into one frozen, typed `Config`, and the
 * single injectable source (`ConfigProvider`) that actors read it from on every operation.
 *
 * ## Invariants
 * - **The published list is the read list.** `CONFIG_VARIABLES` names every variable
 *   `loadConfig` reads and nothing else; the type of the internal `read()` only admits listed
 *   names, and a test records every environment read through a Proxy.
 * - **Valid or no boot.** Every value is checked; `ConfigError` (`ERR_CONFIG`) carries every
 *   problem found, each naming its variable and the rule, so one restart fixes them all.
 * - **Unset means default.** Values are trimmed; empty or all-whitespace is the same as absent.
 * - **No secret is echoed.** `AP_KEY`, `AP_SALT`, AWS secrets and URL userinfo never appear in a
 *   message, so a boot failure cannot put a credential in a log.
 * - **A loaded config never changes.** Everything is frozen except the `key` and `salt` Buffers,
 *   which JavaScript cannot freeze; they are private copies nobody else holds.
 * - **Filesystem claims are proved, not assumed.** Directories are stat'ed, a `file://` store is
 *   written to, a CA bundle is read, an executable is `access(X_OK)`-checked.
 *
 * ## Races
 * - **Two nodes booting on one `file://` store.** Probe names carry the pid and a 48-bit random
 *   number (every container's pid may be 1) and are created exclusively (`wx`), so neither
 *   collides with nor deletes the other's probe.
 * - **A limit changed mid-operation (tests).** `provider.get()` returns a whole frozen snapshot;
 *   an operation that reads once sees one consistent config, never half of a `set()`.
 *
 * ## Events
 * | Event | Fields | When |
 * |---|---|---|
 * | (none) | | Config publishes nothing; failure is one thrown `ConfigError` before any actor starts |
 *
 * Not here: the live PUT+DELETE probe of an `s3://` store (the store module owns the S3
 * client); the boot log lines (`configWarnings()` supplies their text).
 */
import { randomInt } from 'node:crypto';
import * as nodeFs from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism, homedir, hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// ---------------------------------------------------------------------------------------------
// Tunables and defaults

/** Listener port when neither `AP_PORT` nor `PORT` is set; the original's, so swaps are drop-in. */
export const DEFAULT_PORT = 4000;
/** Waiters for a render slot; deep enough for a burst, shallow enough that 429 comes quickly. */
export const DEFAULT_QUEUE_SIZE = 32;
/** Largest source accepted, in bytes; about a 3-hour 24-bit/96 kHz stereo master. */
export const DEFAULT_MAX_SRC_BYTES = 2_000_000_000;
/** Render silence limit, in seconds; long masters take minutes to encode on one core. */
export const DEFAULT_RENDER_TIMEOUT_S = 300;
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
/** Highest TCP port; Node's `listen` throws a bare RangeError past it, naming no variable. */
export const MAX_PORT = 65_535;
/** Longest timeout, in seconds: Node timers overflow past 2^31-1 ms, and deadlines add up to 3 s. */
export const MAX_TIMEOUT_S = Math.floor((2 ** 31 - 1) / 1000) - 3;
/** Longest presigned URL lifetime, in seconds; SigV4 refuses anything past 7 days. */
export const MAX_PRESIGN_TTL_S = 604_800;
/** S3 bucket name length bounds, in characters (S3's own rule). */
export const BUCKET_NAME_MIN_CHARS = 3;
export const BUCKET_NAME_MAX_CHARS = 63;
/** Exclusive upper bound of a boot-probe file's random id (randomInt's largest range). */
const PROBE_ID_RANGE = 2 ** 48 - 1;
/** Longest echo of a bad value in a message, in characters; the rest is elided. */
const MAX_ECHO_CHARS = 120;

/** The words a boolean accepts, case-insensitively. */
export const TRUTHY_WORDS = ['1', 'true', 'yes', 'on'] as const;
export const FALSY_WORDS = ['0', 'false', 'no', 'off'] as const;

export const SERVE_MODES = ['redirect', 'proxy'] as const;
export const LOG_LEVELS = ['debug', 'info', 'warning', 'error'] as const;
export const S3_ADDRESSING_STYLES = ['virtual', 'path'] as const;

export type ServeMode = (typeof SERVE_MODES)[number];
export type LogLevel = (typeof LOG_LEVELS)[number];
export type S3Addressing = (typeof S3_ADDRESSING_STYLES)[number];

// ---------------------------------------------------------------------------------------------
// The Config type

/** An S3-compatible endpoint: an origin and nothing more. */
export interface S3Endpoint {
  /** The origin as WHATWG URL spells it, e.g. `http://minio:9000` (no trailing slash). */
  readonly url: string;
  readonly protocol: 'http' | 'https';
  /** Lowercased; IPv6 literals keep their brackets. */
  readonly hostname: string;
  /** The explicit port, or the scheme's default (80/443). */
  readonly port: number;
}

/** A key pair plus the session token minted for that pair, if any. */
export interface S3Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string | undefined;
}

/** How one S3 client (sources, or the variant store) connects and signs. */
export interface S3Profile {
  /** @default undefined (AWS proper) */
  readonly endpoint: S3Endpoint | undefined;
  /** @default 'virtual' without an endpoint, 'path' with one */
  readonly addressing: S3Addressing;
  /** Absolute path of a PEM bundle replacing the system trust store. @default undefined */
  readonly caBundle: string | undefined;
  /** Signing region; required whenever `credentials` is set. @default undefined */
  readonly region: string | undefined;
  /** @default undefined (anonymous; a variant store refuses to boot without credentials) */
  readonly credentials: S3Credentials | undefined;
}

export type VariantStoreConfig =
  | { readonly kind: 'file'; readonly root: string }
  | { readonly kind: 's3'; readonly bucket: string };

/** The validated configuration. Frozen; read through a `ConfigProvider`. */
export interface Config {
  /** Public listener port (`AP_PORT`, else `PORT`). @default 4000 */
  readonly port: number;
  /** Public listener address, an IP literal. @default undefined (every interface) */
  readonly bind: string | undefined;
  /** HMAC key, decoded. Unset: every signed request is a 401. @default undefined */
  readonly key: Buffer | undefined;
  /** Bytes prepended to the signed path, decoded. @default undefined */
  readonly salt: Buffer | undefined;
  /** Accept the literal signature `insecure`. @default false */
  readonly allowInsecure: boolean;
  /** HTTPS hosts and S3 buckets sources may name. @default [] */
  readonly sourceAllowlist: readonly string[];
  /** Absolute directory `local://` sources are confined to (expanded, symlinks not resolved). @default undefined */
  readonly localRoot: string | undefined;
  /** Where rendered variants are cached. @default undefined (no cache) */
  readonly variantStore: VariantStoreConfig | undefined;
  /** Render slots. @default the CPU count */
  readonly maxConcurrency: number;
  /** Probe slots. @default 4 × maxConcurrency */
  readonly maxProbeConcurrency: number;
  /** Waiters for a render slot; 0 = straight to 429. @default 32 */
  readonly queueSize: number;
  /** Queue depth that trips /ready; 0 disables. @default 0 if queueSize is 0, else max(1, floor(queueSize / 2)) */
  readonly readyQueueThreshold: number;
  /** @default 2_000_000_000 */
  readonly maxSrcBytes: number;
  /** Per-render in-memory backlog cap. @default maxSrcBytes */
  readonly maxVariantBytes: number;
  /** @default 300 */
  readonly renderTimeoutS: number;
  /** @default 10 */
  readonly probeTimeoutS: number;
  /** Longest source (probe) and output (ffmpeg `-t`), in seconds. @default 21600 */
  readonly maxDurationS: number;
  /** `https://` sources may connect to loopback/private/link-local addresses. @default false */
  readonly sourceAllowPrivate: boolean;
  /** @default 'redirect' */
  readonly serveMode: ServeMode;
  /** @default 300 */
  readonly presignTtlS: number;
  /** @default 'info' */
  readonly logLevel: LogLevel;
  /** One info line per public request. @default true */
  readonly accessLog: boolean;
  /** An IPv4 or IPv6 literal. @default '127.0.0.1' */
  readonly metricsBind: string;
  /** @default 9568 */
  readonly metricsPort: number;
  /** `*` or a canonical origin. @default undefined (no CORS) */
  readonly allowOrigin: string | undefined;
  /** The source S3 profile (AP_S3_* and AWS_*). */
  readonly s3: S3Profile;
  /** The variant store's S3 profile; equal to `s3` when no AP_VARIANT_S3_* is set. */
  readonly variantS3: S3Profile;
  /** Renders a render worker pool serves before it is swapped for a fresh one; 0 = never. @default 500 */
  readonly maxRendersPerWorkerPool: number;
  /** Probes a probe worker pool serves before it is swapped; 0 = never. @default 500 */
  readonly maxProbesPerWorkerPool: number;
  /** The ticketed waiting room and its endpoints. @default false */
  readonly waitingRoom: boolean;
  /** @default 30 */
  readonly waitingRoomReservationS: number;
  /** @default 30 */
  readonly waitingRoomHeartbeatS: number;
  /** @default 100 */
  readonly waitingRoomMaxLength: number;
  /** Render slots the room may reserve or run tickets in; ≤ maxConcurrency − 1. @default ⌊maxConcurrency / 2⌋ */
  readonly waitingRoomSlots: number;
  /** The waiting room's session cookie carries `Secure`. @default false */
  readonly cookieSecure: boolean;
  /** Bytes every render's backlog may hold in memory together. @default 256 MiB */
  readonly backlogBudgetBytes: number;
  /** In-memory bound for hot variant bodies served as HITs; 0 = off. @default 64 MiB */
  readonly hitCacheBytes: number;
  /** Niceness (0–19) every ffmpeg and ffprobe child runs at. @default 10 */
  readonly ffmpegNice: number;
  /** Absolute path of an ffmpeg executable. @default undefined (PATH, then the npm binary) */
  readonly ffmpegPath: string | undefined;
  /** Absolute path of an ffprobe executable. @default undefined (PATH, then the npm binary) */
  readonly ffprobePath: string | undefined;
  /** Redis of the cluster registry; unset, the node runs alone. @default undefined */
  readonly clusterRedisUrl: string | undefined;
  /** This node's id among its peers. @default `<hostname>:<port>` */
  readonly clusterNodeId: string;
  /** The origin peers reach this node at; required with `clusterRedisUrl`. @default undefined */
  readonly clusterAdvertiseUrl: string | undefined;
  /** Affinity label announced with this node. @default undefined */
  readonly clusterNodeLabel: string | undefined;
  /** Render-claim and membership lease, in ms. @default 10000 */
  readonly clusterLeaseMs: number;
}

// ---------------------------------------------------------------------------------------------
// Rule texts: shared by the error messages and the generated documentation, so they cannot drift.

const RULE = {
  positive: 'a positive integer (digits only)',
  nonNegative: 'an integer ≥ 0 (digits only)',
  port: `an integer from 1 to ${MAX_PORT} (digits only)`,
  timeout: `an integer from 1 to ${MAX_TIMEOUT_S} (seconds, digits only)`,
  presignTtl: `an integer from 1 to ${MAX_PRESIGN_TTL_S} (seconds, digits only)`,
  boolean: `one of ${[...TRUTHY_WORDS, ...FALSY_WORDS].join(', ')} (any case)`,
  key: `hex (either case, even length) decoding to at least ${MIN_KEY_BYTES} bytes (${MIN_KEY_BYTES * 2} hex characters)`,
  hex: 'hex (either case, even length)',
  list: 'comma-separated; entries trimmed; empty entries dropped',
  directory: 'an existing directory, not `/`; `~` and relative paths are expanded',
  store: '`file:///absolute/dir` or `s3://bucket`',
  readableFile: 'a readable file',
  executable: 'an existing executable file (a path: PATH is not searched)',
  ip: 'an IPv4 or IPv6 address literal (hostnames refused)',
  origin:
    '`*` or an origin exactly as a browser sends it: `http(s)://host[:port]`, lowercase scheme and host, no default port, no trailing slash or dot, no path, query, fragment or userinfo',
  endpoint:
    '`http(s)://host[:port]`, optionally with a bare trailing `/`; no path, query, fragment or userinfo',
  redisUrl: '`redis://[user:password@]host[:port][/db]` or `rediss://…` (TLS)',
  clusterName: `1 to ${MAX_CLUSTER_NAME_CHARS} characters from \`A-Z a-z 0-9 . _ : @ -\``,
  leaseMs: `an integer from ${MIN_CLUSTER_LEASE_MS} to ${MAX_CLUSTER_LEASE_MS} (milliseconds, digits only)`,
  nice: `an integer from 0 to ${MAX_NICE} (digits only)`,
  enum: (allowed: readonly string[]) => `one of ${allowed.map((a) => `\`${a}\``).join(', ')}`,
} as const;

// ---------------------------------------------------------------------------------------------
// The published variable list

export interface ConfigVariable {
  readonly name: string;
  /** The documentation section the variable is listed under. */
  readonly section: string;
  /** What applies when it is unset (prose; several defaults are derived). */
  readonly default: string;
  /** What a valid value is. */
  readonly rule: string;
  /** One line on what it does. */
  readonly doc: string;
}

const S_LISTEN = 'Listeners and signing';
const S_SOURCES = 'Sources';
const S_STORE = 'Variant store and serving';
const S_LIMITS = 'Limits and timeouts';
const S_OBS = 'Observability and CORS';
const S_S3 = 'S3 connection';
const S_BIN = 'Executables';
const S_AWS = 'AWS credentials';
const S_CLUSTER = 'Cluster';

const VARIANT_GROUP = [
  'AP_VARIANT_S3_ACCESS_KEY_ID',
  'AP_VARIANT_S3_SECRET_ACCESS_KEY',
  'AP_VARIANT_S3_REGION',
] as const;

/** Every variable `loadConfig` reads, in documentation order. The docs table is generated from it. */
export const CONFIG_VARIABLES = [
  {
    name: 'AP_PORT',
    section: S_LISTEN,
    default: `\`PORT\`, then \`${DEFAULT_PORT}\``,
    rule: RULE.port,
    doc: 'Port of the public listener.',
  },
  {
    name: 'PORT',
    section: S_LISTEN,
    default: 'unset',
    rule: `${RULE.port}; checked only when \`AP_PORT\` is unset`,
    doc: 'Fallback listener port, for platforms that assign one.',
  },
  {
    name: 'AP_BIND',
    section: S_LISTEN,
    default: 'unset: every interface (`::`, dual-stack), as the original',
    rule: RULE.ip,
    doc: 'Address of the public listener, used by `audio-proxy serve` and `listen()`; `127.0.0.1` keeps it to this host (behind a local reverse proxy).',
  },
  {
    name: 'AP_KEY',
    section: S_LISTEN,
    default: 'unset: every signed request is a 401',
    rule: RULE.key,
    doc: 'HMAC-SHA256 key that signs URLs. Never echoed in an error.',
  },
  {
    name: 'AP_SALT',
    section: S_LISTEN,
    default: 'unset: every signed request is a 401',
    rule: RULE.hex,
    doc: 'Bytes prepended to the path before signing. Never echoed in an error.',
  },
  {
    name: 'AP_ALLOW_INSECURE',
    section: S_LISTEN,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'Accept the literal signature `insecure` (development only; a warning is logged at boot).',
  },
  {
    name: 'AP_SOURCE_ALLOWLIST',
    section: S_SOURCES,
    default: 'empty: every HTTPS host refused, every S3 bucket admitted',
    rule: RULE.list,
    doc: 'HTTPS hosts and S3 buckets a source may name. A host entry admits port 443 only; `host:port` (`[v6]:port`, `*.suffix:port`) admits that port; `*` admits every host and port.',
  },
  {
    name: 'AP_LOCAL_ROOT',
    section: S_SOURCES,
    default: 'unset: every `local://` source is a 404',
    rule: RULE.directory,
    doc: 'Directory `local://` sources are confined to.',
  },
  {
    name: 'AP_SOURCE_ALLOW_PRIVATE',
    section: S_SOURCES,
    default: '`false`: an `https://` host resolving to such an address is a 404',
    rule: RULE.boolean,
    doc: "Let `https://` sources connect to loopback, private, link-local, CGNAT, multicast or unspecified addresses (tests, closed networks). S3 endpoints are the operator's own and are not checked.",
  },
  {
    name: 'AP_VARIANT_STORE',
    section: S_STORE,
    default: 'unset: no variant cache',
    rule: `${RULE.store}. \`file://\`: an existing directory, not \`/\`, no query or fragment (\`file://host/…\` is refused with a three-slashes hint; \`file://localhost/…\` is the local host), proved writable by creating and removing \`<root>/tmp/.boot-probe-…\`. \`s3://\`: a bucket of ${BUCKET_NAME_MIN_CHARS}–${BUCKET_NAME_MAX_CHARS} characters, no path or prefix, query, fragment, userinfo or port; S3 credentials required`,
    doc: 'Where rendered variants are cached. The live write probe of an `s3://` store runs when the store starts.',
  },
  {
    name: 'AP_SERVE_MODE',
    section: S_STORE,
    default: '`redirect`',
    rule: `${RULE.enum(SERVE_MODES)}; \`redirect\` with a \`file://\` store is refused`,
    doc: 'How a cache hit is served: a 302 to a presigned URL, or streamed through the proxy. Irrelevant without a store.',
  },
  {
    name: 'AP_PRESIGN_TTL',
    section: S_STORE,
    default: `\`${DEFAULT_PRESIGN_TTL_S}\``,
    rule: RULE.presignTtl,
    doc: 'Lifetime of a presigned redirect URL.',
  },
  {
    name: 'AP_MAX_CONCURRENCY',
    section: S_LIMITS,
    default: 'the CPU count (`os.availableParallelism()`)',
    rule: RULE.positive,
    doc: 'Render slots: encoders running at once. A coalesced request takes none.',
  },
  {
    name: 'AP_MAX_PROBE_CONCURRENCY',
    section: S_LIMITS,
    default: `${PROBE_CONCURRENCY_FACTOR} × the effective \`AP_MAX_CONCURRENCY\``,
    rule: RULE.positive,
    doc: 'Probe slots: ffprobe runs at once. No queue; overflow is a 429.',
  },
  {
    name: 'AP_QUEUE_SIZE',
    section: S_LIMITS,
    default: `\`${DEFAULT_QUEUE_SIZE}\``,
    rule: RULE.nonNegative,
    doc: 'Requests that may wait for a render slot; beyond it, 429 at once. `0` means no waiting.',
  },
  {
    name: 'AP_READY_QUEUE_THRESHOLD',
    section: S_LIMITS,
    default: '`0` if the queue size is 0, else max(1, floor(queue size / 2))',
    rule: `${RULE.nonNegative}, at most the effective \`AP_QUEUE_SIZE\``,
    doc: 'Queue depth at which `/ready` turns 503 (it recovers at half); `0` disables the check.',
  },
  {
    name: 'AP_MAX_SRC_BYTES',
    section: S_LIMITS,
    default: `\`${DEFAULT_MAX_SRC_BYTES}\``,
    rule: RULE.positive,
    doc: 'Largest source accepted (over it: 413): checked by stat and on the opened file before rendering (not for `/info`), and on every byte the proxy reads of a remote source (`/info` too: it is what the proxy stores).',
  },
  {
    name: 'AP_MAX_VARIANT_BYTES',
    section: S_LIMITS,
    default: 'the effective `AP_MAX_SRC_BYTES`',
    rule: `${RULE.positive}; may exceed \`AP_MAX_SRC_BYTES\``,
    doc: 'Most bytes one render may produce (over it the render fails); what renders keep in memory is bounded by `AP_BACKLOG_BUDGET_BYTES`.',
  },
  {
    name: 'AP_BACKLOG_BUDGET_BYTES',
    section: S_LIMITS,
    default: `\`${DEFAULT_BACKLOG_BUDGET_BYTES}\` (256 MiB)`,
    rule: `${RULE.nonNegative}; 0 keeps no backlog`,
    doc: 'Bytes all running renders keep in memory together to replay to late joiners. A render whose next chunk would cross it stops keeping its backlog: its listeners and the store still get every byte, and a later request for the same variant renders afresh.',
  },
  {
    name: 'AP_RENDER_TIMEOUT',
    section: S_LIMITS,
    default: `\`${DEFAULT_RENDER_TIMEOUT_S}\``,
    rule: RULE.timeout,
    doc: 'Render silence limit (504); a queued request waiting longer than this plus 1 s gets a 429.',
  },
  {
    name: 'AP_PROBE_TIMEOUT',
    section: S_LIMITS,
    default: `\`${DEFAULT_PROBE_TIMEOUT_S}\``,
    rule: RULE.timeout,
    doc: 'ffprobe time limit, for `/info` and the probe before a render.',
  },
  {
    name: 'AP_MAX_DURATION_S',
    section: S_LIMITS,
    default: `\`${DEFAULT_MAX_DURATION_S}\``,
    rule: RULE.positive,
    doc: 'Longest source a render accepts, by its probe (over it: 413 `source_too_long`), and longest output ffmpeg writes (`-t`, a backstop for sources that lie).',
  },
  {
    name: 'AP_LOG_LEVEL',
    section: S_OBS,
    default: '`info`',
    rule: RULE.enum(LOG_LEVELS),
    doc: 'Least severe level that is logged.',
  },
  {
    name: 'AP_ACCESS_LOG',
    section: S_OBS,
    default: '`true`',
    rule: RULE.boolean,
    doc: 'One `info` line per public-listener request, whatever its answer (401, 404, `/info` and HITs included): method, path without its query, status, bytes sent, milliseconds and cache status (`HIT`, `MISS`, `COALESCED`).',
  },
  {
    name: 'AP_METRICS_BIND',
    section: S_OBS,
    default: `\`${DEFAULT_METRICS_BIND}\``,
    rule: RULE.ip,
    doc: 'Address of the `/metrics` listener; the endpoint is unsigned, so this is its access control.',
  },
  {
    name: 'AP_METRICS_PORT',
    section: S_OBS,
    default: `\`${DEFAULT_METRICS_PORT}\``,
    rule: `${RULE.port}; must differ from the effective listener port (\`AP_PORT\`, else \`PORT\`)`,
    doc: 'Port of the `/metrics` listener.',
  },
  {
    name: 'AP_ALLOW_ORIGIN',
    section: S_OBS,
    default: 'unset: no CORS headers, OPTIONS is a 404',
    rule: `${RULE.origin}; the error suggests the canonical spelling`,
    doc: 'Value of `Access-Control-Allow-Origin` on every main-listener response; enables OPTIONS 204.',
  },
  {
    name: 'AP_S3_ENDPOINT',
    section: S_S3,
    default: 'unset: AWS',
    rule: RULE.endpoint,
    doc: 'S3-compatible endpoint for `s3://` sources (and the store, unless overridden).',
  },
  {
    name: 'AP_S3_ADDRESSING',
    section: S_S3,
    default: '`virtual`, or `path` when `AP_S3_ENDPOINT` is set',
    rule: RULE.enum(S3_ADDRESSING_STYLES),
    doc: 'Bucket in the host name (`virtual`) or in the path (`path`).',
  },
  {
    name: 'AP_S3_CA_BUNDLE',
    section: S_S3,
    default: 'unset: the system trust store',
    rule: RULE.readableFile,
    doc: 'PEM bundle that replaces the system trust store for S3 TLS.',
  },
  {
    name: 'AP_VARIANT_S3_ENDPOINT',
    section: S_S3,
    default: 'the effective `AP_S3_ENDPOINT`',
    rule: RULE.endpoint,
    doc: 'Endpoint for the variant store alone.',
  },
  {
    name: 'AP_VARIANT_S3_ADDRESSING',
    section: S_S3,
    default: '`path` if `AP_VARIANT_S3_ENDPOINT` is set, else the effective `AP_S3_ADDRESSING`',
    rule: RULE.enum(S3_ADDRESSING_STYLES),
    doc: 'Addressing style for the variant store alone.',
  },
  {
    name: 'AP_VARIANT_S3_CA_BUNDLE',
    section: S_S3,
    default: 'the effective `AP_S3_CA_BUNDLE`',
    rule: RULE.readableFile,
    doc: 'CA bundle for the variant store alone.',
  },
  {
    name: 'AP_VARIANT_S3_ACCESS_KEY_ID',
    section: S_S3,
    default: 'the source identity (`AWS_*`, token included)',
    rule: 'all or nothing with `AP_VARIANT_S3_SECRET_ACCESS_KEY` and `AP_VARIANT_S3_REGION`',
    doc: 'The variant store’s own access key id.',
  },
  {
    name: 'AP_VARIANT_S3_SECRET_ACCESS_KEY',
    section: S_S3,
    default: 'the source identity',
    rule: 'all or nothing with `AP_VARIANT_S3_ACCESS_KEY_ID` and `AP_VARIANT_S3_REGION`',
    doc: 'The variant store’s own secret key. Never echoed in an error.',
  },
  {
    name: 'AP_VARIANT_S3_REGION',
    section: S_S3,
    default: 'the source region',
    rule: 'all or nothing with `AP_VARIANT_S3_ACCESS_KEY_ID` and `AP_VARIANT_S3_SECRET_ACCESS_KEY`',
    doc: 'The variant store’s signing region.',
  },
  {
    name: 'AP_VARIANT_S3_SESSION_TOKEN',
    section: S_S3,
    default: 'none with an own identity; the source token when the whole identity is inherited',
    rule: 'only together with the full `AP_VARIANT_S3_*` credential group; alone it aborts the boot',
    doc: 'Session token for the variant store’s own identity; never borrowed from `AWS_SESSION_TOKEN`.',
  },
  {
    name: 'AP_MAX_RENDERS_PER_WORKER_POOL',
    section: S_LIMITS,
    default: `\`${DEFAULT_MAX_RENDERS_PER_WORKER_POOL}\``,
    rule: `${RULE.nonNegative}; 0 never recycles`,
    doc: 'Renders a render worker pool serves before the process supervisor drains it and starts a fresh one (workers that leak are replaced without dropping work).',
  },
  {
    name: 'AP_MAX_PROBES_PER_WORKER_POOL',
    section: S_LIMITS,
    default: `\`${DEFAULT_MAX_PROBES_PER_WORKER_POOL}\``,
    rule: `${RULE.nonNegative}; 0 never recycles`,
    doc: 'Probes a probe worker pool serves before it is recycled the same way.',
  },
  {
    name: 'AP_WAITING_ROOM',
    section: S_LIMITS,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'Enables the ticketed waiting room (`POST /api/v1/queue/join`, `GET /api/v1/queue/status`, `DELETE /api/v1/queue/ticket`).',
  },
  {
    name: 'AP_WAITING_ROOM_RESERVATION_SECONDS',
    section: S_LIMITS,
    default: `\`${DEFAULT_WAITING_ROOM_RESERVATION_S}\``,
    rule: RULE.timeout,
    doc: 'How long a ready ticket holds its render slot waiting for the session to claim it.',
  },
  {
    name: 'AP_WAITING_ROOM_HEARTBEAT_SECONDS',
    section: S_LIMITS,
    default: `\`${DEFAULT_WAITING_ROOM_HEARTBEAT_S}\``,
    rule: RULE.timeout,
    doc: 'A queued ticket whose holder has not polled its status for this long is dropped.',
  },
  {
    name: 'AP_WAITING_ROOM_MAX_LENGTH',
    section: S_LIMITS,
    default: `\`${DEFAULT_WAITING_ROOM_MAX_LENGTH}\``,
    rule: RULE.positive,
    doc: 'Tickets the room holds; a join beyond it is a 429 with `Retry-After`.',
  },
  {
    name: 'AP_WAITING_ROOM_SLOTS',
    section: S_LIMITS,
    default: 'half the effective `AP_MAX_CONCURRENCY`, rounded down',
    rule: `${RULE.positive}, at most \`AP_MAX_CONCURRENCY\` − 1 when the room is on`,
    doc: 'Render slots the waiting room may hold for tickets (reserved or running); the rest always serve signed requests without a ticket. The room needs `AP_MAX_CONCURRENCY` ≥ 2.',
  },
  {
    name: 'AP_COOKIE_SECURE',
    section: S_LIMITS,
    default: '`false`',
    rule: RULE.boolean,
    doc: "Marks the waiting room's `ap_session` cookie `Secure` (sent over HTTPS only). Turn it on whenever clients reach the proxy over TLS, a TLS-terminating proxy included.",
  },
  {
    name: 'AP_HIT_CACHE_BYTES',
    section: S_STORE,
    default: `\`${DEFAULT_HIT_CACHE_BYTES}\` (64 MiB)`,
    rule: `${RULE.nonNegative}; 0 disables it`,
    doc: 'Memory bound for hot variant bodies kept in process to serve HITs without touching the store.',
  },
  {
    name: 'AP_FFMPEG_PATH',
    section: S_BIN,
    default: 'unset: `ffmpeg` on PATH, else the npm-installed binary',
    rule: RULE.executable,
    doc: 'The ffmpeg used for renders.',
  },
  {
    name: 'AP_FFMPEG_NICE',
    section: S_BIN,
    default: `\`${DEFAULT_FFMPEG_NICE}\``,
    rule: RULE.nice,
    doc: "Niceness of every ffmpeg and ffprobe the proxy starts. Encodes are batch work: when they and the event loop want the same CPU, the loop (every response, `/health`) goes first. `0` runs them at the proxy's own priority.",
  },
  {
    name: 'AP_FFPROBE_PATH',
    section: S_BIN,
    default: 'unset: `ffprobe` on PATH, else the npm-installed binary',
    rule: RULE.executable,
    doc: 'The ffprobe used for probes and `/info`.',
  },
  {
    name: 'AP_CLUSTER_REDIS_URL',
    section: S_CLUSTER,
    default: 'unset: the node runs alone',
    rule: RULE.redisUrl,
    doc: 'Turns cluster mode on: membership, one render per key across nodes, and hand-off of a full queue to a peer. Redis unreachable or slow, each node acts alone. The password is never echoed. Needs `AP_KEY` and `AP_SALT`, the same on every node: forwards between nodes are authenticated with a key derived from them.',
  },
  {
    name: 'AP_CLUSTER_NODE_ID',
    section: S_CLUSTER,
    default: '`<hostname>:<port>`',
    rule: `${RULE.clusterName}; unique among the nodes`,
    doc: 'This node’s name in the registry, in render claims and on forwarded requests.',
  },
  {
    name: 'AP_CLUSTER_ADVERTISE_URL',
    section: S_CLUSTER,
    default: 'unset',
    rule: `${RULE.endpoint}; required when \`AP_CLUSTER_REDIS_URL\` is set`,
    doc: 'The origin peers use to reach this node’s public listener (forwarded renders and hand-offs).',
  },
  {
    name: 'AP_CLUSTER_NODE_LABEL',
    section: S_CLUSTER,
    default: 'unset: no label',
    rule: RULE.clusterName,
    doc: 'A label announced with the node, for affinity when peers pick where to hand a request.',
  },
  {
    name: 'AP_CLUSTER_LEASE_MS',
    section: S_CLUSTER,
    default: `\`${DEFAULT_CLUSTER_LEASE_MS}\``,
    rule: RULE.leaseMs,
    doc: 'Lease of the node’s membership and of its render claims, renewed every third of it; a node that dies lets both lapse within it.',
  },
  {
    name: 'AWS_ACCESS_KEY_ID',
    section: S_AWS,
    default: 'unset: anonymous S3 access',
    rule: 'set together with `AWS_SECRET_ACCESS_KEY`',
    doc: 'S3 access key id (standard AWS name).',
  },
  {
    name: 'AWS_SECRET_ACCESS_KEY',
    section: S_AWS,
    default: 'unset',
    rule: 'set together with `AWS_ACCESS_KEY_ID`',
    doc: 'S3 secret key. Never echoed in an error.',
  },
  {
    name: 'AWS_REGION',
    section: S_AWS,
    default: '`AWS_DEFAULT_REGION`',
    rule: 'required (this or `AWS_DEFAULT_REGION`) when the key pair is set; wins over `AWS_DEFAULT_REGION`',
    doc: 'S3 signing region. Alone, without a key pair, it configures nothing else.',
  },
  {
    name: 'AWS_DEFAULT_REGION',
    section: S_AWS,
    default: 'unset',
    rule: 'any string; used only when `AWS_REGION` is unset',
    doc: 'Fallback signing region.',
  },
  {
    name: 'AWS_SESSION_TOKEN',
    section: S_AWS,
    default: 'unset',
    rule: 'only together with the `AWS_*` key pair',
    doc: 'Session token for temporary credentials.',
  },
] as const satisfies readonly ConfigVariable[];

export type ConfigVariableName = (typeof CONFIG_VARIABLES)[number]['name'];

const KNOWN_NAMES: ReadonlySet<string> = new Set(CONFIG_VARIABLES.map((v) => v.name));

/** Rules that tie several variables together, as documented. */
export const CONFIG_CROSS_RULES: readonly string[] = [
  '`AP_READY_QUEUE_THRESHOLD` must not exceed `AP_QUEUE_SIZE` (queue depth could never reach it).',
  '`AP_CLUSTER_ADVERTISE_URL` is required when `AP_CLUSTER_REDIS_URL` is set.',
  '`AP_METRICS_PORT` must differ from the listener port (`AP_PORT`, else `PORT`, else 4000).',
  '`AP_SERVE_MODE=redirect` (the default) is refused with a `file://` store, which cannot presign; with no store at all, the serve mode is irrelevant and accepted.',
  'An `s3://` store needs credentials: the full `AP_VARIANT_S3_*` group, or the `AWS_*` key pair with a region.',
  'The `AP_VARIANT_S3_*` credential group is all or nothing; the error lists every missing name.',
  'A session token belongs to the identity that minted it: `AWS_SESSION_TOKEN` needs the `AWS_*` key pair, `AP_VARIANT_S3_SESSION_TOKEN` needs the full variant group, and neither crosses over.',
];

/** The general parsing rules, as documented. */
export const CONFIG_GENERAL_RULES: readonly string[] = [
  'Values are trimmed; an empty or all-whitespace value counts as unset.',
  'Integers are plain decimal digits after trimming: `" 32 "` and `007` are accepted; `1.5`, `12kb`, `3 2`, `1e3`, `1_000`, `-1` and `+5` are refused (a sign is never needed for a count).',
  `Booleans are ${RULE.boolean}.`,
  'Enumerations are case-sensitive; the error lists the allowed values.',
  'Every error names the variable and the rule; all problems are reported together, and the process exits with code 2.',
  'The configuration is read once, at boot, and never changes while the process runs.',
];

// ---------------------------------------------------------------------------------------------
// Errors

/** One invalid value or combination. */
export interface ConfigProblem {
  /** The variable the problem is reported against (cross rules: the one to change first). */
  readonly variable: string;
  /** A full sentence naming the variable and the rule. */
  readonly message: string;
}

/** The environment does not describe a bootable proxy. Match on `code`. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'ERR_CONFIG' as const;
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    super(
      `invalid configuration (${count}):\n${problems.map((p) => `  - ${p.message}`).join('\n')}`,
    );
    this.problems = Object.freeze([...problems]);
  }
}

// ---------------------------------------------------------------------------------------------
// Filesystem seam

/** The filesystem operations config performs; injectable so tests can refuse a write as root. */
export interface ConfigFs {
  /** Follows symlinks; throws an errno error (`code`) when the path cannot be stat'ed. */
  stat(path: string): { isDirectory(): boolean; isFile(): boolean };
  /** Throws when `mode` (an `fs.constants` mask) is not granted. */
  access(path: string, mode: number): void;
  /** `mkdir -p`. */
  mkdirp(path: string): void;
  /** Creates the file exclusively (fails if it exists). */
  createExclusive(path: string, data: string): void;
  unlink(path: string): void;
  readFile(path: string): Buffer;
}

/** The real filesystem. */
export const nodeConfigFs: ConfigFs = {
  stat: (p) => nodeFs.statSync(p),
  access: (p, mode) => nodeFs.accessSync(p, mode),
  mkdirp: (p) => {
    nodeFs.mkdirSync(p, { recursive: true });
  },
  createExclusive: (p, data) => nodeFs.writeFileSync(p, data, { flag: 'wx' }),
  unlink: (p) => nodeFs.unlinkSync(p),
  readFile: (p) => nodeFs.readFileSync(p),
};

export interface LoadConfigOptions {
  /** Default for `AP_MAX_CONCURRENCY`. @default os.availableParallelism() */
  readonly cpuCount?: number;
  /** @default nodeConfigFs */
  readonly fs?: ConfigFs;
}

// ---------------------------------------------------------------------------------------------
// Loading

type Env = NodeJS.ProcessEnv | Readonly<Record<string, string | undefined>>;

/** Per-load state: the environment, the collected problems, and which variables failed. */
class Loader {
  readonly problems: ConfigProblem[] = [];
  readonly failed = new Set<string>();
  readonly #env: Env;
  constructor(
    env: Env,
    readonly fs: ConfigFs,
  ) {
    this.#env = env;
  }

  /** Reads one listed variable: trimmed, with empty meaning unset. The only env access. */
  read(name: ConfigVariableName): string | undefined {
    const value: unknown = this.#env[name];
    if (typeof value !== 'string') return undefined;
    const trimmed = value.trim();
    return trimmed === '' ? undefined : trimmed;
  }

  fail(variable: string, message: string): undefined {
    this.failed.add(variable);
    this.problems.push({ variable, message });
    return undefined;
  }

  ok(...names: string[]): boolean {
    return names.every((n) => !this.failed.has(n));
  }
}

function show(value: string): string {
  const cut = value.length > MAX_ECHO_CHARS ? `${value.slice(0, MAX_ECHO_CHARS)}…` : value;
  return JSON.stringify(cut);
}

function errCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : String((err as Error)?.message ?? err);
}

function expandPath(value: string): string {
  if (value === '~') return homedir();
  if (value.startsWith('~/')) return join(homedir(), value.slice(2));
  return resolve(value);
}

const DIGITS_RE = /^[0-9]+$/;
const HEX_RE = /^(?:[0-9a-fA-F]{2})+$/;
/** `scheme://…@` within the authority: userinfo, even an empty one. */
const USERINFO_RE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*@/;

const INTEGER_KINDS = {
  positive: { min: 1, max: Number.MAX_SAFE_INTEGER, rule: RULE.positive },
  nonNegative: { min: 0, max: Number.MAX_SAFE_INTEGER, rule: RULE.nonNegative },
  port: { min: 1, max: MAX_PORT, rule: RULE.port },
  timeout: { min: 1, max: MAX_TIMEOUT_S, rule: RULE.timeout },
  presignTtl: { min: 1, max: MAX_PRESIGN_TTL_S, rule: RULE.presignTtl },
  leaseMs: { min: MIN_CLUSTER_LEASE_MS, max: MAX_CLUSTER_LEASE_MS, rule: RULE.leaseMs },
  nice: { min: 0, max: MAX_NICE, rule: RULE.nice },
} as const;
type IntegerKind = keyof typeof INTEGER_KINDS;

/** Digits only, whole, within the kind's bounds; otherwise a problem and the fallback. */
function integerFrom(
  ld: Loader,
  name: string,
  raw: string | undefined,
  fallback: number,
  kind: IntegerKind,
): number {
  if (raw === undefined) return fallback;
  const { min, max, rule } = INTEGER_KINDS[kind];
  const n = DIGITS_RE.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    ld.fail(name, `${name} must be ${rule}, got ${show(raw)}`);
    return fallback;
  }
  return n;
}

function integer(
  ld: Loader,
  name: ConfigVariableName,
  fallback: number,
  kind: IntegerKind,
): number {
  return integerFrom(ld, name, ld.read(name), fallback, kind);
}

function boolean(ld: Loader, name: ConfigVariableName, fallback: boolean): boolean {
  const raw = ld.read(name);
  if (raw === undefined) return fallback;
  const word = raw.toLowerCase();
  if ((TRUTHY_WORDS as readonly string[]).includes(word)) return true;
  if ((FALSY_WORDS as readonly string[]).includes(word)) return false;
  ld.fail(name, `${name} must be ${RULE.boolean}, got ${show(raw)}`);
  return fallback;
}

function enumeration<T extends string>(
  ld: Loader,
  name: ConfigVariableName,
  allowed: readonly T[],
  fallback: T,
): T {
  const raw = ld.read(name);
  if (raw === undefined) return fallback;
  const hit = allowed.find((a) => a === raw);
  if (hit !== undefined) return hit;
  ld.fail(name, `${name} must be ${RULE.enum(allowed)}, got ${show(raw)}`);
  return fallback;
}

/** Hex to bytes. The value is a secret, so it is never echoed. */
function hex(ld: Loader, name: ConfigVariableName, minBytes: number): Buffer | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  if (!HEX_RE.test(raw)) {
    const why = /^[0-9a-fA-F]+$/.test(raw)
      ? `an odd number of characters (${raw.length})`
      : 'a character outside 0-9a-fA-F';
    return ld.fail(
      name,
      `${name} must be ${minBytes > 0 ? RULE.key : RULE.hex}; the value (not shown) has ${why}`,
    );
  }
  // Buffer.alloc, not Buffer.from: an unpooled buffer shares its memory with nothing else.
  const bytes = Buffer.alloc(raw.length / 2);
  bytes.write(raw, 'hex');
  if (bytes.length < minBytes) {
    return ld.fail(
      name,
      `${name} must be ${RULE.key}; the value (not shown) decodes to ${bytes.length} bytes`,
    );
  }
  return bytes;
}

function list(ld: Loader, name: ConfigVariableName): readonly string[] {
  const raw = ld.read(name);
  if (raw === undefined) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function directory(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  if (expanded === '/') {
    return ld.fail(
      name,
      `${name} must not be the filesystem root: it would confine nothing (${RULE.directory})`,
    );
  }
  let why: string | undefined;
  try {
    if (!ld.fs.stat(expanded).isDirectory()) why = 'not a directory';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return ld.fail(name, `${name} must be ${RULE.directory}; got ${show(raw)} (${why})`);
  }
  return expanded;
}

/** A file that can actually be read: stat'ed as a regular file, then read. */
function readableFile(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  let why: string | undefined;
  try {
    if (ld.fs.stat(expanded).isFile()) ld.fs.readFile(expanded);
    else why = 'not a regular file';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return ld.fail(name, `${name} must be ${RULE.readableFile}; got ${show(raw)} (${why})`);
  }
  return expanded;
}

function executable(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  let why: string | undefined;
  try {
    if (ld.fs.stat(expanded).isFile()) ld.fs.access(expanded, nodeFs.constants.X_OK);
    else why = 'not a regular file';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    const hint = raw.includes('/') ? '' : `; give the full path, e.g. /usr/bin/${raw}`;
    return ld.fail(name, `${name} must be ${RULE.executable}; got ${show(raw)} (${why})${hint}`);
  }
  return expanded;
}

function parseUrl(raw: string): URL | undefined {
  try {
    return new URL(raw);
  } catch {
    return undefined;
  }
}

function ipLiteral(ld: Loader, name: ConfigVariableName, fallback: string): string {
  const raw = ld.read(name);
  if (raw === undefined) return fallback;
  if (isIP(raw) !== 0) return raw;
  ld.fail(name, `${name} must be ${RULE.ip}, e.g. 127.0.0.1, 0.0.0.0 or ::1; got ${show(raw)}`);
  return fallback;
}

function origin(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined || raw === '*') return raw;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return ld.fail(
      name,
      `${name} must be ${RULE.origin}, e.g. https://app.example.com; got ${shown}`,
    );
  }
  const host = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  const canonical = `${url.protocol}//${host}${url.port ? `:${url.port}` : ''}`;
  if (USERINFO_RE.test(raw)) {
    return ld.fail(
      name,
      `${name} must not carry userinfo (value not shown); it must be ${RULE.origin}. Did you mean "${canonical}"?`,
    );
  }
  if (raw !== canonical) {
    return ld.fail(
      name,
      `${name} must be ${RULE.origin}, since a browser compares it byte for byte with the Origin it sends; got ${show(raw)}. Did you mean "${canonical}"?`,
    );
  }
  return raw;
}

const CLUSTER_NAME_RE = new RegExp(`^[A-Za-z0-9._:@-]{1,${MAX_CLUSTER_NAME_CHARS}}$`);

function clusterName(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined || CLUSTER_NAME_RE.test(raw)) return raw;
  return ld.fail(name, `${name} must be ${RULE.clusterName}, got ${show(raw)}`);
}

/** A `redis://` or `rediss://` URL with a host; kept whole (ioredis needs the password). */
function redisUrl(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'redis:' && url.protocol !== 'rediss:') ||
    !url.hostname
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return ld.fail(name, `${name} must be ${RULE.redisUrl}; got ${shown}`);
  }
  return raw;
}

/** An `http(s)://host[:port]` origin, returned without a trailing slash. */
function advertiseUrl(ld: Loader, name: ConfigVariableName): string | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname ||
    USERINFO_RE.test(raw) ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== '' ||
    raw.endsWith('?') ||
    raw.endsWith('#')
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return ld.fail(
      name,
      `${name} must be ${RULE.endpoint}, e.g. http://10.0.0.5:4000; got ${shown}`,
    );
  }
  return `${url.protocol}//${url.host}`;
}

function endpoint(ld: Loader, name: ConfigVariableName): S3Endpoint | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  if (USERINFO_RE.test(raw)) {
    return ld.fail(
      name,
      `${name} must not carry credentials (value not shown): S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AP_VARIANT_S3_* group), and userinfo here would be ignored. It must be ${RULE.endpoint}`,
    );
  }
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname ||
    url.pathname !== '/' ||
    raw.includes('?') ||
    raw.includes('#')
  ) {
    return ld.fail(
      name,
      `${name} must be ${RULE.endpoint}, e.g. http://minio:9000; got ${show(raw)}`,
    );
  }
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    url: url.origin,
    protocol,
    hostname: url.hostname,
    port: url.port ? Number(url.port) : protocol === 'https' ? 443 : 80,
  };
}

function variantStore(ld: Loader, name: ConfigVariableName): VariantStoreConfig | undefined {
  const raw = ld.read(name);
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (USERINFO_RE.test(raw)) {
    return ld.fail(
      name,
      `${name} must not carry credentials (value not shown): S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AP_VARIANT_S3_* group); it must be ${RULE.store}`,
    );
  }
  if (url === undefined) {
    return ld.fail(name, `${name} must be ${RULE.store}; got ${show(raw)}`);
  }
  if (url.protocol === 'file:') return fileStore(ld, name, raw, url);
  if (url.protocol === 's3:') return s3Store(ld, name, raw, url);
  return ld.fail(
    name,
    `${name} must be ${RULE.store}; got scheme "${url.protocol.slice(0, -1)}" in ${show(raw)}`,
  );
}

function fileStore(
  ld: Loader,
  name: string,
  raw: string,
  url: URL,
): VariantStoreConfig | undefined {
  if (raw.includes('?') || raw.includes('#')) {
    return ld.fail(
      name,
      `${name} must be a bare directory URL (file:///absolute/dir) with no query or fragment; got ${show(raw)}`,
    );
  }
  if (url.host !== '') {
    return ld.fail(
      name,
      `${name}: file URLs take three slashes (file:///absolute/dir); ${show(raw)} reads "${url.host}" as a host`,
    );
  }
  let path: string;
  try {
    path = fileURLToPath(url);
  } catch {
    return ld.fail(name, `${name} must be ${RULE.store}; got ${show(raw)}`);
  }
  const root = resolve(path);
  if (root === '/') {
    return ld.fail(
      name,
      `${name} must not be the filesystem root: variants would fan out into /; name the directory you mean, e.g. file:///var/cache/audio-proxy`,
    );
  }
  let why: string | undefined;
  try {
    if (!ld.fs.stat(root).isDirectory()) why = 'not a directory';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return ld.fail(name, `${name} must name an existing directory; got ${show(raw)} (${why})`);
  }
  // Writability by the write the store performs (a file under <root>/tmp), not by mode bits,
  // which say nothing about read-only mounts.
  const probe = join(root, 'tmp', `.boot-probe-${process.pid}-${randomInt(PROBE_ID_RANGE)}`);
  try {
    ld.fs.mkdirp(dirname(probe));
    ld.fs.createExclusive(probe, '');
    ld.fs.unlink(probe);
  } catch (err) {
    return ld.fail(
      name,
      `${name} must name a writable directory; creating and removing ${probe} failed for ${show(raw)} (${errCode(err)})`,
    );
  }
  return { kind: 'file', root };
}

function s3Store(ld: Loader, name: string, raw: string, url: URL): VariantStoreConfig | undefined {
  if (raw.includes('?') || raw.includes('#')) {
    return ld.fail(
      name,
      `${name} must be a bare bucket URL (s3://bucket) with no query or fragment; got ${show(raw)}`,
    );
  }
  if (url.port !== '') {
    return ld.fail(
      name,
      `${name} names a bucket only (s3://bucket); a port belongs in AP_VARIANT_S3_ENDPOINT or AP_S3_ENDPOINT; got ${show(raw)}`,
    );
  }
  const bucket = url.hostname;
  if (bucket === '') {
    return ld.fail(name, `${name} must name a bucket (s3://bucket); got ${show(raw)}`);
  }
  if (url.pathname !== '' && url.pathname !== '/') {
    return ld.fail(
      name,
      `${name} names a bucket and nothing else (s3://bucket); a path or key prefix is not supported; got ${show(raw)}`,
    );
  }
  if (bucket.length < BUCKET_NAME_MIN_CHARS || bucket.length > BUCKET_NAME_MAX_CHARS) {
    return ld.fail(
      name,
      `${name} bucket names are ${BUCKET_NAME_MIN_CHARS}–${BUCKET_NAME_MAX_CHARS} characters; "${bucket}" has ${bucket.length}`,
    );
  }
  return { kind: 's3', bucket };
}

function sourceS3(ld: Loader): S3Profile {
  const id = ld.read('AWS_ACCESS_KEY_ID');
  const secret = ld.read('AWS_SECRET_ACCESS_KEY');
  const awsRegion = ld.read('AWS_REGION');
  const defaultRegion = ld.read('AWS_DEFAULT_REGION');
  const token = ld.read('AWS_SESSION_TOKEN');
  const region = awsRegion ?? defaultRegion;

  let credentials: S3Credentials | undefined;
  if (id !== undefined && secret !== undefined) {
    if (region === undefined) {
      ld.fail(
        'AWS_REGION',
        'AWS_REGION (or AWS_DEFAULT_REGION) must be set when AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are: the region is part of every signature',
      );
    } else {
      credentials = { accessKeyId: id, secretAccessKey: secret, sessionToken: token };
    }
  } else if (id !== undefined || secret !== undefined) {
    const missing = id === undefined ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY';
    ld.fail(
      missing,
      `AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (one cannot sign without the other); ${missing} is missing`,
    );
  } else if (token !== undefined) {
    ld.fail(
      'AWS_SESSION_TOKEN',
      'AWS_SESSION_TOKEN must only be set together with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: a session token signs nothing on its own',
    );
  }

  const ep = endpoint(ld, 'AP_S3_ENDPOINT');
  const addressing = enumeration(
    ld,
    'AP_S3_ADDRESSING',
    S3_ADDRESSING_STYLES,
    ep === undefined && ld.ok('AP_S3_ENDPOINT') ? 'virtual' : 'path',
  );
  const caBundle = readableFile(ld, 'AP_S3_CA_BUNDLE');
  return { endpoint: ep, addressing, caBundle, region, credentials };
}

function variantS3(ld: Loader, source: S3Profile): S3Profile {
  const id = ld.read('AP_VARIANT_S3_ACCESS_KEY_ID');
  const secret = ld.read('AP_VARIANT_S3_SECRET_ACCESS_KEY');
  const region = ld.read('AP_VARIANT_S3_REGION');
  const token = ld.read('AP_VARIANT_S3_SESSION_TOKEN');
  const group = {
    AP_VARIANT_S3_ACCESS_KEY_ID: id,
    AP_VARIANT_S3_SECRET_ACCESS_KEY: secret,
    AP_VARIANT_S3_REGION: region,
  };
  const missing = VARIANT_GROUP.filter((n) => group[n] === undefined);

  let credentials = source.credentials;
  let effectiveRegion = source.region;
  if (missing.length === 0) {
    credentials = { accessKeyId: id!, secretAccessKey: secret!, sessionToken: token };
    effectiveRegion = region;
  } else if (missing.length < VARIANT_GROUP.length) {
    const set = VARIANT_GROUP.filter((n) => group[n] !== undefined);
    ld.fail(
      missing[0]!,
      `${VARIANT_GROUP.join(', ')} are all or nothing: ${set.join(', ')} ${set.length === 1 ? 'is' : 'are'} set, so ${missing.join(' and ')} must be set too`,
    );
  } else if (token !== undefined) {
    ld.fail(
      'AP_VARIANT_S3_SESSION_TOKEN',
      `AP_VARIANT_S3_SESSION_TOKEN needs the variant store's own identity: set ${VARIANT_GROUP.join(', ')} as well (a token is never combined with the AWS_* identity)`,
    );
  }

  const ownEndpoint = endpoint(ld, 'AP_VARIANT_S3_ENDPOINT');
  const derived: S3Addressing =
    ownEndpoint !== undefined || !ld.ok('AP_VARIANT_S3_ENDPOINT') ? 'path' : source.addressing;
  const addressing = enumeration(ld, 'AP_VARIANT_S3_ADDRESSING', S3_ADDRESSING_STYLES, derived);
  const ownBundle = readableFile(ld, 'AP_VARIANT_S3_CA_BUNDLE');
  return {
    endpoint: ownEndpoint ?? source.endpoint,
    addressing,
    caBundle: ownBundle ?? source.caBundle,
    region: effectiveRegion,
    credentials,
  };
}

function freezeDeep<T>(value: T): T {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return value;
  if (Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) freezeDeep(v);
  return Object.freeze(value);
}

/**
 * Reads and validates the environment. Throws one `ConfigError` listing every problem.
 *
 * Touches the filesystem where a value is a filesystem claim (`AP_LOCAL_ROOT`, a `file://`
 * store, CA bundles, executables) and never the network. Reads every variable in
 * `CONFIG_VARIABLES` on every call, whatever the others hold, and no other.
 */
export function loadConfig(env: Env, opts: LoadConfigOptions = {}): Config {
  const cpuCount = opts.cpuCount ?? availableParallelism();
  if (!Number.isSafeInteger(cpuCount) || cpuCount < 1) {
    throw new RangeError(`loadConfig: opts.cpuCount must be a positive integer, got ${cpuCount}`);
  }
  const ld = new Loader(env, opts.fs ?? nodeConfigFs);

  // Listener port: AP_PORT wins; PORT is only consulted (and only checked) when it is unset.
  const apPort = ld.read('AP_PORT');
  const envPort = ld.read('PORT');
  const portVar = apPort !== undefined ? 'AP_PORT' : 'PORT';
  const port = integerFrom(ld, portVar, apPort ?? envPort, DEFAULT_PORT, 'port');
  const bind = ipLiteral(ld, 'AP_BIND', '') || DEFAULT_BIND;

  const key = hex(ld, 'AP_KEY', MIN_KEY_BYTES);
  const salt = hex(ld, 'AP_SALT', 0);
  const allowInsecure = boolean(ld, 'AP_ALLOW_INSECURE', false);
  const sourceAllowlist = list(ld, 'AP_SOURCE_ALLOWLIST');
  const localRoot = directory(ld, 'AP_LOCAL_ROOT');
  const store = variantStore(ld, 'AP_VARIANT_STORE');

  // Derived defaults read the *effective* value they derive from.
  const maxConcurrency = integer(ld, 'AP_MAX_CONCURRENCY', cpuCount, 'positive');
  const maxProbeConcurrency = integer(
    ld,
    'AP_MAX_PROBE_CONCURRENCY',
    maxConcurrency * PROBE_CONCURRENCY_FACTOR,
    'positive',
  );
  const queueSize = integer(ld, 'AP_QUEUE_SIZE', DEFAULT_QUEUE_SIZE, 'nonNegative');
  const readyQueueThreshold = integer(
    ld,
    'AP_READY_QUEUE_THRESHOLD',
    defaultReadyQueueThreshold(queueSize),
    'nonNegative',
  );
  const maxSrcBytes = integer(ld, 'AP_MAX_SRC_BYTES', DEFAULT_MAX_SRC_BYTES, 'positive');
  const maxVariantBytes = integer(ld, 'AP_MAX_VARIANT_BYTES', maxSrcBytes, 'positive');
  const renderTimeoutS = integer(ld, 'AP_RENDER_TIMEOUT', DEFAULT_RENDER_TIMEOUT_S, 'timeout');
  const probeTimeoutS = integer(ld, 'AP_PROBE_TIMEOUT', DEFAULT_PROBE_TIMEOUT_S, 'timeout');
  const maxDurationS = integer(ld, 'AP_MAX_DURATION_S', DEFAULT_MAX_DURATION_S, 'positive');
  const sourceAllowPrivate = boolean(ld, 'AP_SOURCE_ALLOW_PRIVATE', false);
  const serveModeRaw = ld.read('AP_SERVE_MODE');
  const serveMode = enumeration(ld, 'AP_SERVE_MODE', SERVE_MODES, 'redirect');
  const presignTtlS = integer(ld, 'AP_PRESIGN_TTL', DEFAULT_PRESIGN_TTL_S, 'presignTtl');
  const logLevel = enumeration(ld, 'AP_LOG_LEVEL', LOG_LEVELS, 'info');
  const accessLog = boolean(ld, 'AP_ACCESS_LOG', true);
  const metricsBind = ipLiteral(ld, 'AP_METRICS_BIND', DEFAULT_METRICS_BIND);
  const metricsPort = integer(ld, 'AP_METRICS_PORT', DEFAULT_METRICS_PORT, 'port');
  const allowOrigin = origin(ld, 'AP_ALLOW_ORIGIN');
  const s3 = sourceS3(ld);
  const variant = variantS3(ld, s3);
  const maxRendersPerWorkerPool = integer(
    ld,
    'AP_MAX_RENDERS_PER_WORKER_POOL',
    DEFAULT_MAX_RENDERS_PER_WORKER_POOL,
    'nonNegative',
  );
  const maxProbesPerWorkerPool = integer(
    ld,
    'AP_MAX_PROBES_PER_WORKER_POOL',
    DEFAULT_MAX_PROBES_PER_WORKER_POOL,
    'nonNegative',
  );
  const waitingRoom = boolean(ld, 'AP_WAITING_ROOM', false);
  const waitingRoomReservationS = integer(
    ld,
    'AP_WAITING_ROOM_RESERVATION_SECONDS',
    DEFAULT_WAITING_ROOM_RESERVATION_S,
    'timeout',
  );
  const waitingRoomHeartbeatS = integer(
    ld,
    'AP_WAITING_ROOM_HEARTBEAT_SECONDS',
    DEFAULT_WAITING_ROOM_HEARTBEAT_S,
    'timeout',
  );
  const waitingRoomMaxLength = integer(
    ld,
    'AP_WAITING_ROOM_MAX_LENGTH',
    DEFAULT_WAITING_ROOM_MAX_LENGTH,
    'positive',
  );
  const waitingRoomSlots = integer(
    ld,
    'AP_WAITING_ROOM_SLOTS',
    Math.floor(maxConcurrency * DEFAULT_WAITING_ROOM_SLOT_SHARE),
    'positive',
  );
  const cookieSecure = boolean(ld, 'AP_COOKIE_SECURE', false);
  const backlogBudgetBytes = integer(
    ld,
    'AP_BACKLOG_BUDGET_BYTES',
    DEFAULT_BACKLOG_BUDGET_BYTES,
    'nonNegative',
  );
  const hitCacheBytes = integer(ld, 'AP_HIT_CACHE_BYTES', DEFAULT_HIT_CACHE_BYTES, 'nonNegative');
  const ffmpegNice = integer(ld, 'AP_FFMPEG_NICE', DEFAULT_FFMPEG_NICE, 'nice');
  const ffmpegPath = executable(ld, 'AP_FFMPEG_PATH');
  const ffprobePath = executable(ld, 'AP_FFPROBE_PATH');
  const clusterRedisUrl = redisUrl(ld, 'AP_CLUSTER_REDIS_URL');
  const clusterNodeId = clusterName(ld, 'AP_CLUSTER_NODE_ID') ?? defaultNodeId(port);
  const clusterAdvertiseUrl = advertiseUrl(ld, 'AP_CLUSTER_ADVERTISE_URL');
  const clusterNodeLabel = clusterName(ld, 'AP_CLUSTER_NODE_LABEL');
  const clusterLeaseMs = integer(ld, 'AP_CLUSTER_LEASE_MS', DEFAULT_CLUSTER_LEASE_MS, 'leaseMs');

  // Cross-variable rules: only between values that are themselves valid, so one typo is
  // reported once and not again as a confusing consequence.
  if (ld.ok('AP_QUEUE_SIZE', 'AP_READY_QUEUE_THRESHOLD') && readyQueueThreshold > queueSize) {
    ld.fail(
      'AP_READY_QUEUE_THRESHOLD',
      `AP_READY_QUEUE_THRESHOLD (${readyQueueThreshold}) must not exceed AP_QUEUE_SIZE (${queueSize}): queue depth could never reach it, so /ready could never report the node unready`,
    );
  }
  if (waitingRoom && ld.ok('AP_WAITING_ROOM', 'AP_MAX_CONCURRENCY', 'AP_WAITING_ROOM_SLOTS')) {
    if (maxConcurrency < 2) {
      ld.fail(
        'AP_WAITING_ROOM',
        `AP_WAITING_ROOM needs AP_MAX_CONCURRENCY ≥ 2 (it is ${maxConcurrency}): the room reserves at most AP_MAX_CONCURRENCY − 1 render slots, so that signed requests without a ticket always keep one`,
      );
    } else if (waitingRoomSlots > maxConcurrency - 1) {
      ld.fail(
        'AP_WAITING_ROOM_SLOTS',
        `AP_WAITING_ROOM_SLOTS (${waitingRoomSlots}) must be at most AP_MAX_CONCURRENCY − 1 (${maxConcurrency - 1}): at least one render slot is always left to signed requests without a ticket`,
      );
    }
  }
  if (ld.ok(portVar, 'AP_METRICS_PORT') && metricsPort === port) {
    const from = apPort !== undefined ? 'AP_PORT' : envPort !== undefined ? 'PORT' : 'the default';
    ld.fail(
      'AP_METRICS_PORT',
      `AP_METRICS_PORT (${metricsPort}) must differ from the listener port (${port}, from ${from}; the listener port is AP_PORT, else PORT, else ${DEFAULT_PORT}): two listeners cannot share a port`,
    );
  }
  if (store?.kind === 'file' && serveMode === 'redirect' && ld.ok('AP_SERVE_MODE')) {
    const how = serveModeRaw === undefined ? ' (the default)' : '';
    ld.fail(
      'AP_SERVE_MODE',
      `AP_SERVE_MODE=redirect${how} serves cache hits through presigned URLs, which a file:// AP_VARIANT_STORE cannot produce; set AP_SERVE_MODE=proxy, or use an s3:// store`,
    );
  }
  const credentialVars = [...VARIANT_GROUP, 'AP_VARIANT_S3_SESSION_TOKEN', 'AWS_REGION'];
  const awsVars = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'];
  if (
    store?.kind === 's3' &&
    variant.credentials === undefined &&
    ld.ok(...credentialVars, ...awsVars)
  ) {
    ld.fail(
      'AP_VARIANT_STORE',
      `AP_VARIANT_STORE=s3://${store.bucket} needs S3 credentials: set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION, or ${VARIANT_GROUP.join(', ')}; or use a file:/// store`,
    );
  }

  if (clusterRedisUrl !== undefined && (key === undefined || salt === undefined)) {
    if (ld.ok('AP_KEY', 'AP_SALT')) {
      ld.fail(
        'AP_CLUSTER_REDIS_URL',
        'AP_CLUSTER_REDIS_URL needs AP_KEY and AP_SALT (the same on every node): nodes authenticate the requests they forward to each other with a key derived from them, and a request claiming to be forwarded without it is served as a client’s',
      );
    }
  }
  if (clusterRedisUrl !== undefined && clusterAdvertiseUrl === undefined) {
    if (ld.ok('AP_CLUSTER_ADVERTISE_URL')) {
      ld.fail(
        'AP_CLUSTER_ADVERTISE_URL',
        'AP_CLUSTER_ADVERTISE_URL is required when AP_CLUSTER_REDIS_URL is set: peers forward renders and hand requests over to this node at that origin',
      );
    }
  }

  if (ld.problems.length > 0) throw new ConfigError(ld.problems);

  return freezeDeep<Config>({
    port,
    bind,
    key,
    salt,
    allowInsecure,
    sourceAllowlist,
    localRoot,
    variantStore: store,
    maxConcurrency,
    maxProbeConcurrency,
    queueSize,
    readyQueueThreshold,
    maxSrcBytes,
    maxVariantBytes,
    renderTimeoutS,
    probeTimeoutS,
    maxDurationS,
    sourceAllowPrivate,
    serveMode,
    presignTtlS,
    logLevel,
    accessLog,
    metricsBind,
    metricsPort,
    allowOrigin,
    s3,
    variantS3: variant,
    maxRendersPerWorkerPool,
    maxProbesPerWorkerPool,
    waitingRoom,
    waitingRoomReservationS,
    waitingRoomHeartbeatS,
    waitingRoomMaxLength,
    waitingRoomSlots,
    cookieSecure,
    backlogBudgetBytes,
    hitCacheBytes,
    ffmpegNice,
    ffmpegPath,
    ffprobePath,
    clusterRedisUrl,
    clusterNodeId,
    clusterAdvertiseUrl,
    clusterNodeLabel,
    clusterLeaseMs,
  });
}

/** `<hostname>:<port>`, made to fit the id rule; a random id when the hostname gives nothing. */
function defaultNodeId(port: number): string {
  const host = hostname()
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, MAX_CLUSTER_NAME_CHARS - 6);
  return host ? `${host}:${port}` : `node-${randomInt(PROBE_ID_RANGE).toString(36)}`;
}

/** Half the queue, floored, at least 1; a queue of 0 has no depth to read, so readiness is off. */
export function defaultReadyQueueThreshold(queueSize: number): number {
  return queueSize === 0 ? 0 : Math.max(1, Math.floor(queueSize / 2));
}

export interface ConfigOrExitOptions extends LoadConfigOptions {
  /** @default process.exit */
  readonly exit?: (code: number) => never;
  /** @default process.stderr */
  readonly stderr?: { write(chunk: string): unknown };
}

/** Exit code for an unusable configuration (distinct from 1, a crash). */
export const CONFIG_EXIT_CODE = 2;

/**
 * `loadConfig`, or print every problem to stderr and exit with code 2. For a command-line host's
 * boot path only (the CLI is its one caller inside the package; the library never exits the
 * process, so an embedding app calls `loadConfig` and handles `ConfigError`). Any other
 * exception is a bug and propagates.
 */
export function configOrExit(env: Env, opts: ConfigOrExitOptions = {}): Config {
  try {
    return loadConfig(env, opts);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    (opts.stderr ?? process.stderr).write(`audio-proxy: ${err.message}\n`);
    return (opts.exit ?? process.exit)(CONFIG_EXIT_CODE);
  }
}

/**
 * Lines the boot should log as warnings: insecure signatures, missing signing material, and
 * `AP_*` names in the environment that nothing reads (usually typos). Enumerates `env`.
 */
export function configWarnings(config: Config, env: Env): string[] {
  const out: string[] = [];
  if (config.allowInsecure) {
    out.push(
      "AP_ALLOW_INSECURE is on: the literal signature 'insecure' is accepted; never run this in production",
    );
  }
  if (config.key === undefined || config.salt === undefined) {
    const missing = [config.key ? '' : 'AP_KEY', config.salt ? '' : 'AP_SALT'].filter(Boolean);
    out.push(`${missing.join(' and ')} unset: every signed request will be refused with a 401`);
  }
  const unknown = unrecognisedVariables(env);
  if (unknown.length > 0) {
    out.push(`unrecognised variables ignored (check the spelling): ${unknown.join(', ')}`);
  }
  return out;
}

/** `AP_*` names present in `env` that are not in `CONFIG_VARIABLES`, sorted. */
export function unrecognisedVariables(env: Env): string[] {
  return Object.keys(env)
    .filter((k) => k.startsWith('AP_') && !KNOWN_NAMES.has(k))
    .sort();
}

// ---------------------------------------------------------------------------------------------
// The provider

/** The one injectable config source. Actors call `get()` once per operation. */
export interface ConfigProvider {
  get(): Config;
}

/** A provider for a fixed config (production). */
export function staticConfig(config: Config): ConfigProvider {
  const frozen = freezeDeep(config);
  return { get: () => frozen };
}

/** A provider whose limits tests can change between operations. */
export interface MutableConfigProvider extends ConfigProvider {
  /** Replaces the named fields and returns the new snapshot; earlier snapshots are untouched. */
  set(partial: Partial<Config>): Config;
}

const POSITIVE_FIELDS = [
  'port',
  'maxConcurrency',
  'maxProbeConcurrency',
  'maxSrcBytes',
  'maxVariantBytes',
  'renderTimeoutS',
  'probeTimeoutS',
  'maxDurationS',
  'presignTtlS',
  'metricsPort',
] as const;
const NON_NEGATIVE_FIELDS = ['queueSize', 'readyQueueThreshold'] as const;

/**
 * A provider for tests. `set()` checks each field's own type (positive or non-negative integer)
 * and throws `TypeError`/`RangeError`; cross-field rules are not applied, so a test can lower
 * `queueSize` without also touching `readyQueueThreshold`.
 */
export function mutableConfig(config: Config): MutableConfigProvider {
  let current = freezeDeep({ ...config });
  return {
    get: () => current,
    set(partial) {
      for (const field of Object.keys(partial)) {
        if (!(field in current)) throw new TypeError(`mutableConfig.set: unknown field "${field}"`);
      }
      for (const field of POSITIVE_FIELDS) checkField(partial, field, 1);
      for (const field of NON_NEGATIVE_FIELDS) checkField(partial, field, 0);
      current = freezeDeep({ ...current, ...partial });
      return current;
    },
  };
}

function checkField(partial: Partial<Config>, field: keyof Config, min: 0 | 1): void {
  if (!(field in partial)) return;
  const v = partial[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new RangeError(
      `mutableConfig.set: ${field} must be an integer ≥ ${min}, got ${String(v)}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Documentation

const TABLE_HEADER = ['Variable', 'Default', 'Accepted values', 'What it does'];

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** A Markdown table padded the way the repository's formatter (Biome) pads one, so it is stable. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(3, h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

/** docs/configuration.md, generated from `CONFIG_VARIABLES` and the rule lists above. */
export function renderConfigDocs(): string {
  const lines: string[] = [
    '# Configuration',
    '',
    '<!-- Generated from src/config.ts by `npx tsx scripts/gen-config-docs.ts`; do not edit by hand.',
    '     test/configDocs.test.ts fails when this file and the code disagree. -->',
    '',
    'audio-proxy reads its configuration from the environment once, at boot. An invalid value stops the',
    `boot before anything listens: every problem is printed to stderr, each naming its variable and the`,
    `rule it breaks, and the process exits with code ${CONFIG_EXIT_CODE}. Embedders call \`loadConfig(env)\`, which throws`,
    "a `ConfigError` (`code: 'ERR_CONFIG'`) whose `problems` list holds the same messages.",
    '',
    '## General rules',
    '',
    ...CONFIG_GENERAL_RULES.map((r) => `- ${r}`),
    '',
    '## Rules across variables',
    '',
    ...CONFIG_CROSS_RULES.map((r) => `- ${r}`),
  ];
  const sections = [...new Set(CONFIG_VARIABLES.map((v) => v.section))];
  for (const section of sections) {
    const rows = CONFIG_VARIABLES.filter((v) => v.section === section).map((v) =>
      [`\`${v.name}\``, v.default, v.rule, v.doc].map(cell),
    );
    lines.push('', `## ${section}`, '', ...table(TABLE_HEADER, rows));
  }
  lines.push(
    '',
    'An `AP_*` name that nothing reads is ignored; `configWarnings()` lists such names (usually typos)',
    'for the boot log. The proposed `AP_BACKLOG_MODE`, `AP_SPOOL_DIR`, `AP_SPOOL_MAX_BYTES` and',
    '`AP_BACKLOG_SPILL_BYTES` are not implemented.',
    '',
  );
  return lines.join('\n');
}
