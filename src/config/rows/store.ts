/**
 * Rows of the variant store and of how a cache hit is served: the store URL (`file://` or
 * `s3://`), a `file://` store's size bound, the serve mode, the presigned URL lifetime and the
 * in-memory HIT cache bound.
 *
 * ## Invariants
 * - **A `file://` store is proved writable by the write the store performs**: a probe file
 *   under `<root>/tmp` is created exclusively and removed, because mode bits say nothing about
 *   read-only mounts. Never the filesystem root.
 * - **An `s3://` store names a bucket and nothing else** (no path, prefix, port, query,
 *   fragment or userinfo), with S3's own length bounds.
 * - **No credential is echoed**: a store URL with userinfo is refused without being shown.
 * - **A size bound bounds a `file://` store only**: set without a store, or with an `s3://` one,
 *   it is refused (a bucket is bounded by its lifecycle rules); `0` is unbounded.
 *
 * ## Races
 * - **Two nodes booting on one `file://` store.** Probe names carry the pid and a 48-bit random
 *   number (every container's pid may be 1) and are created exclusively (`wx`), so neither
 *   collides with nor deletes the other's probe.
 *
 * Not here: the live PUT+DELETE probe of an `s3://` store (the store module owns the S3
 * client), and the rules tying the store to the serve mode and to credentials (`cross.ts`).
 */
import { randomInt } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  BUCKET_NAME_MAX_CHARS,
  BUCKET_NAME_MIN_CHARS,
  DEFAULT_HIT_CACHE_BYTES,
  DEFAULT_PRESIGN_TTL_S,
  MIN_VARIANT_STORE_MAX_BYTES,
  RANDOM_ID_RANGE,
  SERVE_MODES,
} from '../defaults.js';
import { enumeration, errCode, integer, parseUrl, show, USERINFO_RE } from '../parsers.js';
import { type Reading, row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';
import type { VariantStoreConfig } from '../types.js';

const section = SECTIONS.store;

export const STORE_ROWS = [
  row({
    name: 'AP_VARIANT_STORE',
    field: 'variantStore',
    section,
    default: 'unset: no variant cache',
    rule: `${RULE.store}. \`file://\`: an existing directory, not \`/\`, no query or fragment (\`file://host/…\` is refused with a three-slashes hint; \`file://localhost/…\` is the local host), proved writable by creating and removing \`<root>/tmp/.boot-probe-…\`. \`s3://\`: a bucket of ${BUCKET_NAME_MIN_CHARS}–${BUCKET_NAME_MAX_CHARS} characters, no path or prefix, query, fragment, userinfo or port; S3 credentials required`,
    doc: 'Where rendered variants are cached. The live write probe of an `s3://` store runs when the store starts.',
    read: (v) => variantStore(v),
  }),
  row({
    name: 'AP_VARIANT_STORE_MAX_BYTES',
    field: 'variantStoreMaxBytes',
    section,
    default: '`0`: unbounded, as before',
    rule: `${RULE.nonNegative}: \`0\`, or at least ${MIN_VARIANT_STORE_MAX_BYTES} (1 MiB); only with a \`file://\` \`AP_VARIANT_STORE\``,
    doc: 'Bytes a `file://` store may keep (data and metadata files; staging aside). Past it, each commit first evicts the least recently used variants (never one being read); a variant larger than the whole bound is not kept. Read at boot, which scans the directory. See docs/operations.md, "Bounding a file store".',
    read: (v) => variantStoreMaxBytes(v),
  }),
  row({
    name: 'AP_SERVE_MODE',
    field: 'serveMode',
    section,
    default: '`redirect`',
    rule: `${RULE.enum(SERVE_MODES)}; \`redirect\` with a \`file://\` store is refused`,
    doc: 'How a cache hit is served: a 302 to a presigned URL, or streamed through the proxy. Irrelevant without a store.',
    read: (v) => enumeration(v, SERVE_MODES, 'redirect'),
  }),
  row({
    name: 'AP_PRESIGN_TTL',
    field: 'presignTtlS',
    section,
    default: `\`${DEFAULT_PRESIGN_TTL_S}\``,
    rule: RULE.presignTtl,
    doc: 'Lifetime of a presigned redirect URL.',
    read: (v) => integer(v, DEFAULT_PRESIGN_TTL_S, 'presignTtl'),
  }),
  row({
    name: 'AP_HIT_CACHE_BYTES',
    field: 'hitCacheBytes',
    section,
    default: `\`${DEFAULT_HIT_CACHE_BYTES}\` (64 MiB)`,
    rule: `${RULE.nonNegative}; 0 disables it`,
    doc: 'Memory bound for hot variant bodies kept in process to serve HITs without touching the store.',
    read: (v) => integer(v, DEFAULT_HIT_CACHE_BYTES, 'nonNegative'),
  }),
] as const;

function variantStoreMaxBytes(v: Reading): number {
  const { name, raw } = v;
  const n = integer(v, 0, 'nonNegative');
  if (raw === undefined || n === 0 || !v.ok('variantStoreMaxBytes')) return n;
  if (n < MIN_VARIANT_STORE_MAX_BYTES) {
    v.fail(
      `${name} must be 0 (unbounded) or at least ${MIN_VARIANT_STORE_MAX_BYTES} (1 MiB), got ${show(raw)}: it counts bytes (10 GiB is 10737418240)`,
    );
    return 0;
  }
  if (!v.ok('variantStore')) return n; // the store's own problem is reported already
  const store = v.get('variantStore');
  if (store === undefined) {
    v.fail(`${name} bounds a file:// AP_VARIANT_STORE, and AP_VARIANT_STORE is not set`);
    return 0;
  }
  if (store.kind === 's3') {
    v.fail(
      `${name} bounds a file:// store only; s3://${store.bucket} is bounded by the bucket's own lifecycle rules (expire variants after N days), not by the proxy`,
    );
    return 0;
  }
  return n;
}

function variantStore(v: Reading): VariantStoreConfig | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (USERINFO_RE.test(raw)) {
    return v.fail(
      `${name} must not carry credentials (value not shown): S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AP_VARIANT_S3_* group); it must be ${RULE.store}`,
    );
  }
  if (url === undefined) {
    return v.fail(`${name} must be ${RULE.store}; got ${show(raw)}`);
  }
  if (url.protocol === 'file:') return fileStore(v, raw, url);
  if (url.protocol === 's3:') return s3Store(v, raw, url);
  return v.fail(
    `${name} must be ${RULE.store}; got scheme "${url.protocol.slice(0, -1)}" in ${show(raw)}`,
  );
}

function fileStore(v: Reading, raw: string, url: URL): VariantStoreConfig | undefined {
  const { name } = v;
  if (raw.includes('?') || raw.includes('#')) {
    return v.fail(
      `${name} must be a bare directory URL (file:///absolute/dir) with no query or fragment; got ${show(raw)}`,
    );
  }
  if (url.host !== '') {
    return v.fail(
      `${name}: file URLs take three slashes (file:///absolute/dir); ${show(raw)} reads "${url.host}" as a host`,
    );
  }
  let path: string;
  try {
    path = fileURLToPath(url);
  } catch {
    return v.fail(`${name} must be ${RULE.store}; got ${show(raw)}`);
  }
  const root = resolve(path);
  if (root === '/') {
    return v.fail(
      `${name} must not be the filesystem root: variants would fan out into /; name the directory you mean, e.g. file:///var/cache/audio-proxy`,
    );
  }
  let why: string | undefined;
  try {
    if (!v.fs.stat(root).isDirectory()) why = 'not a directory';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return v.fail(`${name} must name an existing directory; got ${show(raw)} (${why})`);
  }
  // Writability by the write the store performs (a file under <root>/tmp), not by mode bits,
  // which say nothing about read-only mounts.
  const probe = join(root, 'tmp', `.boot-probe-${process.pid}-${randomInt(RANDOM_ID_RANGE)}`);
  try {
    v.fs.mkdirp(dirname(probe));
    v.fs.createExclusive(probe, '');
    v.fs.unlink(probe);
  } catch (err) {
    return v.fail(
      `${name} must name a writable directory; creating and removing ${probe} failed for ${show(raw)} (${errCode(err)})`,
    );
  }
  return { kind: 'file', root };
}

function s3Store(v: Reading, raw: string, url: URL): VariantStoreConfig | undefined {
  const { name } = v;
  if (raw.includes('?') || raw.includes('#')) {
    return v.fail(
      `${name} must be a bare bucket URL (s3://bucket) with no query or fragment; got ${show(raw)}`,
    );
  }
  if (url.port !== '') {
    return v.fail(
      `${name} names a bucket only (s3://bucket); a port belongs in AP_VARIANT_S3_ENDPOINT or AP_S3_ENDPOINT; got ${show(raw)}`,
    );
  }
  const bucket = url.hostname;
  if (bucket === '') {
    return v.fail(`${name} must name a bucket (s3://bucket); got ${show(raw)}`);
  }
  if (url.pathname !== '' && url.pathname !== '/') {
    return v.fail(
      `${name} names a bucket and nothing else (s3://bucket); a path or key prefix is not supported; got ${show(raw)}`,
    );
  }
  if (bucket.length < BUCKET_NAME_MIN_CHARS || bucket.length > BUCKET_NAME_MAX_CHARS) {
    return v.fail(
      `${name} bucket names are ${BUCKET_NAME_MIN_CHARS}–${BUCKET_NAME_MAX_CHARS} characters; "${bucket}" has ${bucket.length}`,
    );
  }
  return { kind: 's3', bucket };
}
