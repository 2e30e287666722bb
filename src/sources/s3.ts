/**
 * `s3://bucket/key` sources: checked with one `HeadObject`, then handed to ffmpeg as a presigned
 * GET URL, so ffmpeg (and ffprobe) fetch only the byte ranges they read: a trim of a long master
 * costs the trimmed region, not the whole object.
 *
 * Uses the source identity (`AWS_*`, `AP_S3_ENDPOINT`, `AP_S3_ADDRESSING`, `AP_S3_CA_BUNDLE`),
 * never the variant store's. One client per configuration snapshot, built on first use.
 *
 * ## Invariants
 * - **Every refusal is the one 404**: a bucket outside `AP_SOURCE_ALLOWLIST`, a missing key or
 *   bucket, or access denied all read `not_found`, so no answer is an oracle for what exists.
 * - **The store's health is not the client's fault**: unreachable, timing out or 5xx is
 *   `upstream_unavailable` (502); bad or missing credentials are `not_configured` (500).
 * - **The size is the object's**: over `AP_MAX_SRC_BYTES` is a 413 before anything is rendered
 *   (not for `/info`, which passes `enforceSize: false`).
 * - **The presigned URL outlives the render**: at least an hour, and at least the render and probe
 *   timeouts together, because ffmpeg may re-open it to seek late in a render.
 * - **The canonical source never contains the presigned URL**, so logs and telemetry (which use
 *   the canonical form) never carry a signature.
 *
 * ## Races
 * - *Object replaced between the HEAD and ffmpeg's read*: ffmpeg reads the new bytes; the key
 *   names the source, not a version of it (as for local files).
 *
 * ## Events
 * None.
 */
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Config, S3Profile } from '../config.js';
import type { Failure } from '../http/errors.js';
import type { ResolvedSource } from '../http/handler.js';
import { classifyS3Error, createS3Client } from '../store/s3client.js';
import { authorizeRemote, type Source } from './parse.js';
import { caFileFor, caFileInput } from './trust.js';

/** Shortest presigned source URL lifetime, in seconds: covers a long render with seeks. */
export const SOURCE_PRESIGN_MIN_TTL_S = 3_600;
/** Slack added to render + probe timeouts for the URL lifetime, in seconds. */
const SOURCE_PRESIGN_SLACK_S = 60;
/** SigV4's longest presigned lifetime, in seconds. */
const MAX_PRESIGN_S = 604_800;
/** Source sockets per render slot: a probe and a render may read one source at once. */
const SOURCE_SOCKETS_PER_SLOT = 4;
/** Floor of the source socket pool: probes outnumber render slots (4 per slot by default). */
const MIN_SOURCE_SOCKETS = 16;

export type S3Source = Extract<Source, { scheme: 's3' }>;

export interface ResolveRemoteOptions {
  /** Refuse a source over `AP_MAX_SRC_BYTES` with 413. @default true (pass false for /info) */
  readonly enforceSize?: boolean;
}

const clients = new WeakMap<S3Profile, S3Client>();

/** The source client for this configuration snapshot (built once per profile object). */
export function sourceClient(config: Config): S3Client {
  const profile = config.s3;
  let client = clients.get(profile);
  if (client === undefined) {
    client = createS3Client(profile, {
      maxSockets: Math.max(MIN_SOURCE_SOCKETS, SOURCE_SOCKETS_PER_SLOT * config.maxConcurrency),
    });
    clients.set(profile, client);
  }
  return client;
}

/** Lifetime of the URL ffmpeg reads the source through, in seconds. */
export function sourcePresignTtlS(config: Config): number {
  const needed = config.renderTimeoutS + config.probeTimeoutS + SOURCE_PRESIGN_SLACK_S;
  return Math.min(Math.max(SOURCE_PRESIGN_MIN_TTL_S, needed), MAX_PRESIGN_S);
}

/** An `s3://` source → what ffmpeg opens (a presigned URL), or the failure to answer. */
export async function resolveS3Source(
  source: S3Source,
  canonical: string,
  config: Config,
  options: ResolveRemoteOptions = {},
): Promise<ResolvedSource | { failure: Failure }> {
  if (!authorizeRemote(source, config.sourceAllowlist)) return { failure: { type: 'not_found' } };
  if (config.s3.credentials === undefined) return { failure: { type: 'not_configured' } };
  const client = sourceClient(config);
  const target = { Bucket: source.bucket, Key: source.key };
  let size: number | undefined;
  let mtimeMs: number | undefined;
  try {
    const head = await client.send(new HeadObjectCommand(target));
    size = head.ContentLength;
    mtimeMs = head.LastModified?.getTime();
  } catch (headError) {
    const error = await explainForbidden(client, target, headError);
    if (error === undefined) return present(source, canonical, client, target, config);
    switch (classifyS3Error(error)) {
      case 'missing':
        return { failure: { type: 'not_found' } };
      case 'credentials':
        return { failure: { type: 'not_configured' } };
      default:
        return { failure: { type: 'upstream_unavailable' } };
    }
  }
  if ((options.enforceSize ?? true) && size !== undefined && size > config.maxSrcBytes) {
    return { failure: { type: 'source_too_large' } };
  }
  return present(source, canonical, client, target, config, size, mtimeMs);
}

type Target = { readonly Bucket: string; readonly Key: string };

async function present(
  source: S3Source,
  canonical: string,
  client: S3Client,
  target: Target,
  config: Config,
  size?: number,
  mtimeMs?: number,
): Promise<ResolvedSource> {
  const url = await getSignedUrl(client, new GetObjectCommand(target), {
    expiresIn: sourcePresignTtlS(config),
  });
  return {
    source,
    canonical,
    input: { url, kind: 's3', ...caFileInput(caFileFor(config.s3.caBundle)) },
    ...(size !== undefined ? { size } : {}),
    ...(mtimeMs !== undefined ? { mtimeMs } : {}),
  };
}

/**
 * A HEAD answer has no body, so a 403 cannot say whether the object is forbidden to us (a 404 to
 * the client) or our identity is wrong (500). A one-byte GET carries the error code and tells.
 * Returns the error to classify, or undefined if the GET was allowed after all.
 */
async function explainForbidden(
  client: S3Client,
  target: Target,
  headError: unknown,
): Promise<unknown> {
  const status = (headError as { $metadata?: { httpStatusCode?: number } })?.$metadata
    ?.httpStatusCode;
  if (status !== 403) return headError;
  try {
    const probe = await client.send(new GetObjectCommand({ ...target, Range: 'bytes=0-0' }));
    (probe.Body as { destroy?: () => void } | undefined)?.destroy?.();
    return undefined;
  } catch (getError) {
    return getError;
  }
}
