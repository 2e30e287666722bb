// Proves that the published variable list, the code and the operator documentation agree:
// docs/configuration.md is exactly what renderConfigDocs() generates (and stays as the formatter
// leaves it), and loadConfig reads every variable in CONFIG_VARIABLES and no other, on the happy
// path and the failing one alike (every read is recorded through a Proxy over the environment).
// Regenerate the document with: npx tsx scripts/gen-config-docs.ts
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONFIG_VARIABLES,
  ConfigError,
  loadConfig,
  renderConfigDocs,
} from '../src/config/index.js';

const DOC_PATH = join(process.cwd(), 'docs/configuration.md');
const names = CONFIG_VARIABLES.map((v) => v.name);

/** An environment that records every property read and forbids enumeration or `in` checks. */
function recordingEnv(values: Record<string, string>): {
  env: NodeJS.ProcessEnv;
  reads: Set<string>;
} {
  const reads = new Set<string>();
  const forbid = (what: string) => () => {
    throw new Error(`loadConfig must read variables by name only, not ${what}`);
  };
  const env = new Proxy(values, {
    get(target, prop) {
      if (typeof prop === 'string') reads.add(prop);
      return Reflect.get(target, prop);
    },
    has: forbid('with `in`'),
    ownKeys: forbid('by enumerating the environment'),
    getOwnPropertyDescriptor: forbid('through property descriptors'),
  });
  return { env, reads };
}

describe('docs/configuration.md', () => {
  it('is exactly the generated document (run `npx tsx scripts/gen-config-docs.ts` to refresh)', () => {
    expect(readFileSync(DOC_PATH, 'utf8')).toBe(renderConfigDocs());
  });

  it('lists every variable once, as a table row, with its default and rule', () => {
    const doc = renderConfigDocs();
    for (const v of CONFIG_VARIABLES) {
      const rows = doc.split('\n').filter((l) => l.startsWith(`| \`${v.name}\` `));
      expect(rows, v.name).toHaveLength(1);
      expect(rows[0]).toContain(v.default.replaceAll('|', '\\|'));
      expect(rows[0]).toContain(v.rule.replaceAll('|', '\\|'));
    }
  });

  it('is left unchanged by the repository formatter, so lint and this test cannot fight', () => {
    const biome = join(process.cwd(), 'node_modules/.bin/biome');
    const out = spawnSync(biome, ['format', '--stdin-file-path=docs/configuration.md'], {
      input: renderConfigDocs(),
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toBe(renderConfigDocs());
  });
});

describe('CONFIG_VARIABLES against what loadConfig reads', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ap-config-docs-'));
    mkdirSync(join(dir, 'store'));
    writeFileSync(join(dir, 'ca.pem'), 'pem');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has unique names, all AP_*, AWS_* or PORT', () => {
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n).toMatch(/^(AP_[A-Z0-9_]+|AWS_[A-Z_]+|PORT)$/);
  });

  it('an empty environment: every listed variable is read, and nothing else', () => {
    const { env, reads } = recordingEnv({});
    loadConfig(env, { cpuCount: 2 });
    expect([...reads].sort()).toEqual([...names].sort());
  });

  it('every variable set to a valid value: the same reads', () => {
    const { env, reads } = recordingEnv({
      AP_PORT: '4001',
      PORT: '4002',
      AP_KEY: 'ab'.repeat(32),
      AP_SALT: '00ff',
      AP_ALLOW_INSECURE: 'no',
      AP_SOURCE_ALLOWLIST: 'a,b',
      AP_LOCAL_ROOT: dir,
      AP_VARIANT_STORE: 's3://variants',
      AP_VARIANT_STORE_MAX_BYTES: '0',
      AP_SERVE_MODE: 'redirect',
      AP_PRESIGN_TTL: '60',
      AP_MAX_CONCURRENCY: '2',
      AP_MAX_PROBE_CONCURRENCY: '8',
      AP_QUEUE_SIZE: '4',
      AP_READY_QUEUE_THRESHOLD: '2',
      AP_MAX_SRC_BYTES: '1000',
      AP_MAX_VARIANT_BYTES: '1000',
      AP_RENDER_TIMEOUT: '30',
      AP_PROBE_TIMEOUT: '5',
      AP_LOG_LEVEL: 'debug',
      AP_METRICS_BIND: '::1',
      AP_METRICS_PORT: '9000',
      AP_ALLOW_ORIGIN: 'https://app.example.com',
      AP_S3_ENDPOINT: 'http://minio:9000',
      AP_S3_ADDRESSING: 'path',
      AP_S3_CA_BUNDLE: join(dir, 'ca.pem'),
      AP_VARIANT_S3_ENDPOINT: 'http://store:9000',
      AP_VARIANT_S3_ADDRESSING: 'path',
      AP_VARIANT_S3_CA_BUNDLE: join(dir, 'ca.pem'),
      AP_VARIANT_S3_ACCESS_KEY_ID: 'id',
      AP_VARIANT_S3_SECRET_ACCESS_KEY: 'secret',
      AP_VARIANT_S3_REGION: 'us-east-1',
      AP_VARIANT_S3_SESSION_TOKEN: 'token',
      AP_FFMPEG_PATH: process.execPath,
      AP_FFPROBE_PATH: process.execPath,
      AWS_ACCESS_KEY_ID: 'id',
      AWS_SECRET_ACCESS_KEY: 'secret',
      AWS_REGION: 'eu-central-1',
      AWS_DEFAULT_REGION: 'eu-west-1',
      AWS_SESSION_TOKEN: 'token',
    });
    const cfg = loadConfig(env, { cpuCount: 2 });
    expect(cfg.variantS3.credentials?.sessionToken).toBe('token');
    expect([...reads].sort()).toEqual([...names].sort());
  });

  it('every variable set to garbage: loadConfig still reads all of them before failing', () => {
    const values = Object.fromEntries(names.map((n) => [n, '%%garbage%%']));
    const { env, reads } = recordingEnv(values);
    expect(() => loadConfig(env, { cpuCount: 2 })).toThrow(ConfigError);
    expect([...reads].sort()).toEqual([...names].sort());
  });
});
