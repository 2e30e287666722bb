#!/usr/bin/env node
// Creates the variant store's bucket if it does not exist, for a fresh S3-compatible server
// (compose.yaml runs it once before the proxies start: the proxy refuses to boot on a store it
// cannot write). It reads the proxy's own variables: the bucket from AP_VARIANT_STORE
// (s3://bucket), the endpoint from AP_VARIANT_S3_ENDPOINT or AP_S3_ENDPOINT, the identity from
// the AP_VARIANT_S3_* group or the AWS_* pair, with path-style addressing. It retries while the
// server is starting, for up to S3_BUCKET_WAIT_S seconds (default 60), then exits 1.
// On AWS proper, create the bucket with your usual tooling instead.
import { CreateBucketCommand, HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';

const env = process.env;
const store = env.AP_VARIANT_STORE?.trim() ?? '';
const match = /^s3:\/\/([^/]+)\/?$/.exec(store);
if (!match) {
  process.stderr.write(`s3-bucket: AP_VARIANT_STORE must be s3://bucket, got "${store}"\n`);
  process.exit(2);
}
const bucket = match[1];
const endpoint = env.AP_VARIANT_S3_ENDPOINT?.trim() || env.AP_S3_ENDPOINT?.trim() || undefined;
const own = env.AP_VARIANT_S3_ACCESS_KEY_ID?.trim();
const credentials = own
  ? {
      accessKeyId: own,
      secretAccessKey: env.AP_VARIANT_S3_SECRET_ACCESS_KEY ?? '',
      ...(env.AP_VARIANT_S3_SESSION_TOKEN ? { sessionToken: env.AP_VARIANT_S3_SESSION_TOKEN } : {}),
    }
  : env.AWS_ACCESS_KEY_ID
    ? {
        accessKeyId: env.AWS_ACCESS_KEY_ID,
        secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? '',
        ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
      }
    : undefined;
const region =
  (own ? env.AP_VARIANT_S3_REGION : undefined) ||
  env.AWS_REGION ||
  env.AWS_DEFAULT_REGION ||
  'us-east-1';
const client = new S3Client({
  region,
  ...(endpoint ? { endpoint } : {}),
  ...(credentials ? { credentials } : {}),
  forcePathStyle: true,
});

const deadline = Date.now() + Number(env.S3_BUCKET_WAIT_S || 60) * 1000;
let last = '';
for (;;) {
  try {
    await client.send(new HeadBucketCommand({ Bucket: bucket }));
    process.stdout.write(`s3-bucket: ${bucket} exists\n`);
    break;
  } catch (error) {
    const status = error?.$metadata?.httpStatusCode;
    if (status === 404) {
      try {
        await client.send(new CreateBucketCommand({ Bucket: bucket }));
        process.stdout.write(`s3-bucket: created ${bucket}\n`);
        break;
      } catch (createError) {
        if (createError?.name === 'BucketAlreadyOwnedByYou') break;
        last = `${createError?.name ?? 'error'}: ${createError?.message ?? createError}`;
      }
    } else if (status === 403) {
      process.stderr.write(`s3-bucket: access to ${bucket} denied: check the credentials\n`);
      process.exit(1);
    } else {
      last = `${error?.name ?? 'error'}: ${error?.message ?? error}`; // not up yet
    }
  }
  if (Date.now() > deadline) {
    process.stderr.write(`s3-bucket: gave up on ${bucket} at ${endpoint ?? 'AWS'}: ${last}\n`);
    process.exit(1);
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000));
}
client.destroy();
