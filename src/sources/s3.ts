/**
 * `s3://bucket/key` sources: checked with one `HeadObject`, then read by the proxy itself with
 * `GetObject` into a spool (`spool.ts`) that ffmpeg and ffprobe get as a descriptor. They never
 * see a URL, presigned or not.
 *
 * Uses the source identity (`AWS_*`, `AP_S3_ENDPOINT`, `AP_S3_ADDRESSING`, `AP_S3_CA_BUNDLE`),
 * never the variant store's. One client per configuration snapshot, built on first use. The
 * endpoint is the operator's, so the non-public address rule of `https://` sources does not
 * apply to it (a MinIO on a private network is the normal case).
 *
 * ## Invariants
 * - **Every refusal is the one 404**: a bucket outside `AP_SOURCE_ALLOWLIST`, a missing key or
 *   bucket, or access denied all read `not_found`, so no answer is an oracle for what exists.
 * - **The store's health is not the client's fault**: unreachable, timing out or 5xx is
 *   `upstream_unavailable` (502); bad or missing credentials are `not_configured` (500).
 * - **The size is the object's, and every byte read is counted**: a HEAD size over
 *   `AP_MAX_SRC_BYTES` is a 413 before anything is read (not for `/info`, which passes
 *   `enforceSize: false`); the spool stops at the same bound whatever the GET delivers.
 * - **The canonical source never contains credentials**, so logs and telemetry (which use the
 *   canonical form) never carry a signature.
 *
 * ## Races
 * - *Object replaced between the HEAD and the GET*: the GET's bytes are probed and rendered; the
 *   key names the source, not a version of it (as for local files).
 *
 * ## Events
 * None.
 */
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Config, S3Profile } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import type { ResolvedSource, Source } from '../core/source.js';
import { classifyS3Error, createS3Client } from '../store/s3client.js';
import { authorizeRemote } from './parse.js';
import { type FillOutcome, openSpooled, type SpoolSink } from './spool.js';

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

/** An `s3://` source → its HEAD's findings and how to spool it, or the failure to answer. */
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

function present(
  source: S3Source,
  canonical: string,
  client: S3Client,
  target: Target,
  config: Config,
  size?: number,
  mtimeMs?: number,
): ResolvedSource {
  const version = `${canonical}\n${size ?? ''}\n${mtimeMs ?? ''}`;
  const limits = { maxBytes: config.maxSrcBytes, timeoutMs: config.renderTimeoutS * 1000 };
  return {
    source,
    canonical,
    input: { url: canonical, kind: 's3' },
    open: (abandon) =>
      openSpooled(
        version,
        (sink, signal) => getInto(client, target, sink, signal),
        limits,
        abandon,
      ),
    ...(size !== undefined ? { size } : {}),
    ...(mtimeMs !== undefined ? { mtimeMs } : {}),
  };
}

/** Streams the object into `sink`, stopping (413) as soon as the byte counter says so. */
async function getInto(
  client: S3Client,
  target: Target,
  sink: SpoolSink,
  signal: AbortSignal,
): Promise<FillOutcome> {
  let body: AsyncIterable<Uint8Array> & { destroy?: () => void };
  try {
    const got = await client.send(new GetObjectCommand(target), { abortSignal: signal });
    body = got.Body as unknown as typeof body;
  } catch (error) {
    switch (classifyS3Error(error)) {
      case 'missing':
        return { ok: false, refusal: 'not_found' };
      case 'credentials':
        return { ok: false, refusal: 'not_configured' };
      default:
        return { ok: false, refusal: 'upstream_unavailable', detail: String(error) };
    }
  }
  try {
    for await (const chunk of body) {
      if (!(await sink.write(chunk))) {
        body.destroy?.();
        return { ok: false, refusal: 'source_too_large' };
      }
    }
    return { ok: true };
  } catch (error) {
    return { ok: false, refusal: 'upstream_unavailable', detail: String(error) };
  }
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
