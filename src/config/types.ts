/**
 * The shape of a loaded configuration: `Config` and the S3 and store descriptions inside it.
 *
 * ## Invariants
 * - **Every field is readonly, and a loaded value is deeply frozen** (except the key and salt
 *   Buffers, which JavaScript cannot freeze; they are private copies nobody else holds).
 * - **Each field's `@default` is the documented default**; the row that reads the field's
 *   variable applies it (`rows/`), and `docs/configuration.md` is generated from those rows.
 * - **Secrets stay in typed fields** (`key`, `salt`, `rotatedKeys`, `S3Credentials`) and are
 *   never echoed.
 */
import type { LogFormat, LogLevel, S3Addressing, ServeMode } from './defaults.js';

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

/** One key/salt pair of `AP_KEY`/`AP_SALT` (entries at the same position), decoded. */
export interface SigningPair {
  readonly key: Buffer;
  readonly salt: Buffer;
}

/** A named preset of `AP_PRESETS`: a stored option string, as a URL would spell it. */
export interface PresetDefinition {
  /** `[a-z0-9_-]`, unique. */
  readonly name: string;
  /** `/`-separated option segments, checked against the grammar when the proxy is built. */
  readonly options: string;
}

/** The validated configuration. Frozen; read through a `ConfigProvider`. */
export interface Config {
  /** Public listener port (`AP_PORT`, else `PORT`). @default 4000 */
  readonly port: number;
  /** Public listener address, an IP literal. @default undefined (every interface) */
  readonly bind: string | undefined;
  /** HMAC key (`AP_KEY`'s first entry), decoded: what signs. Unset: every signed request is a 401. @default undefined */
  readonly key: Buffer | undefined;
  /** Bytes prepended to the signed path (`AP_SALT`'s first entry), decoded. @default undefined */
  readonly salt: Buffer | undefined;
  /** The pairs after the first (key rotation): what they signed still verifies; they sign nothing. @default [] */
  readonly rotatedKeys: readonly SigningPair[];
  /** Accept the literal signature `insecure`. @default false */
  readonly allowInsecure: boolean;
  /** Named presets a URL may use with `pr:NAME`. @default [] */
  readonly presets: readonly PresetDefinition[];
  /** A render URL must name a preset and may carry no other variant option. @default false */
  readonly onlyPresets: boolean;
  /** HTTPS hosts and S3 buckets sources may name. @default [] */
  readonly sourceAllowlist: readonly string[];
  /** Absolute directory `local://` sources are confined to (expanded, symlinks not resolved). @default undefined */
  readonly localRoot: string | undefined;
  /** Where rendered variants are cached. @default undefined (no cache) */
  readonly variantStore: VariantStoreConfig | undefined;
  /** Bytes a `file://` store's variants may take on disk; past it the least recently used are evicted. 0 = unbounded. @default 0 */
  readonly variantStoreMaxBytes: number;
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
  /** `auto`: pretty when the CLI writes to a terminal; an embedded proxy's default logger
   *  pretty-prints only for `pretty`. @default 'auto' */
  readonly logFormat: LogFormat;
  /** One info line per public request. @default true */
  readonly accessLog: boolean;
  /** An IPv4 or IPv6 literal. @default '127.0.0.1' */
  readonly metricsBind: string;
  /** @default 9568 */
  readonly metricsPort: number;
  /** `*` or a canonical origin. @default undefined (no CORS) */
  readonly allowOrigin: string | undefined;
  /** Entries the flight recorder keeps; 0 turns it off. @default 0 */
  readonly flightRecorder: number;
  /** Where the flight recorder saves; undefined is the temp directory. @default undefined */
  readonly flightRecorderDir: string | undefined;
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
  /** Entries one `POST /warm` may carry. @default 100 */
  readonly warmMaxEntries: number;
  /** Warm entries held at once. @default 1000 */
  readonly warmMaxPending: number;
  /** Warm renders admitted to the semaphore at once. @default maxConcurrency + ⌊queueSize / 2⌋ */
  readonly warmAdmitted: number;
  /** Attempts per warm entry. @default 6 */
  readonly warmAttempts: number;
  /** Ceiling on a warm retry's backoff (s). @default 30 */
  readonly warmBackoffMaxS: number;
  /** A MISS of `t:S:D` prefetches `t:S+D:D` at `low`. @default false */
  readonly prefetchNextTrim: boolean;
  /** HLS segments a segment's MISS prefetches after it at `low`; 0 = off. @default 1 */
  readonly prefetchHlsSegments: number;
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
