// The operator's kit (#16 item 6): Dockerfile, compose.yaml, deploy/audio-proxy.service, checked
// as far as the machine allows.
// - Dockerfile: its instructions, statically (multi-stage, Debian's ffmpeg, production
//   dependencies, a non-root user, the health check, SIGTERM, node as the process signalled);
//   every file it copies exists and is not in .dockerignore; its ENV passes the config loader.
// - compose.yaml: parsed by a strict reader of the YAML subset it is written in (anything else
//   fails the test) and, where Python's yaml module exists, compared with a real YAML parser;
//   every proxy's environment (the image's ENV under it) passes `loadConfig` without a warning,
//   and the services it names (Redis, the S3 server, the bucket job) agree with it.
// - the systemd unit: `systemd-analyze verify` where systemd is installed (skipped with a notice
//   otherwise), with any complaint on stderr a failure (verify exits 0 on unknown keys).
// - the runtime stage, emulated without a container: dist/ compiled into a temp dir laid out
//   as the image's WORKDIR (the runtime stage's COPY lines, followed), the production
//   dependencies only (linked from this repo; tsx is a dev dependency), the image's ENV and ENTRYPOINT/CMD,
//   and compose's variant store with s3rver standing in for SeaweedFS (compose's bucket job
//   creates the bucket first); the health-check script must see it healthy, a signed render must
//   play and then come back as a HIT from the store, deploy/footprint.mjs must measure it, and
//   SIGTERM must drain and exit 0.
// - the image itself, only with AP_TEST_CONTAINER=<engine command> (`docker`, `podman`, or
//   `podman --runtime /usr/sbin/runc`) and AP_TEST_CONTAINER_FLAGS (flags for both build and
//   run, e.g. `--network host`): built, inspected, run, health-checked, a render served, stopped
//   with SIGTERM and exit 0. It needs `node:20-bookworm-slim` from a registry (or a stand-in
//   under that name), Debian's mirror and the npm registry; docs/operations.md says how it was
//   run in a sandbox without a registry.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configWarnings, loadConfig } from '../src/config/index.js';
import { sign } from '../src/http/signature.js';
import { CLOSE_DRAIN_MS } from '../src/proxy.js';
import { resolveFfmpeg, resolveFfprobe } from '../src/workers/ffmpegPath.js';
import { makeFixtures } from './fixtures/audio.js';
import { freePort } from './ports.js';
import { S3RVER_KEY, type S3rverHandle, startS3rver } from './store/s3rver.js';

const run = promisify(execFile);
const REPO = process.cwd();
/** `tsc -p tsconfig.build.json` into a temp dir: ~15 s idle, several times that on a busy box. */
const BUILD_TIMEOUT_MS = 180_000;
const BOOT_TIMEOUT_MS = 30_000;
const KEY_HEX = 'ab'.repeat(32);
const SALT_HEX = 'cd'.repeat(16);
/** The CLI's bound on the whole shutdown, read from src/cli.ts (importing it runs the CLI). */
const SHUTDOWN_GRACE_MS = Number(
  /export const SHUTDOWN_GRACE_MS = ([\d_]+);/
    .exec(readFileSync(join(REPO, 'src/cli.ts'), 'utf8'))![1]!
    .replace(/_/g, ''),
);

// ---------------------------------------------------------------------------------------------
// The Dockerfile

interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly stage: string;
}

/** Instructions with their stage's name; continuation lines joined, comments dropped. */
function dockerfile(): Instruction[] {
  const logical = readFileSync(join(REPO, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const out: Instruction[] = [];
  let stage = '';
  for (const line of logical) {
    const m = /^([A-Z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`not an instruction: ${line}`);
    const op = m[1]!;
    const args = m[2]!.replace(/\s+/g, ' ');
    if (op === 'FROM') stage = /\bAS (\w+)$/i.exec(args)?.[1] ?? '';
    out.push({ op, args, stage });
  }
  return out;
}

/** `KEY=value KEY2=value2` (the form this Dockerfile uses) → a record. */
function envOf(instructions: readonly Instruction[], stage: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of instructions.filter((x) => x.op === 'ENV' && x.stage === stage)) {
    for (const pair of i.args.split(' ')) {
      const eq = pair.indexOf('=');
      if (eq < 1) throw new Error(`ENV in KEY=value form only: ${i.args}`);
      env[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
  }
  return env;
}

/** The image's environment, with the executables of this machine where Debian's are absent. */
function imageEnv(): Record<string, string> {
  const env = envOf(dockerfile(), 'runtime');
  if (!existsSync(env.AP_FFMPEG_PATH ?? '')) {
    env.AP_FFMPEG_PATH = resolveFfmpeg({ env: process.env }).path;
  }
  if (!existsSync(env.AP_FFPROBE_PATH ?? '')) {
    env.AP_FFPROBE_PATH = resolveFfprobe({ env: process.env }).path;
  }
  return env;
}

const jsonArgs = (args: string): string[] => JSON.parse(args) as string[];

describe('Dockerfile', () => {
  const all = dockerfile();
  const runtime = all.filter((i) => i.stage === 'runtime');
  const build = all.filter((i) => i.stage === 'build');
  const one = (op: string) => {
    const found = runtime.filter((i) => i.op === op);
    expect(found, op).toHaveLength(1);
    return found[0]!.args;
  };

  it('builds with every dependency, and runs on Debian slim with production ones', () => {
    const froms = all.filter((i) => i.op === 'FROM').map((i) => i.args);
    const image = '$' + '{NODE_IMAGE}'; // the ARG, as written
    expect(froms).toEqual([`${image} AS build`, `${image} AS runtime`]);
    expect(all.find((i) => i.op === 'ARG')?.args).toMatch(/^NODE_IMAGE=node:20-[a-z]+-slim$/);
    const buildRuns = build.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(buildRuns).toContain('npm ci --no-audit --no-fund');
    expect(buildRuns).toContain('npm run build');
    const runs = runtime.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /apt-get install -y --no-install-recommends ffmpeg\b/.test(r))).toBe(
      true,
    );
    expect(runs.some((r) => /npm ci --omit=dev\b/.test(r))).toBe(true);
    expect(runs.some((r) => /npm (run build|install)\b|npm ci(?! --omit=dev)/.test(r))).toBe(false);
    expect(runtime.filter((i) => i.op === 'COPY' && i.args.startsWith('--from='))).toEqual([
      { op: 'COPY', args: '--from=build /app/dist ./dist', stage: 'runtime' },
    ]);
  });

  it('runs as an unprivileged user that the image creates', () => {
    const user = one('USER');
    expect(user).toMatch(/^[a-z][\w-]*(:[a-z][\w-]*)?$/);
    expect(user.split(':')[0]).not.toBe('root');
    const name = user.split(':')[0]!;
    expect(runtime.some((i) => i.op === 'RUN' && i.args.includes(`useradd --system`))).toBe(true);
    expect(
      runtime.some((i) => i.op === 'RUN' && new RegExp(`useradd .*\\b${name}$`).test(i.args)),
    ).toBe(true);
    // Nothing runs after the switch that would need root.
    const at = runtime.findIndex((i) => i.op === 'USER');
    expect(runtime.slice(at).filter((i) => i.op === 'RUN')).toEqual([]);
  });

  it('checks /health with node, stops on SIGTERM, and signals node itself', () => {
    const health = one('HEALTHCHECK');
    expect(health).toMatch(/--timeout=\d+s/);
    expect(health).toMatch(/CMD \["node", "deploy\/healthcheck\.mjs"\]$/);
    expect(one('STOPSIGNAL')).toBe('SIGTERM');
    // Exec form, no shell or npm in between: the signal reaches the CLI that drains.
    expect(jsonArgs(one('ENTRYPOINT'))).toEqual(['node', 'bin/audio-proxy.mjs']);
    expect(jsonArgs(one('CMD'))).toEqual(['serve']);
  });

  it('says the stop grace it needs, longer than the whole shutdown', () => {
    const text = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
    const grace = Number(/--stop-timeout (\d+)/.exec(text)?.[1]);
    expect(grace * 1000).toBeGreaterThan(SHUTDOWN_GRACE_MS);
    expect(SHUTDOWN_GRACE_MS).toBeGreaterThan(CLOSE_DRAIN_MS);
    expect(text).toContain(`${CLOSE_DRAIN_MS / 1000} s`);
    expect(text).toContain(`${SHUTDOWN_GRACE_MS / 1000} s`);
  });

  it('copies only files that exist and that .dockerignore lets through', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    const sources = all
      .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from='))
      .flatMap((i) => i.args.split(' ').slice(0, -1));
    expect(sources.length).toBeGreaterThan(5);
    for (const source of sources) {
      expect(existsSync(join(REPO, source)), source).toBe(true);
      const top = source.split('/')[0]!;
      expect(ignored, source).not.toContain(top);
    }
  });

  it('sets only variables the proxy knows, with values its loader accepts', () => {
    const env = imageEnv();
    expect(Object.keys(env)).toContain('AP_FFMPEG_PATH');
    const config = loadConfig({ ...env, AP_KEY: KEY_HEX, AP_SALT: SALT_HEX });
    expect(configWarnings(config, env)).toEqual([]);
    expect(config.bind).toBe('0.0.0.0');
    expect(String(config.port)).toBe(one('EXPOSE'));
  });
});

// ---------------------------------------------------------------------------------------------
// compose.yaml

type Yaml = string | null | Yaml[] | { [key: string]: Yaml };

/**
 * A reader for the YAML subset compose.yaml is written in: block mappings and sequences indented
 * with spaces, plain and double-quoted scalars, flow sequences of double-quoted strings, `#`
 * comments. Anything else (anchors, aliases, tags, block scalars, flow mappings, tabs) throws, so
 * a file that strays from the subset fails the test instead of being misread. Scalars stay
 * strings (`true` is "true").
 */
function readYamlSubset(text: string): Yaml {
  interface Line {
    readonly indent: number;
    readonly body: string;
    readonly n: number;
  }
  const lines: Line[] = [];
  text.split('\n').forEach((raw, i) => {
    if (/\t/.test(raw)) throw new Error(`line ${i + 1}: tab`);
    const body = stripComment(raw).trimEnd();
    if (body.trim() === '') return;
    lines.push({ indent: body.length - body.trimStart().length, body: body.trim(), n: i + 1 });
  });
  let at = 0;

  function stripComment(raw: string): string {
    let quoted = false;
    for (let i = 0; i < raw.length; i++) {
      if (raw[i] === '"' && raw[i - 1] !== '\\') quoted = !quoted;
      if (!quoted && raw[i] === '#' && (i === 0 || raw[i - 1] === ' ')) return raw.slice(0, i);
    }
    return raw;
  }

  function scalar(value: string, n: number): Yaml {
    if (/^[&*!|>{]/.test(value)) throw new Error(`line ${n}: outside the subset: ${value}`);
    if (value.startsWith('"')) return JSON.parse(value) as string;
    if (value.startsWith("'")) throw new Error(`line ${n}: single quotes are outside the subset`);
    if (value.startsWith('[')) {
      const list = JSON.parse(value) as unknown[];
      if (!list.every((x) => typeof x === 'string')) throw new Error(`line ${n}: flow list`);
      return list as string[];
    }
    return value;
  }

  function block(indent: number): Yaml {
    const first = lines[at]!;
    if (first.indent !== indent) throw new Error(`line ${first.n}: indentation`);
    if (first.body.startsWith('- ') || first.body === '-') {
      const list: Yaml[] = [];
      while (at < lines.length && lines[at]!.indent === indent && lines[at]!.body.startsWith('-')) {
        const item = lines[at]!;
        const value = item.body.slice(1).trim();
        if (value === '' || /^[\w.-]+:( |$)/.test(value)) {
          throw new Error(`line ${item.n}: only scalars in sequences`);
        }
        list.push(scalar(value, item.n));
        at++;
      }
      return list;
    }
    const map: { [key: string]: Yaml } = {};
    while (at < lines.length && lines[at]!.indent === indent) {
      const line = lines[at]!;
      const m = /^([\w.-]+):(?: (.*))?$/.exec(line.body);
      if (!m) throw new Error(`line ${line.n}: expected "key: value": ${line.body}`);
      const key = m[1]!;
      if (key in map) throw new Error(`line ${line.n}: duplicate key ${key}`);
      at++;
      if (m[2] !== undefined && m[2].trim() !== '') {
        map[key] = scalar(m[2].trim(), line.n);
      } else if (at < lines.length && lines[at]!.indent > indent) {
        map[key] = block(lines[at]!.indent);
      } else {
        map[key] = null;
      }
    }
    if (at < lines.length && lines[at]!.indent > indent) {
      throw new Error(`line ${lines[at]!.n}: indentation`);
    }
    return map;
  }

  const doc = block(0);
  if (at !== lines.length) throw new Error(`line ${lines[at]!.n}: trailing content`);
  return doc;
}

type Map = { [key: string]: Yaml };
const asMap = (y: Yaml | undefined, what: string): Map => {
  if (y === null || y === undefined || typeof y !== 'object' || Array.isArray(y)) {
    throw new Error(`${what}: not a mapping`);
  }
  return y;
};
const asList = (y: Yaml | undefined, what: string): string[] => {
  if (!Array.isArray(y)) throw new Error(`${what}: not a list`);
  return y as string[];
};

/** Compose's `${NAME:?message}` interpolation, with the given values. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{(\w+)(?::\?[^}]*)?\}/g, (_, name: string) => {
    if (!(name in vars)) throw new Error(`\${${name}} has no value in the test`);
    return vars[name]!;
  });
}

/** Seconds of a compose duration such as `30s` or `1m30s`. */
function seconds(duration: string): number {
  const m = /^(?:(\d+)m)?(?:(\d+)s)?$/.exec(duration);
  if (!m || duration === '') throw new Error(`duration ${duration}`);
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0);
}

/** The services of compose.yaml. */
function composeServices(): Map {
  const doc = asMap(readYamlSubset(readFileSync(join(REPO, 'compose.yaml'), 'utf8')), 'compose');
  return asMap(doc.services, 'services');
}

/** A service's `environment`, as written (no interpolation). */
function composeEnv(services: Map, name: string): Record<string, string> {
  return asMap(asMap(services[name], name).environment, `${name}.environment`) as Record<
    string,
    string
  >;
}

describe('compose.yaml', () => {
  const doc = asMap(readYamlSubset(readFileSync(join(REPO, 'compose.yaml'), 'utf8')), 'compose');
  const services = asMap(doc.services, 'services');
  const proxies = Object.keys(services).filter((name) => name.startsWith('proxy'));
  const vars = { AP_KEY: KEY_HEX, AP_SALT: SALT_HEX };
  let root = '';

  beforeAll(async () => {
    root = (await makeFixtures()).dir; // AP_LOCAL_ROOT must be an existing directory
  });

  it('reads the same with a real YAML parser, where one is installed', async (ctx) => {
    let python: string;
    try {
      const { stdout } = await run('python3', [
        '-c',
        'import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))',
        join(REPO, 'compose.yaml'),
      ]);
      python = stdout;
    } catch {
      console.warn(
        '[deploy.test] python3 with yaml not installed: compose.yaml read by the subset reader only',
      );
      ctx.skip();
      return;
    }
    // The real parser types scalars; the subset reader keeps them as text.
    const stringify = (y: unknown): Yaml =>
      y === null
        ? null
        : Array.isArray(y)
          ? y.map(stringify)
          : typeof y === 'object'
            ? Object.fromEntries(Object.entries(y).map(([k, v]) => [k, stringify(v)]))
            : String(y);
    expect(doc).toEqual(stringify(JSON.parse(python)));
  });

  it('runs Redis, an S3-compatible server, the bucket job and two proxy nodes', () => {
    expect(Object.keys(services).sort()).toEqual([
      'proxy-1',
      'proxy-2',
      'redis',
      's3',
      's3-bucket',
    ]);
    for (const name of Object.keys(services)) {
      expect(asMap(services[name], name).image, name).toMatch(/^[\w./-]+:[\w.-]+$/);
    }
    expect(asMap(services.redis, 'redis').healthcheck).toBeTruthy();
  });

  it('gives each proxy an environment the loader accepts, without a warning', () => {
    const image = imageEnv();
    for (const name of proxies) {
      const service = asMap(services[name], name);
      const raw = asMap(service.environment, `${name}.environment`) as Record<string, string>;
      const env: Record<string, string> = { ...image };
      for (const [k, v] of Object.entries(raw)) env[k] = interpolate(v, vars);
      env.AP_LOCAL_ROOT = root; // a directory of this machine instead of the container's mount
      const config = loadConfig(env);
      expect(configWarnings(config, env), name).toEqual([]);
      expect(config.key, name).toBeDefined();
      // A cluster node: its own id, reachable by peers at its service name and port.
      expect(config.clusterNodeId).toBe(name);
      const advertised = new URL(config.clusterAdvertiseUrl!);
      expect(advertised.hostname).toBe(name);
      expect(Number(advertised.port)).toBe(config.port);
      expect(new URL(config.clusterRedisUrl!).hostname).toBe('redis');
      // The store is the compose S3 server, served through the proxy: a presigned redirect
      // would send clients to a host name only the compose network resolves.
      expect(env.AP_VARIANT_STORE).toMatch(/^s3:\/\//);
      expect(new URL(env.AP_VARIANT_S3_ENDPOINT!).hostname).toBe('s3');
      expect(config.serveMode).toBe('proxy');
      // Published on loopback only, to the port the proxy listens on.
      const ports = asList(service.ports, `${name}.ports`);
      expect(ports).toHaveLength(1);
      expect(ports[0]).toMatch(new RegExp(`^127\\.0\\.0\\.1:\\d+:${config.port}$`));
    }
    expect(proxies).toHaveLength(2);
  });

  it('stops each proxy with a grace longer than its shutdown, and starts it after its needs', () => {
    for (const name of proxies) {
      const service = asMap(services[name], name);
      expect(seconds(service.stop_grace_period as string) * 1000).toBeGreaterThan(
        SHUTDOWN_GRACE_MS,
      );
      expect(service.stop_signal ?? 'SIGTERM').toBe('SIGTERM');
      const needs = asMap(service.depends_on, `${name}.depends_on`);
      expect(asMap(needs.redis, 'redis').condition).toBe('service_healthy');
      expect(asMap(needs['s3-bucket'], 's3-bucket').condition).toBe(
        'service_completed_successfully',
      );
      expect(service.read_only).toBe('true');
      expect(asList(service.tmpfs, 'tmpfs')).toEqual(['/tmp']); // remote sources spool there
    }
  });

  it('creates the bucket the proxies use, with the identity the S3 server knows', () => {
    const job = asMap(services['s3-bucket'], 's3-bucket');
    expect(asList(job.entrypoint, 'entrypoint')).toEqual(['node', 'deploy/s3-bucket.mjs']);
    const jobEnv = asMap(job.environment, 'env') as Record<string, string>;
    const s3 = asMap(services.s3, 's3');
    const mounted = asList(s3.volumes, 's3.volumes')
      .map((v) => v.split(':'))
      .find(([, target]) => target === '/etc/seaweedfs/s3.json');
    expect(mounted, 'the S3 identities file is mounted').toBeDefined();
    expect(asList(s3.command, 's3.command')).toContain(`-s3.config=${mounted![1]}`);
    const identities = (
      JSON.parse(readFileSync(join(REPO, mounted![0]!), 'utf8')) as {
        identities: {
          credentials: { accessKey: string; secretKey: string }[];
          actions: string[];
        }[];
      }
    ).identities;
    for (const name of [...proxies, 's3-bucket']) {
      const env =
        name === 's3-bucket'
          ? jobEnv
          : (asMap(asMap(services[name], name).environment, 'env') as Record<string, string>);
      expect(env.AP_VARIANT_STORE, name).toBe(jobEnv.AP_VARIANT_STORE);
      expect(env.AP_VARIANT_S3_ENDPOINT, name).toBe(jobEnv.AP_VARIANT_S3_ENDPOINT);
      const identity = identities.find((i) =>
        i.credentials.some(
          (c) =>
            c.accessKey === env.AP_VARIANT_S3_ACCESS_KEY_ID &&
            c.secretKey === env.AP_VARIANT_S3_SECRET_ACCESS_KEY,
        ),
      );
      expect(identity, `${name}'s S3 identity`).toBeDefined();
      expect(identity!.actions).toEqual(expect.arrayContaining(['Read', 'Write', 'List']));
    }
    expect(new URL(jobEnv.AP_VARIANT_S3_ENDPOINT!).port).toBe('8333'); // SeaweedFS's S3 port
  });
});

// ---------------------------------------------------------------------------------------------
// The systemd unit

describe('deploy/audio-proxy.service', () => {
  const unit = readFileSync(join(REPO, 'deploy/audio-proxy.service'), 'utf8');
  const setting = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(unit)?.[1];

  it('runs serve as its own user, stops node alone with SIGTERM, and waits out the drain', () => {
    expect(setting('ExecStart')).toBe('/usr/bin/node /opt/audio-proxy/bin/audio-proxy.mjs serve');
    expect(setting('User')).toBe('audio-proxy');
    expect(setting('KillSignal')).toBe('SIGTERM');
    expect(setting('KillMode')).toBe('mixed'); // not SIGTERM to ffmpeg: the drain cancels renders
    expect(Number(setting('TimeoutStopSec')) * 1000).toBeGreaterThan(SHUTDOWN_GRACE_MS);
    expect(setting('RestartPreventExitStatus')).toBe('2'); // invalid configuration
    expect(setting('Environment')).toContain('MALLOC_ARENA_MAX=2');
  });

  it('passes systemd-analyze verify', async (ctx) => {
    if (!existsSync('/usr/bin/systemd-analyze')) {
      console.warn('[deploy.test] systemd-analyze not installed: the unit was not verified');
      ctx.skip();
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'ap-unit-'));
    try {
      // verify checks that ExecStart's binary exists: point it at this machine's node.
      const path = join(dir, 'audio-proxy.service');
      writeFileSync(
        path,
        existsSync('/usr/bin/node') ? unit : unit.replace(/\/usr\/bin\/node\b/g, process.execPath),
      );
      const { stdout, stderr } = await run('systemd-analyze', ['verify', path], {
        timeout: 30_000,
      });
      expect(`${stdout}${stderr}`).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The runtime stage, emulated

/** Resolves when `fn` returns true, polling; rejects after `ms`. */
async function until(fn: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function healthcheck(cwd: string, env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['deploy/healthcheck.mjs'], {
      cwd,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: 'ignore',
    });
    child.once('exit', (code) => resolve(code ?? -1));
  });
}

describe('the runtime stage, emulated on this machine', () => {
  let work = '';
  let app = '';
  let child: ChildProcess | undefined;
  let output = '';
  let env: Record<string, string> = {};
  let port = 0;
  let s3: S3rverHandle | undefined;
  let bucketJob = '';

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ap-runtime-'));
    app = join(work, 'app'); // the image's WORKDIR
    mkdirSync(app);
    const all = dockerfile();
    const runtime = all.filter((i) => i.stage === 'runtime');
    expect(runtime.find((i) => i.op === 'WORKDIR')?.args).toBe('/app');
    // COPY lines of the runtime stage, followed; dist/ from a build like the build stage's.
    for (const copy of runtime.filter((i) => i.op === 'COPY')) {
      if (copy.args.startsWith('--from=build')) continue;
      const parts = copy.args.split(' ');
      const target = join(app, parts.at(-1)!);
      for (const source of parts.slice(0, -1)) {
        const into = parts.at(-1)!.endsWith('/') || parts.length > 2;
        const dest = into ? join(target, source.split('/').at(-1)!) : target;
        mkdirSync(dirname(dest), { recursive: true });
        cpSync(join(REPO, source), dest, { recursive: true });
      }
    }
    await run(
      process.execPath,
      [
        join(REPO, 'node_modules/typescript/bin/tsc'),
        '-p',
        'tsconfig.build.json',
        '--outDir',
        join(app, 'dist'),
      ],
      { cwd: REPO, timeout: BUILD_TIMEOUT_MS },
    );
    // `npm ci --omit=dev`, emulated: the production dependencies only, linked from this repo (no
    // TypeScript loader among them: tsx is a dev dependency), so dist/ must run on its own.
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })) {
      const from = join(REPO, 'node_modules', dep);
      if (!existsSync(from)) continue; // an optional one may be absent
      mkdirSync(dirname(join(app, 'node_modules', dep)), { recursive: true });
      symlinkSync(from, join(app, 'node_modules', dep), 'dir');
    }

    // compose.yaml's variant store, with s3rver standing in for SeaweedFS: the bucket job first
    // (the bucket does not exist yet), then a node with proxy-1's store settings.
    s3 = await startS3rver([]);
    const services = composeServices();
    const atS3rver = (e: Record<string, string>) => ({
      ...e,
      AP_VARIANT_S3_ENDPOINT: s3!.endpoint,
      AP_VARIANT_S3_ACCESS_KEY_ID: S3RVER_KEY,
      AP_VARIANT_S3_SECRET_ACCESS_KEY: S3RVER_KEY,
    });
    const job = asList(asMap(services['s3-bucket'], 's3-bucket').entrypoint, 'entrypoint');
    const jobRun = await run(process.execPath, job.slice(1), {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', ...atS3rver(composeEnv(services, 's3-bucket')) },
      timeout: 30_000,
    });
    bucketJob = jobRun.stdout;
    const store = Object.fromEntries(
      Object.entries(atS3rver(composeEnv(services, 'proxy-1'))).filter(
        ([k]) => k.startsWith('AP_VARIANT_') || k === 'AP_SERVE_MODE',
      ),
    );
    port = await freePort();
    env = {
      ...imageEnv(),
      ...store,
      AP_BIND: '127.0.0.1', // the image's 0.0.0.0, kept to this host in a test
      AP_PORT: String(port),
      AP_METRICS_PORT: String(await freePort()),
      AP_LOCAL_ROOT: (await makeFixtures()).dir,
      AP_KEY: KEY_HEX,
      AP_SALT: SALT_HEX,
      AP_LOG_LEVEL: 'warning',
    };
    const entry = [
      ...jsonArgs(runtime.find((i) => i.op === 'ENTRYPOINT')!.args),
      ...jsonArgs(runtime.find((i) => i.op === 'CMD')!.args),
    ];
    expect(entry[0]).toBe('node');
    child = spawn(process.execPath, entry.slice(1), {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d));
    child.stderr!.on('data', (d: Buffer) => (output += d));
  }, BUILD_TIMEOUT_MS + BOOT_TIMEOUT_MS);

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await s3?.close();
    if (work !== '') rmSync(work, { recursive: true, force: true });
  });

  it("runs compose's bucket job: it creates the bucket, and a second run finds it", async () => {
    expect(bucketJob).toBe('s3-bucket: created audio-variants\n');
    const again = await run(process.execPath, ['deploy/s3-bucket.mjs'], {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? '',
        AP_VARIANT_STORE: env.AP_VARIANT_STORE!,
        AP_VARIANT_S3_ENDPOINT: s3!.endpoint,
        AP_VARIANT_S3_ACCESS_KEY_ID: S3RVER_KEY,
        AP_VARIANT_S3_SECRET_ACCESS_KEY: S3RVER_KEY,
        AP_VARIANT_S3_REGION: 'us-east-1',
      },
    });
    expect(again.stdout).toBe('s3-bucket: audio-variants exists\n');
  });

  it('answers the image health check, and the check fails where nothing listens', async () => {
    await until(async () => (await healthcheck(app, env)) === 0, BOOT_TIMEOUT_MS, 'healthy');
    // The wildcard bind of the image is checked on loopback.
    expect(await healthcheck(app, { ...env, AP_BIND: '0.0.0.0' })).toBe(0);
    expect(await healthcheck(app, { ...env, AP_BIND: '', AP_PORT: '', PORT: String(port) })).toBe(
      0,
    );
    expect(await healthcheck(app, { ...env, AP_PORT: String(await freePort()) })).toBe(1);
  });

  it('serves a signed render from dist/ with production dependencies only, then stores it', async () => {
    const path = '/f:mp3/t:0:1/plain/local://stereo.wav';
    const signature = sign(path, Buffer.from(KEY_HEX, 'hex'), Buffer.from(SALT_HEX, 'hex'));
    const url = `http://127.0.0.1:${port}/${signature}${path}`;
    const res = await fetch(url);
    expect(res.status, output).toBe(200);
    expect(res.headers.get('x-audio-proxy')).toBe('MISS');
    const bytes = (await res.arrayBuffer()).byteLength;
    expect(bytes).toBeGreaterThan(1000);
    // Written back to the S3 store, then served from it through the proxy (AP_SERVE_MODE=proxy).
    let hit: Response | undefined;
    await until(
      async () => {
        const r = await fetch(url);
        if (r.headers.get('x-audio-proxy') !== 'HIT') {
          await r.arrayBuffer();
          return false;
        }
        hit = r;
        return true;
      },
      10_000,
      'a HIT from the store',
    );
    expect(hit!.status).toBe(200);
    expect(Number(hit!.headers.get('content-length'))).toBe(bytes);
    expect((await hit!.arrayBuffer()).byteLength).toBe(bytes);
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as {
      ffmpeg: { source: string };
    };
    expect(health.ffmpeg.source).toBe('env'); // the image names its ffmpeg
  });

  it('is what deploy/footprint.mjs measures: startup, then RSS and threads idle and after a render', async () => {
    // The script runs the build beside it: here, the emulated WORKDIR.
    cpSync(join(REPO, 'deploy/footprint.mjs'), join(app, 'deploy/footprint.mjs'));
    const { stdout } = await run(
      process.execPath,
      ['deploy/footprint.mjs', '--runs', '1', '--concurrency', '1'],
      { cwd: app, env: { PATH: process.env.PATH ?? '' }, timeout: 90_000 },
    );
    const summary = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      build: string;
      median: Record<string, number>;
    };
    expect(summary.build).toBe('compiled (dist/)');
    const m = summary.median;
    expect(m.startupMs).toBeGreaterThan(0);
    expect(m.startupCpuMs).toBeGreaterThan(0);
    // C = 1: 2 render and 5 probe worker threads, plus the process's own.
    expect(m.idleThreads).toBeGreaterThanOrEqual(1 + 7);
    expect(m.afterFirstRenderThreads).toBe(m.idleThreads); // the pools started at boot
    expect(m.idleRssMiB).toBeGreaterThan(50);
  }, 100_000);

  it(
    'drains on SIGTERM and exits 0 within the grace',
    async () => {
      const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
      child!.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise<'late'>((r) => setTimeout(() => r('late'), SHUTDOWN_GRACE_MS + 5_000)),
      ]);
      expect(code, output).toBe(0);
      expect(output).toContain('SIGTERM: draining');
    },
    SHUTDOWN_GRACE_MS + 10_000,
  );
});

// ---------------------------------------------------------------------------------------------
// The image, where a container engine is available

const ENGINE = (process.env.AP_TEST_CONTAINER ?? '').split(' ').filter(Boolean);
const ENGINE_FLAGS = (process.env.AP_TEST_CONTAINER_FLAGS ?? '').split(' ').filter(Boolean);
/** apt-get install ffmpeg and two npm installs: minutes, and more on a cold cache. */
const IMAGE_BUILD_TIMEOUT_MS = 20 * 60_000;

describe.runIf(ENGINE.length > 0)('the image, built and run by the container engine', () => {
  const tag = 'localhost/audio-proxy:deploy-test';
  const name = `ap-deploy-test-${process.pid}`;
  let port = 0;
  let root = '';
  const engine = (args: string[], timeout = 60_000) =>
    run(ENGINE[0]!, [...ENGINE.slice(1), ...args], { timeout, maxBuffer: 64 * 1024 * 1024 });

  beforeAll(async () => {
    await engine(['build', ...ENGINE_FLAGS, '-t', tag, REPO], IMAGE_BUILD_TIMEOUT_MS);
    port = await freePort();
    root = (await makeFixtures()).dir;
    const hostNetwork = /--network[= ]host\b/.test(ENGINE_FLAGS.join(' '));
    await engine([
      'run',
      '-d',
      '--name',
      name,
      ...ENGINE_FLAGS,
      ...(hostNetwork ? [] : ['-p', `127.0.0.1:${port}:${port}`]),
      '-e',
      `AP_PORT=${port}`,
      '-e',
      `AP_KEY=${KEY_HEX}`,
      '-e',
      `AP_SALT=${SALT_HEX}`,
      '-e',
      'AP_LOCAL_ROOT=/srv/audio',
      '-v',
      `${root}:/srv/audio:ro`,
      tag,
    ]);
  }, IMAGE_BUILD_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await engine(['rm', '-f', name]).catch(() => undefined);
  });

  it('carries its user, stop signal, health check and entry point', async () => {
    const { stdout } = await engine(['image', 'inspect', tag]);
    const image = (
      JSON.parse(stdout) as {
        Config: {
          User: string;
          StopSignal: string;
          Entrypoint: string[];
          Cmd: string[];
          Healthcheck?: { Test: string[] };
        };
        Healthcheck?: { Test: string[] }; // podman reports it here
      }[]
    )[0]!;
    const config = image.Config;
    expect(config.User).toBe('audio-proxy:audio-proxy');
    expect(config.StopSignal).toBe('SIGTERM');
    expect([...config.Entrypoint, ...config.Cmd]).toEqual(['node', 'bin/audio-proxy.mjs', 'serve']);
    // podman keeps HEALTHCHECK only in Docker's image format (BUILDAH_FORMAT=docker).
    expect((config.Healthcheck ?? image.Healthcheck)?.Test).toEqual([
      'CMD',
      'node',
      'deploy/healthcheck.mjs',
    ]);
  });

  it('runs as its unprivileged user and passes its own health check', async () => {
    await until(
      async () => {
        try {
          await engine(['exec', name, 'node', 'deploy/healthcheck.mjs']);
          return true;
        } catch {
          return false;
        }
      },
      BOOT_TIMEOUT_MS,
      'the container to be healthy',
    );
    const { stdout } = await engine(['exec', name, 'id', '-u']);
    expect(stdout.trim()).not.toBe('0');
  });

  it('renders with Debian ffmpeg', async () => {
    const path = '/f:opus/t:0:1/plain/local://stereo.wav';
    const signature = sign(path, Buffer.from(KEY_HEX, 'hex'), Buffer.from(SALT_HEX, 'hex'));
    const res = await fetch(`http://127.0.0.1:${port}/${signature}${path}`);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(500);
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as {
      ffmpeg: { path: string; source: string };
    };
    expect(health.ffmpeg).toEqual({ path: '/usr/bin/ffmpeg', source: 'env' });
  });

  it('stops on SIGTERM with exit code 0', async () => {
    await engine(['stop', '-t', '30', name], 60_000);
    const { stdout } = await engine(['inspect', '--format', '{{.State.ExitCode}}', name]);
    expect(stdout.trim()).toBe('0');
    const logs = await engine(['logs', name]);
    expect(`${logs.stdout}${logs.stderr}`).toContain('SIGTERM: draining');
  }, 90_000);
});
