/**
 * Random environments for `loadConfig`, and the verdict on what it did with one.
 *
 * ## Invariants (what `judgeConfig` checks)
 * - **Config or ConfigError, nothing else**: `loadConfig` returns a Config, or throws a
 *   `ConfigError` (`code: 'ERR_CONFIG'`) whose `problems` list is non-empty; any other throw is
 *   a violation.
 * - **Every problem names a published variable** (`CONFIG_VARIABLES`), and its message names it.
 * - **No secret is echoed**: a key, salt, secret key or session token value never appears in the
 *   error's message.
 * - **A loaded Config is coherent**: positive slots, a ready threshold within the queue, frozen.
 *
 * ## Races
 * None. Filesystem claims stay inside the caller's scratch directory: a `file://` store value
 * is only ever generated under it, so fuzzing as root cannot create directories elsewhere.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../../src/config/index.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';

const NAMES: readonly string[] = CONFIG_VARIABLES.map((v) => v.name);
const SECRET_NAMES = new Set([
  'AP_KEY',
  'AP_SALT',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AP_VARIANT_S3_SECRET_ACCESS_KEY',
  'AP_VARIANT_S3_SESSION_TOKEN',
]);
/** A secret shorter than this could appear in a message by coincidence (`1`, `ab`). */
const MIN_CHECKED_SECRET_CHARS = 8;
const MAX_VARIABLES_PER_ENV = 6; // more and nearly every environment is refused

const NUMBERS = [
  '1',
  '2',
  '0',
  '32',
  '007',
  ' 8 ',
  '1.5',
  '-1',
  '+5',
  '1e3',
  '1_000',
  '12kb',
  '99999999999999999999',
  '2147483',
  '65535',
  '65536',
];
const BOOLEANS = ['1', '0', 'true', 'FALSE', 'yes', 'off', 'On', 'maybe', '2'];

const ffmpeg = resolveFfmpeg({ env: process.env }).path;

function pool(name: string, scratch: string): string[] {
  if (name === 'AP_KEY') {
    return ['ab'.repeat(32), 'AB'.repeat(40), 'ab'.repeat(31), 'abc', 'SeCrEtKeyNotHex0123456789'];
  }
  if (name === 'AP_SALT') return ['', '00', 'abcd', 'SeCrEtSaltNotHex', 'a'];
  if (SECRET_NAMES.has(name)) return ['SeCrEtValue0123456789', 'SeCrEt-with spaces-42'];
  if (name.endsWith('_ACCESS_KEY_ID')) return ['AKIAEXAMPLE', ''];
  if (name.endsWith('REGION')) return ['us-east-1', 'eu-west-3', ' '];
  if (name === 'AP_LOCAL_ROOT') {
    return [
      scratch,
      join(scratch, 'root'),
      '/',
      '~',
      'relative/dir',
      '/nonexistent/x',
      join(scratch, 'file'),
    ];
  }
  if (name === 'AP_VARIANT_STORE') {
    return [
      `file://${join(scratch, 'store')}`,
      `file://${join(scratch, 'file')}`,
      'file://relative/x',
      'file://host/x',
      `file://${scratch}?x`,
      's3://bucket',
      's3://',
      's3://B',
      's3://user:pw@bucket',
      'ftp://x',
    ];
  }
  if (name.endsWith('CA_BUNDLE')) return [join(scratch, 'file'), '/nonexistent', scratch];
  if (name.endsWith('FFMPEG_PATH') || name.endsWith('FFPROBE_PATH')) {
    return [ffmpeg, join(scratch, 'file'), 'ffmpeg', '/nonexistent/ffmpeg', scratch];
  }
  if (name === 'AP_SERVE_MODE') return ['redirect', 'proxy', 'Proxy', 'hybrid'];
  if (name === 'AP_LOG_LEVEL') return ['debug', 'info', 'warning', 'error', 'warn', 'TRACE'];
  if (name === 'AP_METRICS_BIND') return ['127.0.0.1', '::1', '0.0.0.0', 'localhost', '999.1.1.1'];
  if (name === 'AP_ALLOW_ORIGIN') {
    return ['*', 'https://a.example', 'https://a.example/', 'HTTPS://A.EXAMPLE', 'http://a:80'];
  }
  if (name.endsWith('ENDPOINT') || name.endsWith('_URL')) {
    return [
      'http://minio:9000',
      'http://minio:9000/',
      'https://x.example/path',
      'ftp://x',
      'http://u:p@x',
      'redis://127.0.0.1:6379',
      'not a url',
    ];
  }
  if (name.endsWith('ADDRESSING')) return ['virtual', 'path', 'Path'];
  if (name === 'AP_ALLOW_INSECURE' || name === 'AP_WAITING_ROOM' || name === 'AP_COOKIE_SECURE') {
    return BOOLEANS;
  }
  if (name === 'AP_SOURCE_ALLOWLIST') return ['a.example, ,b.example', ',,', 'bucket', '*'];
  return NUMBERS;
}

/** Files and directories the pools name; created once per scratch directory. */
function prepare(scratch: string): void {
  if (existsSync(join(scratch, 'file'))) return;
  mkdirSync(join(scratch, 'root'), { recursive: true });
  writeFileSync(join(scratch, 'file'), 'not a CA bundle, not an executable\n');
  chmodSync(join(scratch, 'file'), 0o644);
}

/** Scrubs a generated value that could make a `file://` store outside the scratch directory. */
function confine(name: string, value: string, scratch: string): string {
  if (name !== 'AP_VARIANT_STORE') return value;
  const v = value.trim().toLowerCase();
  return v.startsWith('file:') && !value.includes(scratch) ? 'file://relative/x' : value;
}

/** An environment: a few published variables (rarely an unknown one), each valid-ish or junk. */
export function configEnvArb(scratchDir: () => string): fc.Arbitrary<Record<string, string>> {
  return fc
    .uniqueArray(fc.constantFrom(...NAMES, 'AP_NOT_A_VARIABLE'), {
      maxLength: MAX_VARIABLES_PER_ENV,
    })
    .chain((names) => {
      const scratch = scratchDir();
      prepare(scratch);
      return fc
        .tuple(
          ...names.map((name) =>
            fc.oneof(
              { weight: 5, arbitrary: fc.constantFrom(...pool(name, scratch)) },
              { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
              { weight: 1, arbitrary: fc.constantFrom('', ' ', '\t\n') },
            ),
          ),
        )
        .map((values) =>
          Object.fromEntries(names.map((n, i) => [n, confine(n, values[i]!, scratch)])),
        );
    });
}

export type ConfigVerdict = { outcome: 'config' | 'refused'; problems: string[] };

/** Runs `loadConfig` on `env` and lists every broken invariant (empty = fine). */
export function judgeConfig(env: Record<string, string>): ConfigVerdict {
  const problems: string[] = [];
  try {
    const c = loadConfig(env, { cpuCount: 2 });
    if (!Number.isSafeInteger(c.maxConcurrency) || c.maxConcurrency < 1) {
      problems.push(`maxConcurrency ${c.maxConcurrency}`);
    }
    if (c.readyQueueThreshold > c.queueSize) problems.push('ready threshold above the queue');
    if (!Object.isFrozen(c)) problems.push('config not frozen');
    return { outcome: 'config', problems };
  } catch (error) {
    if (!(error instanceof ConfigError) || error.code !== 'ERR_CONFIG') {
      return { outcome: 'refused', problems: [`threw something else: ${String(error)}`] };
    }
    if (error.problems.length === 0) problems.push('ConfigError with no problems');
    for (const p of error.problems) {
      if (!NAMES.includes(p.variable)) problems.push(`problem against unknown ${p.variable}`);
      if (!p.message.includes(p.variable)) problems.push(`message does not name ${p.variable}`);
    }
    for (const [name, value] of Object.entries(env)) {
      const v = value.trim();
      if (
        SECRET_NAMES.has(name) &&
        v.length >= MIN_CHECKED_SECRET_CHARS &&
        error.message.includes(v)
      ) {
        problems.push(`${name}'s value echoed in the error`);
      }
    }
    return { outcome: 'refused', problems };
  }
}
