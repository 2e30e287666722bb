// The package as a consumer gets it. A copy of the working tree without dist/ (an unbuilt clone)
// is packed with `npm pack`, so `prepack` must build; the tarball's file list is checked against
// the `files` allowlist; then the tarball is unpacked into an empty project whose node_modules
// holds only the runtime dependencies (linked from this repo's node_modules: no registry, no
// devDependencies, and no tsx, so nothing can lean on a TypeScript loader), and an ESM consumer,
// a CommonJS consumer, a TypeScript consumer under strict `nodenext` and the CLI run from it.
// The chart subpaths are checked to import nothing beyond xstate and node builtins.
import { execFile } from 'node:child_process';
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
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
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
/** Runtime dependencies a consumer must not need (a TypeScript loader is not a runtime need). */
const NOT_LINKED = new Set(['tsx']);

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  optionalDependencies?: Record<string, string>;
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
    if (NOT_LINKED.has(dep) || !existsSync(from)) continue; // an optional one may be absent
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
});
