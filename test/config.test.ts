// Proves that loadConfig turns the environment into the documented Config: every variable's
// default, the values it accepts and the ones it refuses (each refusal naming the variable and
// the rule, never echoing a secret), the rules that tie variables together, that every problem
// is reported at once, and that configOrExit exits with code 2 (in-process with an injected exit,
// and for real in a child process). Also the providers actors read the config through.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, hostname, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONFIG_EXIT_CODE,
  CONFIG_VARIABLES,
  type Config,
  ConfigError,
  type ConfigFs,
  configOrExit,
  configWarnings,
  defaultReadyQueueThreshold,
  LOG_FORMATS,
  LOG_LEVELS,
  loadConfig,
  MAX_PRESIGN_TTL_S,
  MAX_TIMEOUT_S,
  MIN_VARIANT_STORE_MAX_BYTES,
  mutableConfig,
  nodeConfigFs,
  SERVE_MODES,
  staticConfig,
  unrecognisedVariables,
} from '../src/config/index.js';

type Env = Record<string, string | undefined>;

const CPUS = 3;
const load = (env: Env, fs?: ConfigFs) => loadConfig(env, { cpuCount: CPUS, fs });

/** The ConfigError a load must throw. */
function configError(env: Env, fs?: ConfigFs): ConfigError {
  try {
    load(env, fs);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

/** The single problem message a load must report. */
function problem(env: Env, fs?: ConfigFs): string {
  const err = configError(env, fs);
  expect(err.problems.map((p) => p.message)).toHaveLength(1);
  return err.problems[0]!.message;
}

const AWS = {
  AWS_ACCESS_KEY_ID: 'AKIDSOURCE',
  AWS_SECRET_ACCESS_KEY: 'source-secret-value',
  AWS_REGION: 'eu-central-1',
};
const VARIANT_CREDS = {
  AP_VARIANT_S3_ACCESS_KEY_ID: 'AKIDSTORE',
  AP_VARIANT_S3_SECRET_ACCESS_KEY: 'store-secret-value',
  AP_VARIANT_S3_REGION: 'us-east-1',
};
const KEY_HEX = 'aB'.repeat(32);

let dir: string;
let storeDir: string;
let bundle: string;
let exe: string;
let notExe: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ap-config-'));
  storeDir = join(dir, 'store');
  mkdirSync(storeDir);
  bundle = join(dir, 'ca.pem');
  writeFileSync(bundle, '-----BEGIN CERTIFICATE-----\n');
  exe = join(dir, 'fake-ffmpeg');
  writeFileSync(exe, '#!/bin/sh\n');
  chmodSync(exe, 0o755);
  notExe = join(dir, 'plain-file');
  writeFileSync(notExe, 'x');
  chmodSync(notExe, 0o644);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('defaults', () => {
  const expected: Config = {
    port: 4000,
    bind: undefined,
    key: undefined,
    salt: undefined,
    rotatedKeys: [],
    allowInsecure: false,
    presets: [],
    onlyPresets: false,
    sourceAllowlist: [],
    localRoot: undefined,
    variantStore: undefined,
    variantStoreMaxBytes: 0,
    maxConcurrency: CPUS,
    maxProbeConcurrency: 4 * CPUS,
    queueSize: 32,
    readyQueueThreshold: 16,
    maxSrcBytes: 2_000_000_000,
    maxVariantBytes: 2_000_000_000,
    renderTimeoutS: 300,
    probeTimeoutS: 10,
    maxDurationS: 21_600,
    sourceAllowPrivate: false,
    serveMode: 'redirect',
    presignTtlS: 300,
    logLevel: 'info',
    logFormat: 'auto',
    accessLog: true,
    metricsBind: '127.0.0.1',
    metricsPort: 9568,
    allowOrigin: undefined,
    flightRecorder: 0,
    flightRecorderDir: undefined,
    s3: {
      endpoint: undefined,
      addressing: 'virtual',
      caBundle: undefined,
      region: undefined,
      credentials: undefined,
    },
    variantS3: {
      endpoint: undefined,
      addressing: 'virtual',
      caBundle: undefined,
      region: undefined,
      credentials: undefined,
    },
    maxRendersPerWorkerPool: 500,
    maxProbesPerWorkerPool: 500,
    waitingRoom: false,
    waitingRoomReservationS: 30,
    waitingRoomHeartbeatS: 30,
    waitingRoomMaxLength: 100,
    waitingRoomSlots: 1, // ⌊3 / 2⌋
    warmMaxEntries: 100,
    warmMaxPending: 1000,
    warmAdmitted: 19, // 3 + ⌊32 / 2⌋
    warmAttempts: 6,
    warmBackoffMaxS: 30,
    prefetchNextTrim: false,
    prefetchHlsSegments: 1,
    cookieSecure: false,
    backlogBudgetBytes: 256 * 1024 * 1024,
    hitCacheBytes: 64 * 1024 * 1024,
    ffmpegNice: 10,
    ffmpegPath: undefined,
    ffprobePath: undefined,
    clusterRedisUrl: undefined,
    clusterNodeId: `${hostname()}:4000`,
    clusterAdvertiseUrl: undefined,
    clusterNodeLabel: undefined,
    clusterLeaseMs: 10_000,
  };

  it('an empty environment yields every documented default', () => {
    expect(load({})).toStrictEqual(expected);
  });

  it.each(CONFIG_VARIABLES.map((v) => v.name))(
    '%s empty or all-whitespace counts as unset',
    (name) => {
      expect(load({ [name]: '' })).toStrictEqual(expected);
      expect(load({ [name]: ' \t\n ' })).toStrictEqual(expected);
    },
  );

  it('AP_MAX_CONCURRENCY defaults to the injected CPU count, else the real one', () => {
    expect(loadConfig({}, { cpuCount: 7 }).maxConcurrency).toBe(7);
    expect(loadConfig({}).maxConcurrency).toBeGreaterThanOrEqual(1);
  });

  it('the waiting room reserves at most AP_MAX_CONCURRENCY − 1 slots, half by default', () => {
    expect(load({ AP_MAX_CONCURRENCY: '8' }).waitingRoomSlots).toBe(4);
    expect(load({ AP_MAX_CONCURRENCY: '2', AP_WAITING_ROOM: '1' }).waitingRoomSlots).toBe(1);
    expect(load({ AP_MAX_CONCURRENCY: '8', AP_WAITING_ROOM_SLOTS: '7' }).waitingRoomSlots).toBe(7);
    expect(() =>
      load({ AP_MAX_CONCURRENCY: '8', AP_WAITING_ROOM: '1', AP_WAITING_ROOM_SLOTS: '8' }),
    ).toThrow(/AP_WAITING_ROOM_SLOTS \(8\) must be at most AP_MAX_CONCURRENCY − 1 \(7\)/);
    expect(() => load({ AP_MAX_CONCURRENCY: '1', AP_WAITING_ROOM: '1' })).toThrow(
      /AP_WAITING_ROOM needs AP_MAX_CONCURRENCY ≥ 2/,
    );
    expect(() => load({ AP_WAITING_ROOM_SLOTS: '0' })).toThrow(/AP_WAITING_ROOM_SLOTS must be/);
    expect(load({}).waitingRoom).toBe(false); // one CPU's worth, room off: nothing to check
    expect(loadConfig({}, { cpuCount: 1 }).waitingRoomSlots).toBe(0);
  });

  it('AP_COOKIE_SECURE is a boolean, off by default', () => {
    expect(load({ AP_MAX_CONCURRENCY: '2', AP_QUEUE_SIZE: '6' }).warmAdmitted).toBe(5);
    expect(load({ AP_WARM_ADMITTED: '40' }).warmAdmitted).toBe(40);
    expect(load({}).cookieSecure).toBe(false);
    expect(load({ AP_COOKIE_SECURE: 'on' }).cookieSecure).toBe(true);
    expect(() => load({ AP_COOKIE_SECURE: 'maybe' })).toThrow(/AP_COOKIE_SECURE must be/);
  });

  it.each([0, -1, 1.5, Number.NaN])('a cpuCount of %s is a programmer error (RangeError)', (n) => {
    expect(() => loadConfig({}, { cpuCount: n })).toThrow(RangeError);
  });

  it('the config is frozen all the way down (Buffers excepted)', () => {
    const c = load({ ...AWS, AP_SOURCE_ALLOWLIST: 'a,b', AP_S3_ENDPOINT: 'http://minio:9000' });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.sourceAllowlist)).toBe(true);
    expect(Object.isFrozen(c.s3)).toBe(true);
    expect(Object.isFrozen(c.s3.endpoint)).toBe(true);
    expect(Object.isFrozen(c.s3.credentials)).toBe(true);
    expect(() => {
      (c as { port: number }).port = 1;
    }).toThrow(TypeError);
  });
});

describe('integers', () => {
  const fields = {
    AP_PORT: 'port',
    PORT: 'port',
    AP_MAX_CONCURRENCY: 'maxConcurrency',
    AP_MAX_PROBE_CONCURRENCY: 'maxProbeConcurrency',
    AP_QUEUE_SIZE: 'queueSize',
    AP_READY_QUEUE_THRESHOLD: 'readyQueueThreshold',
    AP_MAX_SRC_BYTES: 'maxSrcBytes',
    AP_MAX_VARIANT_BYTES: 'maxVariantBytes',
    AP_RENDER_TIMEOUT: 'renderTimeoutS',
    AP_PROBE_TIMEOUT: 'probeTimeoutS',
    AP_PRESIGN_TTL: 'presignTtlS',
    AP_METRICS_PORT: 'metricsPort',
  } as const;
  const names = Object.keys(fields) as (keyof typeof fields)[];
  const ruleOf = (name: string) => CONFIG_VARIABLES.find((v) => v.name === name)!.rule;

  it.each(names)(
    '%s parses digits, tolerating surrounding whitespace and leading zeros',
    (name) => {
      expect(load({ [name]: ' 12 ' })[fields[name]]).toBe(12);
      expect(load({ [name]: '007' })[fields[name]]).toBe(7);
    },
  );

  const garbage = [
    '-1',
    '1.5',
    '12kb',
    '3 2',
    '+5',
    '1e3',
    '1_000',
    '0x10',
    'abc',
    '9007199254740993',
  ];
  it.each(names)(
    '%s refuses non-integers, signs and separators, naming itself and the rule',
    (name) => {
      for (const value of garbage) {
        const message = problem({ [name]: value });
        expect(message).toContain(name);
        expect(message).toContain(ruleOf(name).split(';')[0]!.split(',')[0]);
        expect(message).toContain(JSON.stringify(value));
      }
    },
  );

  const positive = names.filter((n) => n !== 'AP_QUEUE_SIZE' && n !== 'AP_READY_QUEUE_THRESHOLD');
  it.each(positive)('%s refuses 0', (name) => {
    expect(problem({ [name]: '0' })).toContain(name);
  });

  it.each(['AP_QUEUE_SIZE', 'AP_READY_QUEUE_THRESHOLD'])('%s accepts 0', (name) => {
    const c = load({ [name]: '0' });
    expect(c[fields[name as keyof typeof fields]]).toBe(0);
  });

  it.each([
    ['AP_PORT', 65_535],
    ['PORT', 65_535],
    ['AP_METRICS_PORT', 65_535],
    ['AP_RENDER_TIMEOUT', MAX_TIMEOUT_S],
    ['AP_PROBE_TIMEOUT', MAX_TIMEOUT_S],
    ['AP_PRESIGN_TTL', MAX_PRESIGN_TTL_S],
  ] as const)('%s accepts up to %i and refuses one more', (name, max) => {
    expect(load({ [name]: String(max) })[fields[name]]).toBe(max);
    expect(problem({ [name]: String(max + 1) })).toContain(name);
  });

  it('AP_FFMPEG_NICE takes 0 to 19, the niceness Linux knows', () => {
    expect(load({ AP_FFMPEG_NICE: '0' }).ffmpegNice).toBe(0);
    expect(load({ AP_FFMPEG_NICE: '19' }).ffmpegNice).toBe(19);
    for (const value of ['20', '-5', '1.5', 'low']) {
      const message = problem({ AP_FFMPEG_NICE: value });
      expect(message).toContain('AP_FFMPEG_NICE');
      expect(message).toContain('an integer from 0 to 19');
    }
  });

  it('the timeout ceiling keeps every derived deadline (+3 s) inside a Node timer', () => {
    expect((MAX_TIMEOUT_S + 3) * 1000).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it('byte limits go beyond 32 bits', () => {
    expect(load({ AP_MAX_SRC_BYTES: '9000000000' }).maxSrcBytes).toBe(9_000_000_000);
  });
});

describe('listener port', () => {
  it('AP_PORT wins over PORT, PORT over the default', () => {
    expect(load({ AP_PORT: '4001', PORT: '13042' }).port).toBe(4001);
    expect(load({ PORT: '13042' }).port).toBe(13042);
  });

  it('an invalid PORT is reported as PORT, and ignored when AP_PORT is set', () => {
    expect(problem({ PORT: 'abc' })).toMatch(/^PORT must be/);
    expect(load({ AP_PORT: '4001', PORT: 'abc' }).port).toBe(4001);
  });
});

describe('booleans', () => {
  it.each(['1', 'true', 'yes', 'on', 'TRUE', 'Yes', 'On'])('AP_ALLOW_INSECURE=%s is true', (v) => {
    expect(load({ AP_ALLOW_INSECURE: v }).allowInsecure).toBe(true);
  });
  it.each(['0', 'false', 'no', 'off', 'FALSE', 'No', 'oFF'])(
    'AP_ALLOW_INSECURE=%s is false',
    (v) => {
      expect(load({ AP_ALLOW_INSECURE: v }).allowInsecure).toBe(false);
    },
  );
  it.each(['maybe', '2', 'y', 'enabled'])(
    'AP_ALLOW_INSECURE=%s is refused listing the words',
    (v) => {
      const message = problem({ AP_ALLOW_INSECURE: v });
      expect(message).toContain('AP_ALLOW_INSECURE');
      for (const word of ['1', 'true', 'yes', 'on', '0', 'false', 'no', 'off']) {
        expect(message).toContain(word);
      }
    },
  );
});

describe('enumerations', () => {
  const table = [
    ['AP_SERVE_MODE', 'serveMode', SERVE_MODES],
    ['AP_LOG_LEVEL', 'logLevel', LOG_LEVELS],
    ['AP_LOG_FORMAT', 'logFormat', LOG_FORMATS],
  ] as const;

  it.each(table)('%s accepts each allowed value', (name, field, allowed) => {
    for (const v of allowed) expect(load({ [name]: v })[field]).toBe(v);
  });

  it.each(table)(
    '%s refuses others (case-sensitive), listing every allowed value',
    (name, _f, allowed) => {
      for (const bad of ['banana', allowed[0].toUpperCase(), 'warn']) {
        const message = problem({ [name]: bad });
        expect(message).toContain(name);
        for (const v of allowed) expect(message).toContain(`\`${v}\``);
      }
    },
  );

  it.each(['AP_S3_ADDRESSING', 'AP_VARIANT_S3_ADDRESSING'])(
    '%s refuses vhost, listing both styles',
    (name) => {
      const message = problem({ [name]: 'vhost' });
      expect(message).toContain(name);
      expect(message).toContain('`virtual`');
      expect(message).toContain('`path`');
    },
  );
});

describe('AP_KEY and AP_SALT', () => {
  it('decode hex of either case to bytes', () => {
    const c = load({ AP_KEY: KEY_HEX, AP_SALT: '00FF' });
    expect(c.key).toEqual(Buffer.alloc(32, 0xab));
    expect(c.salt).toEqual(Buffer.from([0x00, 0xff]));
  });

  it.each([
    ['AP_KEY', 'ab'.repeat(31), '31 bytes'],
    ['AP_KEY', `${KEY_HEX}a`, 'odd number'],
    ['AP_KEY', `${'zz'}${KEY_HEX}`, 'outside 0-9a-fA-F'],
    ['AP_SALT', 'abc', 'odd number'],
    ['AP_SALT', 'not-hex!', 'outside 0-9a-fA-F'],
  ])('%s=%s is refused (%s) without echoing the value', (name, value, why) => {
    const message = problem({ [name]: value });
    expect(message).toContain(name);
    expect(message).toContain('hex');
    expect(message).toContain(why);
    expect(message).not.toContain(value);
  });

  it('a short key states the 32-byte minimum', () => {
    expect(problem({ AP_KEY: 'deadBEEF' })).toContain('at least 32 bytes');
  });
});

describe('AP_KEY and AP_SALT lists (key rotation)', () => {
  const KEY2 = 'cd'.repeat(32);
  const KEY3 = 'ef'.repeat(40);

  it('pair by position: the first pair signs, the others are rotated pairs that verify', () => {
    const c = load({ AP_KEY: `${KEY_HEX}, ${KEY2} ,${KEY3}`, AP_SALT: '00ff,01,0203' });
    expect(c.key).toEqual(Buffer.alloc(32, 0xab));
    expect(c.salt).toEqual(Buffer.from([0x00, 0xff]));
    expect(c.rotatedKeys).toEqual([
      { key: Buffer.alloc(32, 0xcd), salt: Buffer.from([0x01]) },
      { key: Buffer.alloc(40, 0xef), salt: Buffer.from([0x02, 0x03]) },
    ]);
  });

  it('a single value reads exactly as before, with no rotated pair', () => {
    const c = load({ AP_KEY: KEY_HEX, AP_SALT: '00ff' });
    expect(c.key).toEqual(Buffer.alloc(32, 0xab));
    expect(c.rotatedKeys).toEqual([]);
  });

  it('unequal counts are refused at boot, naming both variables and both counts', () => {
    const message = problem({ AP_KEY: `${KEY_HEX},${KEY2}`, AP_SALT: '00ff' });
    expect(message).toContain('AP_SALT has 1 value and AP_KEY has 2');
    expect(message).toContain('pair by position');
    expect(configError({ AP_KEY: KEY_HEX, AP_SALT: '00,01' }).problems[0]!.variable).toBe(
      'AP_SALT',
    );
  });

  it.each([
    ['AP_KEY', `${KEY_HEX},${'ab'.repeat(31)}`, 'entry 2 of 2', 'decodes to 31 bytes'],
    ['AP_KEY', `${KEY_HEX},,${KEY2}`, 'entry 2 of 3', 'is empty'],
    ['AP_KEY', `${KEY_HEX},`, 'entry 2 of 2', 'is empty'],
    ['AP_SALT', '00ff,abc', 'entry 2 of 2', 'odd number'],
    ['AP_SALT', 'zz,00', 'entry 1 of 2', 'outside 0-9a-fA-F'],
  ])('%s=%s is refused (%s: %s) without echoing any value', (name, value, which, why) => {
    const message = problem({ [name]: value });
    expect(message).toContain(`${name} ${which} must be`);
    expect(message).toContain(why);
    for (const part of value.split(',')) if (part !== '') expect(message).not.toContain(part);
  });

  it('with AP_SALT unset, the first key is still loaded and nothing verifies (as before)', () => {
    const c = load({ AP_KEY: `${KEY_HEX},${KEY2}` });
    expect(c.key).toEqual(Buffer.alloc(32, 0xab));
    expect(c.salt).toBeUndefined();
    expect(c.rotatedKeys).toEqual([]);
  });
});

describe('AP_PRESETS and AP_ONLY_PRESETS', () => {
  it('reads name=options entries in order, trimmed, empty entries dropped', () => {
    const c = load({ AP_PRESETS: ' preview = f:mp3/br:64/t:0:30 ,, hq_2=f:opus/br:160 , ' });
    expect(c.presets).toEqual([
      { name: 'preview', options: 'f:mp3/br:64/t:0:30' },
      { name: 'hq_2', options: 'f:opus/br:160' },
    ]);
    expect(c.onlyPresets).toBe(false);
  });

  it.each([
    ['Preview=f:mp3', 'preset name "Preview"'],
    ['a:b=f:mp3', 'preset name "a:b"'],
    [`${'x'.repeat(65)}=f:mp3`, 'must be 1 to 64 characters'],
    ['=f:mp3', 'preset name ""'],
    ['preview', 'has no options'],
    ['preview=', 'has no options'],
    ['a=f:mp3,a=f:opus', 'defined twice'],
    ['a=f:mp3/dl:my file', 'whitespace'],
  ])('%s is refused (%s)', (value, why) => {
    const message = problem({ AP_PRESETS: value });
    expect(message).toContain('AP_PRESETS');
    expect(message).toContain(why);
  });

  it('AP_ONLY_PRESETS needs AP_PRESETS', () => {
    expect(load({ AP_ONLY_PRESETS: '1', AP_PRESETS: 'a=f:mp3' }).onlyPresets).toBe(true);
    const message = problem({ AP_ONLY_PRESETS: '1' });
    expect(message).toContain('AP_ONLY_PRESETS needs AP_PRESETS');
  });
});

describe('AP_SOURCE_ALLOWLIST', () => {
  it('splits on commas, trims entries and drops empty ones', () => {
    expect(
      load({ AP_SOURCE_ALLOWLIST: 'masters, cdn.example.com ,,  ,*.audio.test' }).sourceAllowlist,
    ).toEqual(['masters', 'cdn.example.com', '*.audio.test']);
    expect(load({ AP_SOURCE_ALLOWLIST: ' , ,' }).sourceAllowlist).toEqual([]);
  });
});

describe('AP_LOCAL_ROOT', () => {
  it('an existing directory is kept, expanded to an absolute path', () => {
    expect(load({ AP_LOCAL_ROOT: dir }).localRoot).toBe(dir);
    expect(load({ AP_LOCAL_ROOT: relative(process.cwd(), dir) }).localRoot).toBe(dir);
    expect(load({ AP_LOCAL_ROOT: '~' }).localRoot).toBe(homedir());
  });

  it.each([
    ['/', 'filesystem root'],
    ['/nope/not/a/directory', 'ENOENT'],
  ])('%s is refused (%s)', (value, why) => {
    const message = problem({ AP_LOCAL_ROOT: value });
    expect(message).toContain('AP_LOCAL_ROOT');
    expect(message).toContain(why);
  });

  it('a file is refused as not a directory', () => {
    expect(problem({ AP_LOCAL_ROOT: bundle })).toContain('not a directory');
  });
});

describe('AP_VARIANT_STORE, file://', () => {
  it('an existing writable directory is the store, proved by a probe file that is then removed', () => {
    const created: string[] = [];
    const removed: string[] = [];
    const fs: ConfigFs = {
      ...nodeConfigFs,
      createExclusive: (p, d) => {
        created.push(p);
        nodeConfigFs.createExclusive(p, d);
      },
      unlink: (p) => {
        removed.push(p);
        nodeConfigFs.unlink(p);
      },
    };
    const c = load({ AP_VARIANT_STORE: `file://${storeDir}/`, AP_SERVE_MODE: 'proxy' }, fs);
    expect(c.variantStore).toEqual({ kind: 'file', root: storeDir });
    expect(created).toHaveLength(1);
    expect(created[0]).toMatch(new RegExp(`^${storeDir}/tmp/\\.boot-probe-\\d+-\\d+$`));
    expect(removed).toEqual(created);
    expect(readdirSync(join(storeDir, 'tmp'))).toEqual([]);
  });

  it('file://localhost/ is the local host (RFC 8089), the same as file:///', () => {
    const c = load({ AP_VARIANT_STORE: `file://localhost${storeDir}`, AP_SERVE_MODE: 'proxy' });
    expect(c.variantStore).toEqual({ kind: 'file', root: storeDir });
  });

  it('percent-escapes in the path are decoded', () => {
    const spaced = join(dir, 'with space');
    mkdirSync(spaced, { recursive: true });
    const c = load({ AP_VARIANT_STORE: pathToFileURL(spaced).href, AP_SERVE_MODE: 'proxy' });
    expect(c.variantStore).toEqual({ kind: 'file', root: spaced });
  });

  it.each([
    [(d: string) => `file://${d}?x=1`, 'query or fragment'],
    [(d: string) => `file://${d}#frag`, 'query or fragment'],
    [() => 'file://var/cache', 'three slashes'],
    [() => 'file://cachehost/var/cache', 'three slashes'],
    [() => 'file:///', 'filesystem root'],
    [() => 'file:///nope/not/a/directory', 'existing directory'],
    [() => 'gopher://cache', 'gopher'],
    [() => '/var/cache/audio', 'file:///absolute/dir'],
  ])('%s is refused (%s)', (make, why) => {
    const message = problem({ AP_VARIANT_STORE: make(storeDir), AP_SERVE_MODE: 'proxy' });
    expect(message).toContain('AP_VARIANT_STORE');
    expect(message).toContain(why);
  });

  it.each([
    ['mkdirp', 'EACCES'],
    ['createExclusive', 'EROFS'],
    ['unlink', 'EPERM'],
  ] as const)('a directory whose %s fails (%s) is refused as not writable', (op, code) => {
    const fs: ConfigFs = {
      ...nodeConfigFs,
      [op]: () => {
        throw Object.assign(new Error(code), { code });
      },
    };
    const message = problem({ AP_VARIANT_STORE: `file://${storeDir}`, AP_SERVE_MODE: 'proxy' }, fs);
    expect(message).toContain('AP_VARIANT_STORE');
    expect(message).toContain('writable');
    expect(message).toContain(code);
  });

  it('redirect serving, defaulted or explicit, is refused with a file store, naming both variables', () => {
    for (const env of [{}, { AP_SERVE_MODE: 'redirect' }]) {
      const message = problem({ ...env, AP_VARIANT_STORE: `file://${storeDir}` });
      expect(message).toContain('AP_SERVE_MODE');
      expect(message).toContain('AP_VARIANT_STORE');
      expect(message).toContain('proxy');
    }
    expect(problem({ AP_VARIANT_STORE: `file://${storeDir}` })).toContain('(the default)');
  });

  it('with no store at all, the redirect default is accepted', () => {
    expect(load({}).serveMode).toBe('redirect');
    expect(load({ AP_SERVE_MODE: 'redirect' }).variantStore).toBeUndefined();
  });
});

describe('AP_VARIANT_STORE_MAX_BYTES', () => {
  const fileStore = () => ({ AP_VARIANT_STORE: `file://${storeDir}`, AP_SERVE_MODE: 'proxy' });

  it('unset or 0: unbounded, with or without a store', () => {
    expect(load({}).variantStoreMaxBytes).toBe(0);
    expect(load({ AP_VARIANT_STORE_MAX_BYTES: '0' }).variantStoreMaxBytes).toBe(0);
    expect(
      load({ ...AWS, AP_VARIANT_STORE: 's3://variants', AP_VARIANT_STORE_MAX_BYTES: '0' }),
    ).toMatchObject({ variantStoreMaxBytes: 0 });
  });

  it('bounds a file:// store, from 1 MiB up', () => {
    expect(
      load({ ...fileStore(), AP_VARIANT_STORE_MAX_BYTES: '1048576' }).variantStoreMaxBytes,
    ).toBe(MIN_VARIANT_STORE_MAX_BYTES);
    expect(
      load({ ...fileStore(), AP_VARIANT_STORE_MAX_BYTES: '10737418240' }).variantStoreMaxBytes,
    ).toBe(10 * 1024 ** 3);
  });

  it.each(['-1', '1.5', '10G', '1e9', ' 12 34', 'lots'])('%j is not an integer ≥ 0', (value) => {
    expect(problem({ ...fileStore(), AP_VARIANT_STORE_MAX_BYTES: value })).toMatch(
      /^AP_VARIANT_STORE_MAX_BYTES must be an integer ≥ 0 \(digits only\), got /,
    );
  });

  it('below 1 MiB is refused as a likely unit mistake', () => {
    const message = problem({ ...fileStore(), AP_VARIANT_STORE_MAX_BYTES: '1048575' });
    expect(message).toBe(
      'AP_VARIANT_STORE_MAX_BYTES must be 0 (unbounded) or at least 1048576 (1 MiB), got "1048575": it counts bytes (10 GiB is 10737418240)',
    );
    expect(problem({ ...fileStore(), AP_VARIANT_STORE_MAX_BYTES: '10' })).toContain('at least');
  });

  it('without a store, or with an s3:// one, a bound is refused', () => {
    expect(problem({ AP_VARIANT_STORE_MAX_BYTES: '1048576' })).toBe(
      'AP_VARIANT_STORE_MAX_BYTES bounds a file:// AP_VARIANT_STORE, and AP_VARIANT_STORE is not set',
    );
    expect(
      problem({ ...AWS, AP_VARIANT_STORE: 's3://variants', AP_VARIANT_STORE_MAX_BYTES: '1048576' }),
    ).toMatch(
      /^AP_VARIANT_STORE_MAX_BYTES bounds a file:\/\/ store only; s3:\/\/variants is bounded by the bucket's own lifecycle rules/,
    );
  });

  it('a store that is itself refused is reported once, not twice', () => {
    const err = configError({
      AP_VARIANT_STORE: 'file:///nope/not/a/directory',
      AP_SERVE_MODE: 'proxy',
      AP_VARIANT_STORE_MAX_BYTES: '1048576',
    });
    expect(err.problems.map((p) => p.variable)).toEqual(['AP_VARIANT_STORE']);
  });
});

describe('AP_VARIANT_STORE, s3://', () => {
  it('a bare bucket is the store, and redirect (the default) is admitted', () => {
    for (const value of ['s3://variants', 's3://variants/']) {
      const c = load({ ...AWS, AP_VARIANT_STORE: value });
      expect(c.variantStore).toEqual({ kind: 's3', bucket: 'variants' });
      expect(c.serveMode).toBe('redirect');
    }
  });

  it('bucket names of 3 and 63 characters are accepted; 2 and 64 are refused', () => {
    expect(load({ ...AWS, AP_VARIANT_STORE: 's3://abc' }).variantStore).toEqual({
      kind: 's3',
      bucket: 'abc',
    });
    const b63 = 'b'.repeat(63);
    expect(load({ ...AWS, AP_VARIANT_STORE: `s3://${b63}` }).variantStore).toEqual({
      kind: 's3',
      bucket: b63,
    });
    for (const bucket of ['ab', 'b'.repeat(64)]) {
      const message = problem({ ...AWS, AP_VARIANT_STORE: `s3://${bucket}` });
      expect(message).toContain('AP_VARIANT_STORE');
      expect(message).toContain('3–63 characters');
    }
  });

  it.each([
    ['s3://variants/renders', 'key prefix'],
    ['s3://variants?x=1', 'query or fragment'],
    ['s3://variants#frag', 'query or fragment'],
    ['s3://variants:9000', 'AP_S3_ENDPOINT'],
    ['s3://', 'must name a bucket'],
  ])('%s is refused (%s)', (value, why) => {
    const message = problem({ ...AWS, AP_VARIANT_STORE: value });
    expect(message).toContain('AP_VARIANT_STORE');
    expect(message).toContain(why);
  });

  it('userinfo is refused without echoing it', () => {
    for (const value of [
      's3://AKIAEXAMPLE:topsecret@variants',
      's3://AKIAEXAMPLE:topsecret@variants?x',
    ]) {
      const message = problem({ ...AWS, AP_VARIANT_STORE: value });
      expect(message).toContain('AP_VARIANT_STORE');
      expect(message).toContain('AWS_ACCESS_KEY_ID');
      expect(message).not.toContain('topsecret');
    }
  });

  it('needs credentials: the AWS_* identity or the variant group', () => {
    const message = problem({ AP_VARIANT_STORE: 's3://variants' });
    expect(message).toContain('AP_VARIANT_STORE=s3://variants');
    expect(message).toContain('AWS_ACCESS_KEY_ID');
    expect(message).toContain('AP_VARIANT_S3_ACCESS_KEY_ID');
    expect(
      load({ ...VARIANT_CREDS, AP_VARIANT_STORE: 's3://variants' }).variantS3.credentials
        ?.accessKeyId,
    ).toBe('AKIDSTORE');
  });

  it('a broken credential group is reported once, not again as missing credentials', () => {
    const err = configError({ AWS_ACCESS_KEY_ID: 'x', AP_VARIANT_STORE: 's3://variants' });
    expect(err.problems.map((p) => p.variable)).toEqual(['AWS_SECRET_ACCESS_KEY']);
  });
});

describe('AWS credentials', () => {
  it('a complete set is the source identity', () => {
    const s3 = load(AWS).s3;
    expect(s3.credentials).toEqual({
      accessKeyId: 'AKIDSOURCE',
      secretAccessKey: 'source-secret-value',
      sessionToken: undefined,
    });
    expect(s3.region).toBe('eu-central-1');
  });

  it('AWS_DEFAULT_REGION stands in for AWS_REGION, which wins when both are set', () => {
    const { AWS_REGION: _r, ...noRegion } = AWS;
    expect(load({ ...noRegion, AWS_DEFAULT_REGION: 'us-west-2' }).s3.region).toBe('us-west-2');
    expect(load({ ...AWS, AWS_DEFAULT_REGION: 'us-west-2' }).s3.region).toBe('eu-central-1');
  });

  it('a session token is carried with the pair', () => {
    expect(load({ ...AWS, AWS_SESSION_TOKEN: 'temp' }).s3.credentials?.sessionToken).toBe('temp');
  });

  it('a region alone configures nothing and is fine', () => {
    const s3 = load({ AWS_REGION: 'eu-central-1' }).s3;
    expect(s3.credentials).toBeUndefined();
    expect(s3.region).toBe('eu-central-1');
  });

  it.each([
    { env: { AWS_ACCESS_KEY_ID: 'id' }, says: 'AWS_SECRET_ACCESS_KEY is missing' },
    { env: { AWS_SECRET_ACCESS_KEY: 'source-secret-value' }, says: 'AWS_ACCESS_KEY_ID is missing' },
    {
      env: { AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 'source-secret-value' },
      says: 'AWS_REGION (or AWS_DEFAULT_REGION)',
    },
    { env: { AWS_SESSION_TOKEN: 'temp' }, says: 'AWS_SESSION_TOKEN must only be set together' },
  ])('$env is refused: $says', ({ env, says }) => {
    const message = problem(env);
    expect(message).toContain(says);
    expect(message).not.toContain('source-secret-value');
  });
});

describe('S3 endpoints', () => {
  const names = ['AP_S3_ENDPOINT', 'AP_VARIANT_S3_ENDPOINT'] as const;
  const profile = (name: (typeof names)[number]) =>
    name === 'AP_S3_ENDPOINT' ? 's3' : 'variantS3';

  it.each(names)('%s: an origin parses, a bare trailing slash is dropped', (name) => {
    expect(load({ [name]: 'http://minio:9000' })[profile(name)].endpoint).toEqual({
      url: 'http://minio:9000',
      protocol: 'http',
      hostname: 'minio',
      port: 9000,
    });
    expect(load({ [name]: 'https://Minio.Internal/' })[profile(name)].endpoint).toEqual({
      url: 'https://minio.internal',
      protocol: 'https',
      hostname: 'minio.internal',
      port: 443,
    });
  });

  it.each(names)('%s refuses a path, query, fragment, other scheme or missing host', (name) => {
    for (const value of [
      'http://minio:9000/s3',
      'http://minio:9000//',
      'http://minio:9000?a=1',
      'http://minio:9000/?a',
      'http://minio:9000#a',
      's3://minio:9000',
      'minio:9000',
      'http://',
    ]) {
      const message = problem({ [name]: value });
      expect(message).toContain(name);
      expect(message).toContain('http(s)://host[:port]');
    }
  });

  it.each(names)('%s refuses userinfo without echoing it', (name) => {
    for (const value of [
      'http://key:secret@minio:9000',
      'http://key@minio:9000',
      'http://@minio',
    ]) {
      const message = problem({ [name]: value });
      expect(message).toContain(name);
      expect(message).toContain('AWS_ACCESS_KEY_ID');
      expect(message).not.toContain('key:');
      expect(message).not.toContain('secret@');
    }
  });
});

describe('S3 addressing and CA bundles', () => {
  it('addressing defaults to virtual without an endpoint and path with one; explicit wins', () => {
    expect(load(AWS).s3.addressing).toBe('virtual');
    expect(load({ ...AWS, AP_S3_ENDPOINT: 'https://s3.example' }).s3.addressing).toBe('path');
    expect(load({ AP_S3_ADDRESSING: 'path' }).s3.addressing).toBe('path');
    expect(
      load({ AP_S3_ENDPOINT: 'http://minio:9000', AP_S3_ADDRESSING: 'virtual' }).s3.addressing,
    ).toBe('virtual');
  });

  it.each(['AP_S3_CA_BUNDLE', 'AP_VARIANT_S3_CA_BUNDLE'])(
    '%s: a readable file is kept, expanded',
    (name) => {
      const c = load({ [name]: relative(process.cwd(), bundle) });
      expect((name === 'AP_S3_CA_BUNDLE' ? c.s3 : c.variantS3).caBundle).toBe(bundle);
    },
  );

  it.each(['AP_S3_CA_BUNDLE', 'AP_VARIANT_S3_CA_BUNDLE'])(
    '%s: missing, a directory, or unreadable is refused',
    (name) => {
      expect(problem({ [name]: join(dir, 'absent.pem') })).toMatch(
        new RegExp(`${name}.*readable file.*ENOENT`),
      );
      expect(problem({ [name]: dir })).toContain('not a regular file');
      const fs: ConfigFs = {
        ...nodeConfigFs,
        readFile: () => {
          throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
        },
      };
      expect(problem({ [name]: bundle }, fs)).toContain('EACCES');
    },
  );
});

describe('the AP_VARIANT_S3_* group', () => {
  it('with none set, the variant profile equals the source profile, field for field', () => {
    const c = load({
      ...AWS,
      AWS_SESSION_TOKEN: 'temporary',
      AP_S3_ENDPOINT: 'http://minio:9000',
      AP_S3_CA_BUNDLE: bundle,
    });
    expect(c.s3.credentials?.sessionToken).toBe('temporary');
    expect(c.s3.caBundle).toBe(bundle);
    expect(c.variantS3).toStrictEqual(c.s3);
  });

  it('an explicit source addressing is inherited, not re-derived', () => {
    const c = load({ ...AWS, AP_S3_ADDRESSING: 'path' });
    expect(c.variantS3.addressing).toBe('path');
  });

  it('each variable falls back on its own', () => {
    const c = load({
      ...AWS,
      AP_S3_ENDPOINT: 'https://sources.example',
      AP_VARIANT_S3_ENDPOINT: 'https://store.example',
      AP_VARIANT_S3_CA_BUNDLE: bundle,
    });
    expect(c.variantS3.endpoint?.hostname).toBe('store.example');
    expect(c.variantS3.caBundle).toBe(bundle);
    expect(c.s3.caBundle).toBeUndefined();
    expect(c.variantS3.credentials?.accessKeyId).toBe('AKIDSOURCE');
    expect(c.variantS3.region).toBe('eu-central-1');
  });

  it('a complete group replaces the identity, and the source token is never inherited', () => {
    const c = load({ ...AWS, AWS_SESSION_TOKEN: 'source-token', ...VARIANT_CREDS });
    expect(c.s3.credentials?.accessKeyId).toBe('AKIDSOURCE');
    expect(c.variantS3.credentials).toEqual({
      accessKeyId: 'AKIDSTORE',
      secretAccessKey: 'store-secret-value',
      sessionToken: undefined,
    });
    expect(c.variantS3.region).toBe('us-east-1');
    const withToken = load({
      ...AWS,
      ...VARIANT_CREDS,
      AP_VARIANT_S3_SESSION_TOKEN: 'store-token',
    });
    expect(withToken.variantS3.credentials?.sessionToken).toBe('store-token');
  });

  it.each([
    [['AP_VARIANT_S3_ACCESS_KEY_ID'], ['AP_VARIANT_S3_SECRET_ACCESS_KEY', 'AP_VARIANT_S3_REGION']],
    [['AP_VARIANT_S3_REGION'], ['AP_VARIANT_S3_ACCESS_KEY_ID', 'AP_VARIANT_S3_SECRET_ACCESS_KEY']],
    [['AP_VARIANT_S3_ACCESS_KEY_ID', 'AP_VARIANT_S3_REGION'], ['AP_VARIANT_S3_SECRET_ACCESS_KEY']],
  ])('setting only %o aborts, listing every missing name: %o', (set, missing) => {
    const env: Env = { ...AWS };
    for (const n of set) env[n] = VARIANT_CREDS[n as keyof typeof VARIANT_CREDS];
    const message = problem(env);
    const missingPart = message.slice(message.indexOf(' so '));
    for (const n of missing) expect(missingPart).toContain(n);
    for (const n of set) expect(missingPart).not.toContain(n);
    expect(message).not.toContain('store-secret-value');
  });

  it('a variant session token alone aborts rather than borrowing the AWS_* identity', () => {
    const message = problem({ ...AWS, AP_VARIANT_S3_SESSION_TOKEN: 'store-token' });
    expect(message).toContain('AP_VARIANT_S3_SESSION_TOKEN');
    expect(message).toContain('AP_VARIANT_S3_ACCESS_KEY_ID');
  });

  it('addressing derives from the variant endpoint, not the source', () => {
    expect(load({ ...AWS, AP_VARIANT_S3_ENDPOINT: 'http://minio:9000' })).toMatchObject({
      s3: { addressing: 'virtual' },
      variantS3: { addressing: 'path' },
    });
    const r2 = load({
      ...AWS,
      AP_S3_ENDPOINT: 'https://accountid.r2.cloudflarestorage.com',
      AP_VARIANT_S3_ENDPOINT: 'https://s3.us-east-1.amazonaws.com',
      AP_VARIANT_S3_ADDRESSING: 'virtual',
    });
    expect(r2.s3.addressing).toBe('path');
    expect(r2.variantS3.addressing).toBe('virtual');
  });
});

describe('cluster mode', () => {
  const cluster = {
    AP_CLUSTER_REDIS_URL: 'redis://127.0.0.1:6379',
    AP_CLUSTER_ADVERTISE_URL: 'http://10.0.0.7:4000',
  };
  it('needs AP_KEY and AP_SALT: they authenticate the forwards between nodes', () => {
    expect(problem(cluster)).toContain('AP_KEY and AP_SALT');
    expect(problem({ ...cluster, AP_KEY: 'ab'.repeat(32) })).toContain('AP_CLUSTER_REDIS_URL');
    expect(load({ ...cluster, AP_KEY: 'ab'.repeat(32), AP_SALT: '00' }).clusterRedisUrl).toBe(
      'redis://127.0.0.1:6379',
    );
  });
});

describe('public listener address', () => {
  it.each(['127.0.0.1', '0.0.0.0', '::', '::1', '10.1.2.3'])('AP_BIND=%s is accepted', (ip) => {
    expect(load({ AP_BIND: ip }).bind).toBe(ip);
  });

  it.each(['localhost', '127.0.0.1:4000', '[::1]', '*'])(
    'AP_BIND=%s is refused as not an IP literal',
    (value) => {
      const message = problem({ AP_BIND: value });
      expect(message).toContain('AP_BIND');
      expect(message).toContain('hostnames refused');
    },
  );
});

describe('metrics listener', () => {
  it.each(['0.0.0.0', '::1', '::', '10.1.2.3', 'fe80::1'])(
    'AP_METRICS_BIND=%s is accepted',
    (ip) => {
      expect(load({ AP_METRICS_BIND: ip }).metricsBind).toBe(ip);
    },
  );

  it.each(['localhost', 'metrics.internal', '127.0.0.1:9000', '[::1]', '256.0.0.1'])(
    'AP_METRICS_BIND=%s is refused as not an IP literal',
    (value) => {
      const message = problem({ AP_METRICS_BIND: value });
      expect(message).toContain('AP_METRICS_BIND');
      expect(message).toContain('hostnames refused');
    },
  );

  it('AP_METRICS_PORT must differ from the effective listener port, whichever variable set it', () => {
    const viaApPort = problem({ AP_PORT: '9568' });
    expect(viaApPort).toContain('AP_METRICS_PORT (9568)');
    expect(viaApPort).toContain('from AP_PORT');
    expect(problem({ PORT: '9568' })).toContain('from PORT');
    expect(problem({ AP_METRICS_PORT: '4000' })).toContain('from the default');
    expect(load({ AP_PORT: '9568', AP_METRICS_PORT: '9000' }).metricsPort).toBe(9000);
    expect(load({ AP_PORT: '4001', PORT: '9568' }).port).toBe(4001);
  });
});

describe('AP_ALLOW_ORIGIN', () => {
  it.each([
    '*',
    'https://app.example.com',
    'http://localhost:3000',
    'http://[::1]:8080',
    'https://app.example.com:8443',
  ])('%s is accepted verbatim', (value) => {
    expect(load({ AP_ALLOW_ORIGIN: value }).allowOrigin).toBe(value);
  });

  it.each([
    ['https://app.example.com/', 'https://app.example.com'],
    ['HTTPS://App.Example.com', 'https://app.example.com'],
    ['https://app.example.com:443', 'https://app.example.com'],
    ['http://app.example.com:80', 'http://app.example.com'],
    ['https://app.example.com.', 'https://app.example.com'],
    ['https://app.example.com/player', 'https://app.example.com'],
    ['https://app.example.com?x=1', 'https://app.example.com'],
    ['https://app.example.com#top', 'https://app.example.com'],
  ])('%s is refused, suggesting %s', (value, canonical) => {
    const message = problem({ AP_ALLOW_ORIGIN: value });
    expect(message).toContain('AP_ALLOW_ORIGIN');
    expect(message).toContain(`Did you mean "${canonical}"?`);
  });

  it.each(['app.example.com', 'ftp://app.example.com', 'null', '*.example.com', 'https://'])(
    '%s is refused as not an origin',
    (value) => {
      const message = problem({ AP_ALLOW_ORIGIN: value });
      expect(message).toContain('AP_ALLOW_ORIGIN');
      expect(message).toContain('http(s)://host[:port]');
    },
  );

  it('userinfo is refused without being echoed', () => {
    const message = problem({ AP_ALLOW_ORIGIN: 'https://user:hunter2@app.example.com' });
    expect(message).not.toContain('hunter2');
    expect(message).toContain('Did you mean "https://app.example.com"?');
  });
});

describe('derived defaults and their cross rules', () => {
  it('AP_MAX_PROBE_CONCURRENCY is 4 × the effective render cap unless set', () => {
    expect(load({ AP_MAX_CONCURRENCY: '5' }).maxProbeConcurrency).toBe(20);
    expect(
      load({ AP_MAX_CONCURRENCY: '5', AP_MAX_PROBE_CONCURRENCY: '2' }).maxProbeConcurrency,
    ).toBe(2);
  });

  it('AP_MAX_VARIANT_BYTES is the effective AP_MAX_SRC_BYTES unless set, and may exceed it', () => {
    expect(load({ AP_MAX_SRC_BYTES: '3000000000' }).maxVariantBytes).toBe(3_000_000_000);
    expect(load({ AP_MAX_SRC_BYTES: '1000', AP_MAX_VARIANT_BYTES: '2000' }).maxVariantBytes).toBe(
      2000,
    );
  });

  it.each([
    [0, 0],
    [1, 1],
    [2, 1],
    [3, 1],
    [8, 4],
    [9, 4],
    [64, 32],
  ])('AP_QUEUE_SIZE=%i gives a default threshold of %i', (queue, threshold) => {
    expect(defaultReadyQueueThreshold(queue)).toBe(threshold);
    expect(load({ AP_QUEUE_SIZE: String(queue) }).readyQueueThreshold).toBe(threshold);
  });

  it('AP_READY_QUEUE_THRESHOLD may equal the queue size but not exceed it', () => {
    expect(load({ AP_QUEUE_SIZE: '8', AP_READY_QUEUE_THRESHOLD: '8' }).readyQueueThreshold).toBe(8);
    expect(problem({ AP_QUEUE_SIZE: '8', AP_READY_QUEUE_THRESHOLD: '9' })).toMatch(
      /AP_READY_QUEUE_THRESHOLD \(9\).*AP_QUEUE_SIZE \(8\)/,
    );
    expect(problem({ AP_READY_QUEUE_THRESHOLD: '33' })).toContain('AP_QUEUE_SIZE (32)');
    expect(problem({ AP_QUEUE_SIZE: '0', AP_READY_QUEUE_THRESHOLD: '1' })).toContain(
      'AP_QUEUE_SIZE (0)',
    );
  });

  it('a cross rule is skipped when one of its inputs is itself invalid (one typo, one message)', () => {
    expect(
      configError({ AP_QUEUE_SIZE: 'x', AP_READY_QUEUE_THRESHOLD: '40' }).problems.map(
        (p) => p.variable,
      ),
    ).toEqual(['AP_QUEUE_SIZE']);
    expect(
      configError({ AP_PORT: 'x', AP_METRICS_PORT: '4000' }).problems.map((p) => p.variable),
    ).toEqual(['AP_PORT']);
  });
});

describe('AP_FFMPEG_PATH and AP_FFPROBE_PATH', () => {
  const fields = { AP_FFMPEG_PATH: 'ffmpegPath', AP_FFPROBE_PATH: 'ffprobePath' } as const;

  it.each(Object.keys(fields) as (keyof typeof fields)[])(
    '%s: an executable file is kept, expanded',
    (name) => {
      expect(load({ [name]: relative(process.cwd(), exe) })[fields[name]]).toBe(exe);
    },
  );

  it.each(Object.keys(fields))('%s: missing, a directory or not executable is refused', (name) => {
    expect(problem({ [name]: join(dir, 'nope') })).toMatch(
      new RegExp(`^${name} must be an existing executable.*ENOENT`),
    );
    expect(problem({ [name]: dir })).toContain('not a regular file');
    expect(problem({ [name]: notExe })).toContain('EACCES');
  });

  it('a bare command name gets a hint that PATH is not searched', () => {
    const message = problem({ AP_FFMPEG_PATH: 'ffmpeg' });
    expect(message).toContain('PATH is not searched');
    expect(message).toContain('/usr/bin/ffmpeg');
  });
});

describe('one rejected value per variable', () => {
  // Every variable that can be wrong on its own, with a value that is. The completeness check
  // makes adding a variable without a rejection case a failing test.
  const bad: Record<string, Env> = {
    AP_PORT: { AP_PORT: '0' },
    PORT: { PORT: 'x' },
    AP_KEY: { AP_KEY: 'abc' },
    AP_SALT: { AP_SALT: 'abc' },
    AP_ALLOW_INSECURE: { AP_ALLOW_INSECURE: 'maybe' },
    AP_PRESETS: { AP_PRESETS: 'Bad Name=f:mp3' },
    AP_ONLY_PRESETS: { AP_ONLY_PRESETS: 'maybe' },
    AP_LOCAL_ROOT: { AP_LOCAL_ROOT: '/' },
    AP_VARIANT_STORE: { AP_VARIANT_STORE: 'gopher://x' },
    AP_VARIANT_STORE_MAX_BYTES: { AP_VARIANT_STORE_MAX_BYTES: '1GiB' },
    AP_SERVE_MODE: { AP_SERVE_MODE: 'stream' },
    AP_PRESIGN_TTL: { AP_PRESIGN_TTL: '0' },
    AP_MAX_CONCURRENCY: { AP_MAX_CONCURRENCY: '0' },
    AP_MAX_PROBE_CONCURRENCY: { AP_MAX_PROBE_CONCURRENCY: '0' },
    AP_QUEUE_SIZE: { AP_QUEUE_SIZE: '-1' },
    AP_READY_QUEUE_THRESHOLD: { AP_READY_QUEUE_THRESHOLD: '-1' },
    AP_MAX_SRC_BYTES: { AP_MAX_SRC_BYTES: '0' },
    AP_MAX_VARIANT_BYTES: { AP_MAX_VARIANT_BYTES: '0' },
    AP_RENDER_TIMEOUT: { AP_RENDER_TIMEOUT: '0' },
    AP_PROBE_TIMEOUT: { AP_PROBE_TIMEOUT: '0' },
    AP_MAX_DURATION_S: { AP_MAX_DURATION_S: '0' },
    AP_SOURCE_ALLOW_PRIVATE: { AP_SOURCE_ALLOW_PRIVATE: 'maybe' },
    AP_LOG_LEVEL: { AP_LOG_LEVEL: 'verbose' },
    AP_LOG_FORMAT: { AP_LOG_FORMAT: 'colour' },
    AP_METRICS_BIND: { AP_METRICS_BIND: 'localhost' },
    AP_BIND: { AP_BIND: '0.0.0.0:4000' },
    AP_METRICS_PORT: { AP_METRICS_PORT: '0' },
    AP_ALLOW_ORIGIN: { AP_ALLOW_ORIGIN: 'https://a.example/' },
    AP_FLIGHT_RECORDER: { AP_FLIGHT_RECORDER: '-1' },
    AP_FLIGHT_RECORDER_DIR: { AP_FLIGHT_RECORDER_DIR: '/nonexistent-flight-recorder-dir' },
    AP_S3_ENDPOINT: { AP_S3_ENDPOINT: 'ftp://x' },
    AP_S3_ADDRESSING: { AP_S3_ADDRESSING: 'vhost' },
    AP_S3_CA_BUNDLE: { AP_S3_CA_BUNDLE: '/nope.pem' },
    AP_VARIANT_S3_ENDPOINT: { AP_VARIANT_S3_ENDPOINT: 'ftp://x' },
    AP_VARIANT_S3_ADDRESSING: { AP_VARIANT_S3_ADDRESSING: 'vhost' },
    AP_VARIANT_S3_CA_BUNDLE: { AP_VARIANT_S3_CA_BUNDLE: '/nope.pem' },
    AP_VARIANT_S3_ACCESS_KEY_ID: { AP_VARIANT_S3_ACCESS_KEY_ID: 'x' },
    AP_VARIANT_S3_SECRET_ACCESS_KEY: { AP_VARIANT_S3_SECRET_ACCESS_KEY: 'x' },
    AP_VARIANT_S3_REGION: { AP_VARIANT_S3_REGION: 'x' },
    AP_VARIANT_S3_SESSION_TOKEN: { AP_VARIANT_S3_SESSION_TOKEN: 'x' },
    AP_MAX_RENDERS_PER_WORKER_POOL: { AP_MAX_RENDERS_PER_WORKER_POOL: '-1' },
    AP_MAX_PROBES_PER_WORKER_POOL: { AP_MAX_PROBES_PER_WORKER_POOL: '1.5' },
    AP_WAITING_ROOM: { AP_WAITING_ROOM: 'sometimes' },
    AP_WAITING_ROOM_RESERVATION_SECONDS: { AP_WAITING_ROOM_RESERVATION_SECONDS: '0' },
    AP_WARM_MAX_ENTRIES: { AP_WARM_MAX_ENTRIES: '0' },
    AP_WARM_MAX_PENDING: { AP_WARM_MAX_PENDING: '-3' },
    AP_WARM_ADMITTED: { AP_WARM_ADMITTED: '0' },
    AP_WARM_ATTEMPTS: { AP_WARM_ATTEMPTS: 'many' },
    AP_WARM_BACKOFF_MAX_SECONDS: { AP_WARM_BACKOFF_MAX_SECONDS: '0' },
    AP_PREFETCH_NEXT_TRIM: { AP_PREFETCH_NEXT_TRIM: 'maybe' },
    AP_PREFETCH_HLS_SEGMENTS: { AP_PREFETCH_HLS_SEGMENTS: '-1' },
    AP_WAITING_ROOM_HEARTBEAT_SECONDS: { AP_WAITING_ROOM_HEARTBEAT_SECONDS: 'x' },
    AP_WAITING_ROOM_MAX_LENGTH: { AP_WAITING_ROOM_MAX_LENGTH: '0' },
    AP_WAITING_ROOM_SLOTS: { AP_WAITING_ROOM_SLOTS: '0' },
    AP_COOKIE_SECURE: { AP_COOKIE_SECURE: 'sometimes' },
    AP_ACCESS_LOG: { AP_ACCESS_LOG: 'loud' },
    AP_HIT_CACHE_BYTES: { AP_HIT_CACHE_BYTES: '64MiB' },
    AP_BACKLOG_BUDGET_BYTES: { AP_BACKLOG_BUDGET_BYTES: '-1' },
    AP_FFMPEG_NICE: { AP_FFMPEG_NICE: '20' },
    AP_FFMPEG_PATH: { AP_FFMPEG_PATH: '/nope/ffmpeg' },
    AP_FFPROBE_PATH: { AP_FFPROBE_PATH: '/nope/ffprobe' },
    AP_CLUSTER_REDIS_URL: { AP_CLUSTER_REDIS_URL: 'http://redis:6379' },
    AP_CLUSTER_NODE_ID: { AP_CLUSTER_NODE_ID: 'a|b' },
    AP_CLUSTER_ADVERTISE_URL: { AP_CLUSTER_ADVERTISE_URL: 'http://x:1/path' },
    AP_CLUSTER_NODE_LABEL: { AP_CLUSTER_NODE_LABEL: 'has space' },
    AP_CLUSTER_LEASE_MS: { AP_CLUSTER_LEASE_MS: '10' },
    AWS_ACCESS_KEY_ID: { AWS_ACCESS_KEY_ID: 'x' },
    AWS_SECRET_ACCESS_KEY: { AWS_SECRET_ACCESS_KEY: 'x' },
    AWS_REGION: { AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y' },
    AWS_SESSION_TOKEN: { AWS_SESSION_TOKEN: 'x' },
  };
  // Accept any non-empty string by design.
  const alwaysValid = ['AP_SOURCE_ALLOWLIST', 'AWS_DEFAULT_REGION'];

  it('covers every published variable', () => {
    expect([...Object.keys(bad), ...alwaysValid].sort()).toEqual(
      CONFIG_VARIABLES.map((v) => v.name).sort(),
    );
  });

  it.each(Object.entries(bad))('%s: refused with a message naming it', (name, env) => {
    const err = configError(env);
    expect(err.problems.some((p) => p.message.includes(name))).toBe(true);
  });
});

describe('ConfigError', () => {
  it('reports every problem at once, with a stable code', () => {
    const err = configError({
      AP_QUEUE_SIZE: 'lots',
      AP_LOG_LEVEL: 'loud',
      AP_METRICS_BIND: 'localhost',
      AP_KEY: 'short',
    });
    expect(err.code).toBe('ERR_CONFIG');
    expect(err.name).toBe('ConfigError');
    expect(err).toBeInstanceOf(Error);
    expect(err.problems.map((p) => p.variable).sort()).toEqual([
      'AP_KEY',
      'AP_LOG_LEVEL',
      'AP_METRICS_BIND',
      'AP_QUEUE_SIZE',
    ]);
    expect(err.message).toContain('4 problems');
    for (const p of err.problems) expect(err.message).toContain(p.message);
    expect(Object.isFrozen(err.problems)).toBe(true);
  });

  it('never echoes a secret, whatever else is wrong', () => {
    const secrets = {
      AP_KEY: 'c0ffee'.repeat(3),
      AP_SALT: 'c0ffe',
      AWS_SECRET_ACCESS_KEY: 'sekrit-aws',
      AP_VARIANT_S3_SECRET_ACCESS_KEY: 'sekrit-variant',
      AP_S3_ENDPOINT: 'http://id:sekrit-endpoint@minio',
      AP_VARIANT_STORE: 's3://id:sekrit-store@variants',
    };
    const err = configError(secrets);
    expect(err.problems.length).toBeGreaterThanOrEqual(6);
    for (const s of ['c0ffee', 'c0ffe', 'sekrit']) expect(err.message).not.toContain(s);
  });

  it('a very long bad value is elided in the message', () => {
    const message = problem({ AP_LOG_LEVEL: 'x'.repeat(5000) });
    expect(message.length).toBeLessThan(400);
    expect(message).toContain('…');
  });
});

describe('configOrExit', () => {
  it('returns the config when the environment is valid, without exiting', () => {
    const exit = (code: number): never => {
      throw new Error(`unexpected exit ${code}`);
    };
    expect(configOrExit({ AP_QUEUE_SIZE: '4' }, { cpuCount: 2, exit }).queueSize).toBe(4);
  });

  it('prints every problem to stderr and exits with code 2', () => {
    let written = '';
    let exitCode: number | undefined;
    const exit = (code: number): never => {
      exitCode = code;
      throw new Error('exited');
    };
    expect(() =>
      configOrExit(
        { AP_QUEUE_SIZE: 'x', AP_LOG_LEVEL: 'loud' },
        { cpuCount: 2, exit, stderr: { write: (s: string) => (written += s) } },
      ),
    ).toThrow('exited');
    expect(exitCode).toBe(CONFIG_EXIT_CODE);
    expect(CONFIG_EXIT_CODE).toBe(2);
    expect(written).toContain('AP_QUEUE_SIZE must be');
    expect(written).toContain('AP_LOG_LEVEL must be');
  });

  it('lets a programmer error through instead of exiting', () => {
    const exit = (): never => {
      throw new Error('must not exit');
    };
    expect(() => configOrExit({}, { cpuCount: 0, exit })).toThrow(RangeError);
  });

  it('a real process exits with status 2 and the messages on stderr', () => {
    const script = join(dir, 'boot.ts');
    const configUrl = pathToFileURL(join(process.cwd(), 'src/config/index.ts')).href;
    writeFileSync(
      script,
      `import { configOrExit } from '${configUrl}';\nconfigOrExit(process.env);\nconsole.log('booted');\n`,
    );
    const run = (env: Env) =>
      spawnSync(process.execPath, ['--import', 'tsx', script], {
        cwd: process.cwd(),
        env: { PATH: process.env.PATH, ...env },
        encoding: 'utf8',
      });
    const bad = run({ AP_METRICS_PORT: '4000', AP_SERVE_MODE: 'both' });
    expect(bad.status).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toContain('AP_METRICS_PORT (4000) must differ');
    expect(bad.stderr).toContain('AP_SERVE_MODE must be');
  });
});

describe('configWarnings and unrecognisedVariables', () => {
  it('warn about insecure signatures, missing signing material and unknown AP_* names', () => {
    const env = { AP_ALLOW_INSECURE: 'on', AP_MAX_CONCURENCY: '4', AP_QUEUE: '1', HOME: '/root' };
    const warnings = configWarnings(load(env), env);
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toContain('AP_ALLOW_INSECURE');
    expect(warnings[1]).toContain('AP_KEY and AP_SALT unset');
    expect(warnings[2]).toContain('AP_MAX_CONCURENCY, AP_QUEUE');
  });

  it('say nothing for a clean, signed configuration', () => {
    const env = { AP_KEY: KEY_HEX, AP_SALT: '00ff' };
    expect(configWarnings(load(env), env)).toEqual([]);
    expect(unrecognisedVariables({ ...env, PATH: '/bin', AWS_PROFILE: 'x' })).toEqual([]);
  });
});

describe('providers', () => {
  it('staticConfig always returns the same frozen snapshot', () => {
    const cfg = load({});
    const p = staticConfig(cfg);
    expect(p.get()).toBe(cfg);
    expect(p.get()).toBe(p.get());
  });

  it('mutableConfig.set replaces fields for later reads and leaves earlier snapshots alone', () => {
    const p = mutableConfig(load({}));
    const before = p.get();
    const after = p.set({ maxConcurrency: 1, queueSize: 0 });
    expect(p.get()).toBe(after);
    expect(after.maxConcurrency).toBe(1);
    expect(after.queueSize).toBe(0);
    expect(after.readyQueueThreshold).toBe(16); // cross rules are not applied in tests
    expect(before.maxConcurrency).toBe(CPUS);
    expect(Object.isFrozen(after)).toBe(true);
  });

  it('mutableConfig.set refuses unknown fields and nonsense limits at the boundary', () => {
    const p = mutableConfig(load({}));
    expect(() => p.set({ maxConcurency: 2 } as unknown as Partial<Config>)).toThrow(TypeError);
    expect(() => p.set({ maxConcurrency: 0 })).toThrow(RangeError);
    expect(() => p.set({ queueSize: -1 })).toThrow(RangeError);
    expect(() => p.set({ renderTimeoutS: 1.5 })).toThrow(RangeError);
    expect(p.get().maxConcurrency).toBe(CPUS);
  });
});

describe('filesystem claims against the real filesystem', () => {
  it('a store directory is left with only its tmp/ directory after the probe', () => {
    const fresh = join(dir, 'fresh-store');
    mkdirSync(fresh);
    load({ AP_VARIANT_STORE: `file://${fresh}`, AP_SERVE_MODE: 'proxy' });
    expect(readdirSync(fresh)).toEqual(['tmp']);
    expect(existsSync(join(fresh, 'tmp'))).toBe(true);
  });
});
