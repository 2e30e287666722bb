// The `audio-proxy` command as an operator runs it (#16 item 4): the real bin in child processes.
// --help has no side effects, --version answers, unknown flags and commands are refused by name
// with exit 2, serve takes --host/--port beside AP_BIND/AP_PORT, boot failures are one line and
// exit 1, logs are pretty on a terminal (a pseudo-terminal through util-linux `script`) and JSON
// lines on a pipe unless AP_LOG_FORMAT says otherwise, and `sign` prints a path that verifies
// when a client sends it.
import { spawn, spawnSync } from 'node:child_process';
import { copyFile, mkdtemp, readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { sign } from '../src/http/signature.js';
import { createAudioProxy } from '../src/proxy.js';
import { makeFixtures } from './fixtures/audio.js';
import { waitFor } from './integration/harness.js';
import { freePort } from './ports.js';

const BIN = join(process.cwd(), 'bin/audio-proxy.mjs');
/** A command that should end at once; one that is still running after this has started a server. */
const QUICK_EXIT_MS = 20_000;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the bin; kills it (code null) if it has not exited within `timeoutMs`. */
function run(args: string[], env: Record<string, string> = {}, timeoutMs = QUICK_EXIT_MS) {
  return new Promise<Run>((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', AUDIO_PROXY_FROM_SOURCE: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Our own lines on stderr (the AWS SDK's Node-version warning is not ours). */
const ownLines = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('audio-proxy'));

describe('--help and --version', () => {
  it('prints usage and exits 0 without side effects, for every command', async () => {
    const env = { AP_PORT: String(await freePort()), AP_METRICS_PORT: String(await freePort()) };
    const cases = [
      ['--help'],
      ['-h'],
      ['help', 'serve'],
      ['serve', '--help'],
      ['serve', '-h'],
      ['serve', '--bogus', '--help'],
      ['demo', '--help'],
      ['inspect', '-h'],
      ['sign', '--help'],
    ];
    const runs = await Promise.all(cases.map((args) => run(args, env)));
    for (const [i, r] of runs.entries()) {
      expect({ args: cases[i], code: r.code }).toEqual({ args: cases[i], code: 0 });
      expect(r.stdout).toMatch(/^usage: audio-proxy/);
      expect(r.stdout).not.toContain('listening');
      expect(r.stdout).not.toContain('Preparing the demo library');
    }
    expect(runs[3]!.stdout).toContain('--port');
    expect(runs[3]!.stdout).toContain('AP_BIND');
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(await readFile(join(process.cwd(), 'package.json'), 'utf8'));
    const r = await run(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });
});

describe('refusals', () => {
  it('refuses unknown flags, commands and arguments by name with exit 2', async () => {
    const env = { AP_PORT: String(await freePort()), AP_METRICS_PORT: String(await freePort()) };
    const cases: Array<[string[], string]> = [
      [['serve', '--bogus'], '--bogus'],
      [['demo', '--frob=1'], '--frob'],
      [['frobnicate'], '"frobnicate"'],
      [['--bogus'], '--bogus'],
      [['serve', 'extra'], '"extra"'],
      [['serve', '--port', 'abc'], '--port'],
      [['serve', '--host', 'example.com'], '--host'],
      [['sign', '--encoded', '/f:mp3/plain/local://a b.wav'], '" "'],
      [['sign', '/f:mp3/plain/local://./a.wav'], '"."'],
    ];
    const runs = await Promise.all(cases.map(([args]) => run(args, env)));
    for (const [i, r] of runs.entries()) {
      const [args, named] = cases[i]!;
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(ownLines(r.stderr)[0]).toContain(named);
      expect(r.stdout).toBe('');
    }
  });
});

describe('serve', () => {
  it('--host and --port set the listener (beside AP_BIND and AP_PORT); SIGTERM drains', {
    timeout: 90_000,
  }, async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--host', '127.0.0.1', '--port', String(port)],
      {
        env: {
          PATH: process.env.PATH ?? '',
          AUDIO_PROXY_FROM_SOURCE: '1',
          AP_PORT: String(await freePort()), // the flag wins
          AP_METRICS_PORT: String(metricsPort),
          AP_LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await waitFor(() => out.includes('audio-proxy listening'), 60_000, 50);
      expect(out).toContain(`http://127.0.0.1:${port}`);
      // stdout is a pipe here: AP_LOG_FORMAT=auto (the default) writes JSON lines.
      const listening = out.split('\n').find((l) => l.includes('audio-proxy listening'))!;
      expect(JSON.parse(listening)).toMatchObject({ level: 30, msg: 'audio-proxy listening' });
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(out).toContain('SIGTERM: draining: new requests answer 503');
  });

  it('a busy port is one line on stderr and exit 1', { timeout: 60_000 }, async () => {
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as AddressInfo).port;
    try {
      const r = await run(
        ['serve', '--host', '127.0.0.1', '--port', String(port)],
        { AP_METRICS_PORT: String(await freePort()), AP_LOG_LEVEL: 'error' },
        45_000,
      );
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(
          new RegExp(`^audio-proxy serve: cannot listen on 127\\.0\\.0\\.1:${port} .*EADDRINUSE`),
        ),
      ]);
    } finally {
      squatter.close();
    }
  });

  it('a preset the option grammar refuses is a configuration error: named, exit 2', async () => {
    const r = await run(['serve'], {
      AP_PORT: String(await freePort()),
      AP_METRICS_PORT: String(await freePort()),
      AP_PRESETS: 'ok=f:opus,typo=f:opus/brr:96',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'AP_PRESETS: the preset "typo" is not a valid option string: unknown option "brr:96"',
    );
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it('an S3 variant store that fails its boot check is one line and exit 1', {
    timeout: 60_000,
  }, async () => {
    const r = await run(
      ['serve'],
      {
        AP_PORT: String(await freePort()),
        AP_METRICS_PORT: String(await freePort()),
        AP_LOG_LEVEL: 'error',
        AP_VARIANT_STORE: 's3://audio-proxy-boot-check',
        AP_VARIANT_S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`, // nothing listens
        AP_VARIANT_S3_ACCESS_KEY_ID: 'id',
        AP_VARIANT_S3_SECRET_ACCESS_KEY: 'secret',
        AP_VARIANT_S3_REGION: 'us-east-1',
      },
      45_000,
    );
    expect(r.code).toBe(1);
    expect(ownLines(r.stderr)).toEqual([
      expect.stringMatching(/^audio-proxy serve: the variant store is unusable: AP_VARIANT_STORE=/),
    ]);
    expect(r.stderr).not.toMatch(/^\s+at /m); // no stack trace
  });
});

/** util-linux `script`, which runs a command on a pseudo-terminal (absent: those tests skip). */
const hasScript = process.platform === 'linux' && spawnSync('script', ['--version']).status === 0;

/** `serve` on a pseudo-terminal until it says it listens; answers what the terminal showed. */
async function serveOnTerminal(env: Record<string, string>): Promise<string> {
  const child = spawn(
    'script',
    ['-q', '-e', '-c', `exec '${process.execPath}' '${BIN}' serve`, '/dev/null'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        AUDIO_PROXY_FROM_SOURCE: '1',
        AP_BIND: '127.0.0.1',
        AP_PORT: String(await freePort()),
        AP_METRICS_PORT: String(await freePort()),
        AP_LOG_LEVEL: 'info',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await waitFor(() => out.includes('audio-proxy listening'), 60_000, 50);
  } finally {
    child.kill('SIGTERM'); // script ends the session, and the proxy with it
    await exited;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes
  return out.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
}

describe('log format (AP_LOG_FORMAT)', () => {
  it.skipIf(!hasScript)(
    'on a terminal, logs are pretty by default and JSON when asked',
    {
      timeout: 90_000,
    },
    async () => {
      const [pretty, json] = await Promise.all([
        serveOnTerminal({}),
        serveOnTerminal({ AP_LOG_FORMAT: 'json' }),
      ]);
      const line = (out: string) =>
        out.split('\n').find((l) => l.includes('audio-proxy listening'))!;
      expect(line(pretty)).toMatch(
        /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: audio-proxy listening \{"url":"http:\/\/127\.0\.0\.1:\d+"/,
      );
      expect(JSON.parse(line(json))).toMatchObject({ level: 30, msg: 'audio-proxy listening' });
    },
  );

  it('refuses a format it does not know, naming the variable', async () => {
    const r = await run(['serve'], { AP_LOG_FORMAT: 'colour' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('AP_LOG_FORMAT');
    expect(r.stderr).toContain('`pretty`');
  });
});

describe('sign', () => {
  it('percent-encodes spaces, non-ASCII and reserved characters; the printed path verifies', {
    timeout: 60_000,
  }, async () => {
    const fixtures = await makeFixtures();
    const root = await mkdtemp(join(tmpdir(), 'ap-sign-'));
    const names = ['my song é.wav', '音楽 #1?.wav', '50% [live] "a\\b".wav'];
    for (const name of names) await copyFile(fixtures.stereoWav, join(root, name));
    const keys = { AP_KEY: 'a1'.repeat(32), AP_SALT: 'b2'.repeat(32) };
    const signed = await Promise.all(
      names.map((n) => run(['sign', `/f:mp3/plain/local://${n}`], keys)),
    );
    const proxy = await createAudioProxy({
      config: loadConfig({ ...keys, AP_LOCAL_ROOT: root, AP_LOG_LEVEL: 'error' }),
      logger: pino({ level: 'silent' }),
    });
    try {
      const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
      for (const [i, r] of signed.entries()) {
        expect(r.code, r.stderr).toBe(0);
        const path = r.stdout.trim();
        expect(path).toMatch(/^\/[A-Za-z0-9_-]{43}\/f:mp3\/plain\/local:\/\/[\x21-\x7e]+$/);
        const res = await fetch(`${url}${path}`); // a WHATWG client, as a browser sends it
        const body = Buffer.from(await res.arrayBuffer());
        expect({ name: names[i], status: res.status }).toEqual({ name: names[i], status: 200 });
        expect(body.length).toBeGreaterThan(1_000);
      }
    } finally {
      await proxy.close();
    }
  });
});

describe('sign with several key/salt pairs (rotation)', () => {
  it('signs with the first pair; unequal counts are refused as a configuration error', async () => {
    const env = { AP_KEY: `${'a1'.repeat(32)},${'a2'.repeat(32)}`, AP_SALT: 'b1,b2' };
    const path = '/f:mp3/plain/local://a.wav';
    const r = await run(['sign', path], env);
    expect(r.code, r.stderr).toBe(0);
    const first = sign(path, Buffer.from('a1'.repeat(32), 'hex'), Buffer.from('b1', 'hex'));
    expect(r.stdout).toBe(`/${first}${path}\n`);
    const mismatched = await run(['sign', path], { ...env, AP_SALT: 'b1' });
    expect(mismatched.code).toBe(2);
    expect(mismatched.stderr).toContain('AP_SALT has 1 value and AP_KEY has 2');
  });
});
