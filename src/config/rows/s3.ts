/**
 * Rows of the S3 connection and identities, and the two S3 profiles assembled from them after
 * the fold: the sources' profile (`AP_S3_*` and the standard `AWS_*` identity) and the variant
 * store's (`AP_VARIANT_S3_*`, falling back to the sources' piece by piece).
 *
 * ## Invariants
 * - **A credential is a group or nothing.** The `AWS_*` key pair signs only with a region;
 *   the `AP_VARIANT_S3_*` key, secret and region are all or nothing, and the error lists every
 *   missing name. These are rules across rows, so they run after the fold (`s3Profiles`).
 * - **A session token belongs to the identity that minted it**: `AWS_SESSION_TOKEN` needs the
 *   `AWS_*` pair, `AP_VARIANT_S3_SESSION_TOKEN` the full variant group, and neither crosses over.
 * - **No secret is echoed**: credential rows are read verbatim and never shown; an endpoint
 *   carrying userinfo is refused without being shown.
 * - **Addressing follows the endpoint**: `virtual` on AWS proper, `path` with a custom endpoint,
 *   unless set; a variant store with its own endpoint defaults to `path` too.
 *
 * Not here: that an `s3://` store has credentials at all (`cross.ts`), and the live probe of
 * the store (the store module owns the S3 client).
 */
import { S3_ADDRESSING_STYLES, type S3Addressing } from '../defaults.js';
import type { Ledger } from '../fold.js';
import { endpoint, enumeration, readableFile } from '../parsers.js';
import { type FieldName, type Fields, row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';
import type { S3Credentials, S3Profile } from '../types.js';

const section = SECTIONS.s3;

export const S3_ROWS = [
  row({
    name: 'AP_S3_ENDPOINT',
    field: 's3Endpoint',
    section,
    default: 'unset: AWS',
    rule: RULE.endpoint,
    doc: 'S3-compatible endpoint for `s3://` sources (and the store, unless overridden).',
    read: (v) => endpoint(v),
  }),
  row({
    name: 'AP_S3_ADDRESSING',
    field: 's3Addressing',
    section,
    default: '`virtual`, or `path` when `AP_S3_ENDPOINT` is set',
    rule: RULE.enum(S3_ADDRESSING_STYLES),
    doc: 'Bucket in the host name (`virtual`) or in the path (`path`).',
    read: (v) =>
      enumeration(
        v,
        S3_ADDRESSING_STYLES,
        v.get('s3Endpoint') === undefined && v.ok('s3Endpoint') ? 'virtual' : 'path',
      ),
  }),
  row({
    name: 'AP_S3_CA_BUNDLE',
    field: 's3CaBundle',
    section,
    default: 'unset: the system trust store',
    rule: RULE.readableFile,
    doc: 'PEM bundle that replaces the system trust store for S3 TLS.',
    read: (v) => readableFile(v),
  }),
  row({
    name: 'AP_VARIANT_S3_ENDPOINT',
    field: 'variantS3Endpoint',
    section,
    default: 'the effective `AP_S3_ENDPOINT`',
    rule: RULE.endpoint,
    doc: 'Endpoint for the variant store alone.',
    read: (v) => endpoint(v),
  }),
  row({
    name: 'AP_VARIANT_S3_ADDRESSING',
    field: 'variantS3Addressing',
    section,
    default: '`path` if `AP_VARIANT_S3_ENDPOINT` is set, else the effective `AP_S3_ADDRESSING`',
    rule: RULE.enum(S3_ADDRESSING_STYLES),
    doc: 'Addressing style for the variant store alone.',
    read: (v) => {
      const derived: S3Addressing =
        v.get('variantS3Endpoint') !== undefined || !v.ok('variantS3Endpoint')
          ? 'path'
          : v.get('s3Addressing');
      return enumeration(v, S3_ADDRESSING_STYLES, derived);
    },
  }),
  row({
    name: 'AP_VARIANT_S3_CA_BUNDLE',
    field: 'variantS3CaBundle',
    section,
    default: 'the effective `AP_S3_CA_BUNDLE`',
    rule: RULE.readableFile,
    doc: 'CA bundle for the variant store alone.',
    read: (v) => readableFile(v),
  }),
  row({
    name: 'AP_VARIANT_S3_ACCESS_KEY_ID',
    field: 'variantS3AccessKeyId',
    section,
    default: 'the source identity (`AWS_*`, token included)',
    rule: 'all or nothing with `AP_VARIANT_S3_SECRET_ACCESS_KEY` and `AP_VARIANT_S3_REGION`',
    doc: 'The variant store’s own access key id.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AP_VARIANT_S3_SECRET_ACCESS_KEY',
    field: 'variantS3SecretAccessKey',
    section,
    default: 'the source identity',
    rule: 'all or nothing with `AP_VARIANT_S3_ACCESS_KEY_ID` and `AP_VARIANT_S3_REGION`',
    doc: 'The variant store’s own secret key. Never echoed in an error.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AP_VARIANT_S3_REGION',
    field: 'variantS3Region',
    section,
    default: 'the source region',
    rule: 'all or nothing with `AP_VARIANT_S3_ACCESS_KEY_ID` and `AP_VARIANT_S3_SECRET_ACCESS_KEY`',
    doc: 'The variant store’s signing region.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AP_VARIANT_S3_SESSION_TOKEN',
    field: 'variantS3SessionToken',
    section,
    default: 'none with an own identity; the source token when the whole identity is inherited',
    rule: 'only together with the full `AP_VARIANT_S3_*` credential group; alone it aborts the boot',
    doc: 'Session token for the variant store’s own identity; never borrowed from `AWS_SESSION_TOKEN`.',
    read: (v) => v.raw,
  }),
] as const;

export const AWS_ROWS = [
  row({
    name: 'AWS_ACCESS_KEY_ID',
    field: 'awsAccessKeyId',
    section: SECTIONS.aws,
    default: 'unset: anonymous S3 access',
    rule: 'set together with `AWS_SECRET_ACCESS_KEY`',
    doc: 'S3 access key id (standard AWS name).',
    read: (v) => v.raw,
  }),
  row({
    name: 'AWS_SECRET_ACCESS_KEY',
    field: 'awsSecretAccessKey',
    section: SECTIONS.aws,
    default: 'unset',
    rule: 'set together with `AWS_ACCESS_KEY_ID`',
    doc: 'S3 secret key. Never echoed in an error.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AWS_REGION',
    field: 'awsRegion',
    section: SECTIONS.aws,
    default: '`AWS_DEFAULT_REGION`',
    rule: 'required (this or `AWS_DEFAULT_REGION`) when the key pair is set; wins over `AWS_DEFAULT_REGION`',
    doc: 'S3 signing region. Alone, without a key pair, it configures nothing else.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AWS_DEFAULT_REGION',
    field: 'awsDefaultRegion',
    section: SECTIONS.aws,
    default: 'unset',
    rule: 'any string; used only when `AWS_REGION` is unset',
    doc: 'Fallback signing region.',
    read: (v) => v.raw,
  }),
  row({
    name: 'AWS_SESSION_TOKEN',
    field: 'awsSessionToken',
    section: SECTIONS.aws,
    default: 'unset',
    rule: 'only together with the `AWS_*` key pair',
    doc: 'Session token for temporary credentials.',
    read: (v) => v.raw,
  }),
] as const;

/** The variant store's own identity: all or nothing. */
export const VARIANT_IDENTITY_FIELDS = [
  'variantS3AccessKeyId',
  'variantS3SecretAccessKey',
  'variantS3Region',
] as const satisfies readonly FieldName[];

/** Every field a credential group rule may blame. */
export const CREDENTIAL_FIELDS = [
  ...VARIANT_IDENTITY_FIELDS,
  'variantS3SessionToken',
  'awsRegion',
  'awsAccessKeyId',
  'awsSecretAccessKey',
  'awsSessionToken',
] as const satisfies readonly FieldName[];

/** The two S3 profiles, with the credential group rules checked (problems go to the ledger). */
export function s3Profiles(f: Fields, ld: Ledger): { s3: S3Profile; variantS3: S3Profile } {
  const s3 = sourceProfile(f, ld);
  return { s3, variantS3: variantProfile(f, s3, ld) };
}

function sourceProfile(f: Fields, ld: Ledger): S3Profile {
  const id = f.awsAccessKeyId;
  const secret = f.awsSecretAccessKey;
  const token = f.awsSessionToken;
  const region = f.awsRegion ?? f.awsDefaultRegion;

  let credentials: S3Credentials | undefined;
  if (id !== undefined && secret !== undefined) {
    if (region === undefined) {
      ld.fail(
        'awsRegion',
        'AWS_REGION (or AWS_DEFAULT_REGION) must be set when AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are: the region is part of every signature',
      );
    } else {
      credentials = { accessKeyId: id, secretAccessKey: secret, sessionToken: token };
    }
  } else if (id !== undefined || secret !== undefined) {
    const missing = id === undefined ? 'awsAccessKeyId' : 'awsSecretAccessKey';
    ld.fail(
      missing,
      `AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (one cannot sign without the other); ${ld.nameOf(missing)} is missing`,
    );
  } else if (token !== undefined) {
    ld.fail(
      'awsSessionToken',
      'AWS_SESSION_TOKEN must only be set together with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: a session token signs nothing on its own',
    );
  }
  return {
    endpoint: f.s3Endpoint,
    addressing: f.s3Addressing,
    caBundle: f.s3CaBundle,
    region,
    credentials,
  };
}

function variantProfile(f: Fields, source: S3Profile, ld: Ledger): S3Profile {
  const group = VARIANT_IDENTITY_FIELDS;
  const names = group.map((field) => ld.nameOf(field));
  const missing = group.filter((field) => f[field] === undefined);
  const token = f.variantS3SessionToken;

  let credentials = source.credentials;
  let region = source.region;
  if (missing.length === 0) {
    credentials = {
      accessKeyId: f.variantS3AccessKeyId!,
      secretAccessKey: f.variantS3SecretAccessKey!,
      sessionToken: token,
    };
    region = f.variantS3Region;
  } else if (missing.length < group.length) {
    const set = group.filter((field) => f[field] !== undefined).map((x) => ld.nameOf(x));
    ld.fail(
      missing[0]!,
      `${names.join(', ')} are all or nothing: ${set.join(', ')} ${set.length === 1 ? 'is' : 'are'} set, so ${missing.map((x) => ld.nameOf(x)).join(' and ')} must be set too`,
    );
  } else if (token !== undefined) {
    ld.fail(
      'variantS3SessionToken',
      `AP_VARIANT_S3_SESSION_TOKEN needs the variant store's own identity: set ${names.join(', ')} as well (a token is never combined with the AWS_* identity)`,
    );
  }
  return {
    endpoint: f.variantS3Endpoint ?? source.endpoint,
    addressing: f.variantS3Addressing,
    caBundle: f.variantS3CaBundle ?? source.caBundle,
    region,
    credentials,
  };
}
