// The package as a consumer gets it. A copy of the working tree without dist/ (an unbuilt clone)
// is packed with `npm pack`, so `prepack` must build; the tarball's file list is checked against
// the `files` allowlist; then the tarball is unpacked into an empty project whose node_modules
// holds only the runtime dependencies (linked from this repo's node_modules: no registry, no
// devDependencies, so no TypeScript loader to lean on), and an ESM consumer, a CommonJS
// consumer, a TypeScript consumer under strict `nodenext`, the CLI and two of examples/ (which
// import the package by its name, as a consumer does) run from it. The chart subpaths are
// checked to import nothing beyond xstate and node builtins. package.json itself: no TypeScript
// tooling among the runtime dependencies, library-style ranges, one copy of the AWS SDK's
// shared internals in the lockfile.
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDemoLibrary } from '../src/demo.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';

const run = promisify(execFile);
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** `npm pack` runs prepack (clean + tsc, ~10 s idle); a busy 2-core CI box can take 4× that. */
const PACK_TIMEOUT_MS = 120_000;
/** One consumer process: import, a short render through the worker pool, close. */
const CONSUMER_TIMEOUT_MS = 60_000;
/** Left out of the copy: what a fresh clone does not have, or what is not source. */
const NOT_COPIED = new Set(['node_modules', '.git', 'dist', 'coverage', '.tmp', 'test-artifacts']);
/** Dev tooling that must never be a runtime dependency (no TypeScript loader in production). */
const DEV_ONLY = ['tsx', 'esbuild', 'typescript', 'vite', 'vitest'];
/** The examples run from the tarball: the main entry with a render, and a subpath export. */
const PACKED_EXAMPLES: ReadonlyArray<readonly [file: string, expected: RegExp]> = [
  ['node-http.ts', /^→ 200 audio\/ogg, [1-9]\d* bytes \(MISS\)$/m],
  ['waiting-room.ts', /^runs timed: [1-9]/m],
];

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies: Record<string, string>;
  scripts: Record<string, string>;
  exports: Record<string, string | { types: string; default: string }>;
};

let work = '';
let consumer = '';
let files: string[] = [];

function node(args: string[], cwd = consumer) {
  return run(process.execPath, args, { cwd, timeout: CONSUMER_TIMEOUT_MS });
}

/** Relative import specifiers of a built module (static and dynamic), resolved to files. */
function importsOf(file: string): { local: string[]; bare: string[] } {
  const text = readFileSync(file, 'utf8');
  const local: string[] = [];
  const bare: string[] = [];
  const re =
    /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|\n)\s*import\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]/g;
  for (const m of text.matchAll(re)) {
    const spec = m[1] ?? m[2] ?? m[3] ?? '';
    if (spec.startsWith('.')) local.push(resolve(dirname(file), spec));
    else bare.push(spec);
  }
  return { local, bare };
}

/** Every bare specifier reachable from a module through its relative imports. */
function externalClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const bare = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const file = stack.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    const found = importsOf(file);
    stack.push(...found.local);
    for (const b of found.bare) bare.add(b);
  }
  return bare;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ap-package-'));
  const clone = join(work, 'clone');
  cpSync(REPO, clone, {
    recursive: true,
    filter: (src) => {
      const rel = relative(REPO, src);
      return rel === '' || !NOT_COPIED.has(rel.split(/[\\/]/)[0] as string);
    },
  });
  symlinkSync(join(REPO, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const out = join(work, 'out');
  mkdirSync(out);
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: clone,
    timeout: PACK_TIMEOUT_MS,
    maxBuffer: 16 * 1024 * 1024,
  });
  // Some npm versions print the prepack script's output on stdout before the JSON array.
  const packed = JSON.parse(stdout.slice(stdout.search(/^\[/m))) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  const entry = packed[0];
  if (entry === undefined) throw new Error(`npm pack printed no entry: ${stdout}`);
  files = entry.files.map((f) => f.path);

  consumer = join(work, 'consumer');
  const installed = join(consumer, 'node_modules/audio-proxy');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', join(out, entry.filename), '-C', installed, '--strip-components=1']);
  const deps = { ...pkg.dependencies, ...pkg.optionalDependencies };
  for (const dep of Object.keys(deps)) {
    const from = join(REPO, 'node_modules', dep);
    if (!existsSync(from)) continue; // an optional one may be absent
    mkdirSync(dirname(join(consumer, 'node_modules', dep)), { recursive: true });
    symlinkSync(from, join(consumer, 'node_modules', dep), 'dir');
  }
  writeFileSync(
    join(consumer, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
  );
}, PACK_TIMEOUT_MS + 30_000);

afterAll(() => {
  if (work !== '') rmSync(work, { recursive: true, force: true });
});

describe('package.json', () => {
  const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; dev?: boolean; dependencies?: object }>;
  };
  const runtime = { ...pkg.dependencies, ...pkg.optionalDependencies };

  it('has no TypeScript tooling among the runtime dependencies; `npm start` builds first', () => {
    for (const tool of DEV_ONLY) expect(Object.keys(runtime)).not.toContain(tool);
    expect(pkg.devDependencies.tsx).toBeDefined();
    // The lockfile agrees: an `npm ci --omit=dev` leaves the loader and its compiler out.
    expect(lock.packages['node_modules/tsx']?.dev).toBe(true);
    expect(lock.packages['node_modules/esbuild']?.dev).toBe(true);
    expect(pkg.scripts.prestart).toBe('npm run build');
  });

  it('asks for library-style ranges; the lockfile pins one version inside each', () => {
    for (const [name, range] of Object.entries(runtime)) {
      const m = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range);
      expect({ name, range, caret: m !== null }).toEqual({ name, range, caret: true });
      const locked = lock.packages[`node_modules/${name}`]?.version;
      if (locked === undefined) continue; // an optional one for another platform
      const [major, minor, patch] = locked.split('.').map(Number) as [number, number, number];
      const [, a, b, c] = (m as RegExpExecArray).map(Number) as [number, number, number, number];
      // ^a.b.c with a > 0: same major, not below the floor.
      const inside = major === a && (minor > b || (minor === b && patch >= c));
      expect({ name, range, locked, inside }).toEqual({ name, range, locked, inside: true });
    }
    expect(lock.packages['']?.dependencies).toEqual(pkg.dependencies);
  });

  it('resolves the two AWS SDK packages onto one copy of their shared internals', () => {
    const client = pkg.dependencies['@aws-sdk/client-s3'];
    const presigner = pkg.dependencies['@aws-sdk/s3-request-presigner'];
    // The same major range; AWS publishes each package only when it changes, so their newest
    // versions differ (the presigner has no 3.1175.0): consistency is one copy of what they share.
    expect(client?.split('.')[0]).toBe('^3');
    expect(presigner?.split('.')[0]).toBe('^3');
    const paths = Object.keys(lock.packages).filter((p) =>
      /node_modules\/@(aws-sdk|smithy)\//.test(p),
    );
    expect(paths.length).toBeGreaterThan(20);
    const nested = paths.filter(
      (p) => p.indexOf('node_modules/') !== p.lastIndexOf('node_modules/'),
    );
    expect(nested).toEqual([]);
  });

  it('examples/ import the package by its name, through subpaths the exports map has', () => {
    const dir = join(REPO, 'examples');
    const specifiers = new Set<string>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(dir, file), 'utf8');
      expect({ file, relative: /from\s+['"]\.\.?\//.test(text) }).toEqual({
        file,
        relative: false,
      });
      for (const m of text.matchAll(/from\s+['"](audio-proxy(?:\/[^'"]*)?)['"]/g)) {
        specifiers.add(m[1] as string);
      }
    }
    expect(specifiers).toContain('audio-proxy');
    for (const spec of specifiers) {
      expect(Object.keys(pkg.exports)).toContain(`.${spec.slice('audio-proxy'.length)}`);
    }
  });
});

describe('npm pack', () => {
  it('builds dist/ in prepack from a clone without one', () => {
    expect(files).toContain('dist/index.js');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('dist/cli.js');
    expect(files).toContain('dist/workers/renderTask.js');
  });

  it('ships what runs and the licence, nothing else', () => {
    for (const f of ['package.json', 'README.md', 'LICENSE', 'NOTICE', 'bin/audio-proxy.mjs']) {
      expect(files).toContain(f);
    }
    const top = new Set(files.map((f) => f.split('/')[0]));
    expect([...top].sort()).toEqual(
      ['LICENSE', 'NOTICE', 'README.md', 'bin', 'dist', 'docs', 'package.json'].sort(),
    );
    expect(
      files.filter((f) => f.endsWith('.map') || (f.endsWith('.ts') && !f.endsWith('.d.ts'))),
    ).toEqual([]);
  });

  it('ships every file the exports map and the README point at', () => {
    for (const target of Object.values(pkg.exports)) {
      const paths = typeof target === 'string' ? [target] : [target.types, target.default];
      for (const p of paths) expect(files).toContain(p.replace(/^\.\//, ''));
    }
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    for (const m of readme.matchAll(/`(docs\/[\w-]+\.md)(?:#[\w-]+)?`/g)) {
      expect(files).toContain(m[1]);
    }
  });

  it('keeps the chart subpaths light: xstate and node builtins only', () => {
    const root = join(consumer, 'node_modules/audio-proxy');
    const subpaths = Object.entries(pkg.exports).filter(
      ([k]) => k.startsWith('./machines/') || k.startsWith('./actors'),
    );
    expect(subpaths.length).toBeGreaterThan(5);
    for (const [name, target] of subpaths) {
      const file = join(root, typeof target === 'string' ? target : target.default);
      const heavy = [...externalClosure(file)].filter(
        (s) => s !== 'xstate' && !s.startsWith('node:'),
      );
      expect({ name, heavy }).toEqual({ name, heavy: [] });
    }
    // The check can fail: the main entry reaches the heavy ones.
    const main = externalClosure(join(root, 'dist/index.js'));
    expect(main).toContain('piscina');
    expect(main).toContain('@aws-sdk/client-s3');
  });
});

describe('the tarball installed in an empty project', () => {
  it('runs an ESM consumer that renders through the worker pool', async () => {
    const library = await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
    writeFileSync(
      join(consumer, 'esm.mjs'),
      `import { createServer } from 'node:http';
import { createAudioProxy, loadConfig, semaphoreMachine, VERSION } from 'audio-proxy';
import { semaphoreMachine as alone } from 'audio-proxy/machines/semaphore';
import { call } from 'audio-proxy/actors';
import pkg from 'audio-proxy/package.json' with { type: 'json' };
if (alone !== semaphoreMachine || typeof call !== 'function') throw new Error('subpaths differ');
const config = loadConfig({ AP_LOCAL_ROOT: ${JSON.stringify(library)}, AP_ALLOW_INSECURE: '1', AP_LOG_LEVEL: 'warning' });
const proxy = await createAudioProxy({ config });
const server = createServer((req, res) => void proxy.handler(req, res));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const res = await fetch('http://127.0.0.1:' + server.address().port + '/insecure/f:opus/t:0:3/plain/local://music.flac');
const bytes = (await res.arrayBuffer()).byteLength;
server.close();
server.closeAllConnections();
await proxy.close();
console.log(JSON.stringify({ status: res.status, type: res.headers.get('content-type'), bytes, version: VERSION, pkg: pkg.version }));
`,
    );
    const { stdout } = await node(['esm.mjs']);
    const result = JSON.parse(stdout.trim().split('\n').at(-1) as string);
    expect(result).toMatchObject({ status: 200, type: 'audio/ogg', version: pkg.version });
    expect(result.pkg).toBe(pkg.version);
    expect(result.bytes).toBeGreaterThan(1000);
  }, 90_000);

  it('runs a CommonJS consumer (require of the ESM build)', async () => {
    writeFileSync(
      join(consumer, 'cjs.cjs'),
      `const ap = require('audio-proxy');
const { semaphoreMachine } = require('audio-proxy/machines/semaphore');
const { processSupervisorMachine } = require('audio-proxy/machines/processSupervisor');
const { createActor } = require('xstate');
const actor = createActor(semaphoreMachine, { input: { capacity: 2, queueSize: 2 } }).start();
console.log(JSON.stringify({
  createAudioProxy: typeof ap.createAudioProxy,
  same: ap.semaphoreMachine === semaphoreMachine && ap.processSupervisorMachine === processSupervisorMachine,
  state: actor.getSnapshot().status,
  version: require('audio-proxy/package.json').version,
}));
actor.stop();
`,
    );
    const { stdout } = await node(['cjs.cjs']);
    expect(JSON.parse(stdout.trim())).toEqual({
      createAudioProxy: 'function',
      same: true,
      state: 'active',
      version: pkg.version,
    });
  });

  it('typechecks a TypeScript consumer under strict nodenext against the shipped .d.ts', async () => {
    writeFileSync(
      join(consumer, 'consumer.ts'),
      `import { type AudioProxy, createAudioProxy, loadConfig } from 'audio-proxy';
import { semaphoreMachine } from 'audio-proxy/machines/semaphore';
import { supervisorClient } from 'audio-proxy';
const make: (c: ReturnType<typeof loadConfig>) => Promise<AudioProxy> = (config) => createAudioProxy({ config });
export { make, semaphoreMachine, supervisorClient };
`,
    );
    writeFileSync(
      join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2022',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [join(REPO, 'node_modules/@types')],
        },
        files: ['consumer.ts'],
      }),
    );
    await run(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', '.'], {
      cwd: consumer,
      timeout: CONSUMER_TIMEOUT_MS,
    }).catch((e: { stdout?: string; stderr?: string }) => {
      throw new Error(`tsc failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    });
  });

  it('runs the CLI from the package: --version, --help, a refused flag', async () => {
    const bin = 'node_modules/audio-proxy/bin/audio-proxy.mjs';
    const version = await node([bin, '--version']);
    expect(version.stdout).toBe(`${pkg.version}\n`);
    const help = await node([bin, '--help']);
    expect(help.stdout).toMatch(/serve/);
    const serveHelp = await node([bin, 'serve', '--help']);
    expect(serveHelp.stdout).toMatch(/--port/);
    const refused = await node([bin, 'serve', '--bogus']).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--bogus/);
  });

  it('runs examples/ as written, the package resolved by its name from node_modules', async () => {
    await ensureDemoLibrary(resolveFfmpeg({ env: process.env }).path);
    mkdirSync(join(consumer, 'examples'), { recursive: true });
    // tsx only strips the types here: the consumer has no tsconfig, so `audio-proxy` is the
    // installed package's dist/, not the repository's src/ (which its tsconfig `paths` map).
    const loader = pathToFileURL(join(REPO, 'node_modules/tsx/dist/esm/index.mjs')).href;
    for (const [file, expected] of PACKED_EXAMPLES) {
      cpSync(join(REPO, 'examples', file), join(consumer, 'examples', file));
      const { stdout } = await node(['--import', loader, join('examples', file)]);
      expect(stdout).toMatch(expected);
    }
  }, 120_000);

  it('says in one line that dist/ is missing when there is no build and no tsx', async () => {
    const bare = join(work, 'bare');
    mkdirSync(join(bare, 'bin'), { recursive: true });
    cpSync(join(REPO, 'bin/audio-proxy.mjs'), join(bare, 'bin/audio-proxy.mjs'));
    const r = await node([join(bare, 'bin/audio-proxy.mjs'), '--version'], bare).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'audio-proxy: dist/ is not built and tsx (a dev dependency) is not installed: run `npm run build`\n',
    );
  });
});
