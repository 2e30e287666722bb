/**
 * One `S3Client` per S3 profile (sources: `AP_S3_*`/`AWS_*`; the store: `AP_VARIANT_S3_*`), built
 * the same way for both, plus the classification of SDK errors into what the HTTP contract says.
 *
 * ## Invariants
 * - **Checksums only when an operation requires them** (`WHEN_REQUIRED` both ways). With the SDK's
 *   default, streamed bodies are sent `aws-chunked` with trailing checksums, which several
 *   S3-compatible servers store verbatim (a corrupted object); MD5-free parts are enough here.
 * - **Addressing is the profile's**: `path` puts the bucket in the path (`forcePathStyle`),
 *   `virtual` in the host name.
 * - **A CA bundle replaces the system trust store** for that profile's HTTPS, never adds to it.
 * - **The socket pool is bounded** (`maxSockets`), so a slow store queues requests here rather
 *   than opening sockets without limit.
 * - **No credentials, no client**: the caller decides what an unconfigured profile means; the
 *   SDK's ambient credential chain (instance metadata, profiles on disk) is never consulted.
 *
 * ## Races
 * None: clients are built once and are safe to share.
 *
 * ## Events
 * None.
 */
import { readFileSync } from 'node:fs';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { S3Client } from '@aws-sdk/client-s3';
import type { S3Profile } from '../config/index.js';

/** Connect deadline, in ms: an unreachable store must fail a HIT lookup fast, not hang it. */
export const S3_CONNECT_TIMEOUT_MS = 3_000;
/** Socket idle deadline, in ms: a part upload of 5 MiB on a slow link still fits well inside it. */
export const S3_SOCKET_TIMEOUT_MS = 30_000;
/** Attempts per operation, retries included; a store that fails twice in a row is unavailable. */
export const S3_MAX_ATTEMPTS = 2;
/** Sockets per client when the caller names none; the SDK's own default pool size. */
export const DEFAULT_S3_MAX_SOCKETS = 50;
/** Region the SDK signs with when a profile has none (anonymous endpoints, tests). */
const FALLBACK_REGION = 'us-east-1';

export interface S3ClientOptions {
  /** Concurrent sockets to the endpoint. @default DEFAULT_S3_MAX_SOCKETS */
  readonly maxSockets?: number;
}

/** Builds a client for `profile`. Throws `TypeError` when the profile has no credentials. */
export function createS3Client(profile: S3Profile, options: S3ClientOptions = {}): S3Client {
  if (profile.credentials === undefined) {
    throw new TypeError('createS3Client: the profile has no credentials');
  }
  const maxSockets = options.maxSockets ?? DEFAULT_S3_MAX_SOCKETS;
  if (!Number.isSafeInteger(maxSockets) || maxSockets < 1) {
    throw new RangeError(`maxSockets must be a positive integer, got ${maxSockets}`);
  }
  const ca = profile.caBundle !== undefined ? readFileSync(profile.caBundle) : undefined;
  const { accessKeyId, secretAccessKey, sessionToken } = profile.credentials;
  return new S3Client({
    region: profile.region ?? FALLBACK_REGION,
    ...(profile.endpoint ? { endpoint: profile.endpoint.url } : {}),
    forcePathStyle: profile.addressing === 'path',
    credentials: {
      accessKeyId,
      secretAccessKey,
      ...(sessionToken !== undefined ? { sessionToken } : {}),
    },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: S3_MAX_ATTEMPTS,
    requestHandler: {
      connectionTimeout: S3_CONNECT_TIMEOUT_MS,
      socketTimeout: S3_SOCKET_TIMEOUT_MS,
      httpAgent: new HttpAgent({ keepAlive: true, maxSockets }),
      httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets, ...(ca ? { ca } : {}) }),
    },
  });
}

/** What an SDK failure means to the HTTP contract. */
export type S3ErrorKind =
  /** The object or bucket is not there, or we may not read it: 404. */
  | 'missing'
  /** Our identity is wrong (bad key, bad signature, expired token): 500 not_configured. */
  | 'credentials'
  /** The store could not be asked: 502 upstream_unavailable. */
  | 'unavailable';

const MISSING_NAMES = new Set([
  'NotFound',
  'NoSuchKey',
  'NoSuchBucket',
  'AccessDenied',
  'Forbidden',
]);
const CREDENTIAL_NAMES = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'InvalidToken',
  'ExpiredToken',
  'TokenRefreshRequired',
  'AuthorizationHeaderMalformed',
]);

/** Classifies an error thrown by `S3Client.send`. */
export function classifyS3Error(error: unknown): S3ErrorKind {
  const e = error as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } };
  const name = e?.Code ?? e?.name ?? '';
  if (CREDENTIAL_NAMES.has(name)) return 'credentials';
  if (MISSING_NAMES.has(name)) return 'missing';
  const status = e?.$metadata?.httpStatusCode;
  if (status === 404 || status === 403) return 'missing';
  return 'unavailable';
}

/** A short lowercase token for telemetry: the S3 error code, or the socket's errno. */
export function s3Reason(error: unknown): string {
  const e = error as { name?: string; Code?: string; code?: string };
  const raw = e?.code ?? e?.Code ?? e?.name ?? 'unknown';
  return String(raw).toLowerCase();
}
