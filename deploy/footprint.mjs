#!/usr/bin/env node
// Measures what one audio-proxy process costs on this machine, as docs/operations.md reports it:
// the time from spawning `audio-proxy serve` to its first `/health` 200 (and the CPU time it used
// by then, which depends less on what else the machine runs), then its RSS and thread
// count idle (5 s after that answer) and after its first render (a 30 s MP3 of a generated FLAC,
// read to the end, then 2 s). RSS and threads are the proxy process's own (`/proc/<pid>/status`
// VmRSS and Threads: the main thread, its worker threads, V8's and libuv's helpers); ffmpeg runs
// as a child process and is not counted. Linux only.
//
//   node deploy/footprint.mjs [--runs N] [--concurrency C] [--from-source]
//
// It runs the compiled build (dist/, `npm run build`) unless --from-source (TypeScript through
// tsx). --concurrency sets AP_MAX_CONCURRENCY (default: the CPU count). Each run is a fresh
// process; the medians are printed last.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    concurrency: { type: 'string' },
    'from-source': { type: 'boolean', default: false },
  },
});
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const fromSource = values['from-source'];
if (!fromSource && !existsSync(join(ROOT, 'dist/cli.js'))) {
  process.stderr.write('footprint: no dist/: run `npm run build` first, or pass --from-source\n');
  process.exit(2);
}
const runs = Number(values.runs);
const IDLE_SETTLE_MS = 5_000; // V8 keeps compiling on helper threads for seconds after start-up
const AFTER_RENDER_MS = 2_000; // the render's coordinator lingers 1 s

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function status(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1]);
  return { rssMiB: Math.round((field('VmRSS') / 1024) * 10) / 10, threads: field('Threads') };
}

/** CPU time the process has used, all its threads, in ms (`/proc/<pid>/stat` utime + stime). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15)
  return Math.round((ticks * 1000) / CLOCK_TICKS);
}
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const library = mkdtempSync(join(tmpdir(), 'ap-footprint-'));
const ffmpeg = process.env.AP_FFMPEG_PATH || 'ffmpeg';
execFileSync(ffmpeg, [
  ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
  ...['-i', 'sine=frequency=440:duration=60', '-ac', '2', join(library, 'tone.flac')],
]);

const results = [];
try {
  for (let i = 0; i < runs; i++) {
    const port = await freePort();
    const env = {
      ...process.env,
      AP_BIND: '127.0.0.1',
      AP_PORT: String(port),
      AP_METRICS_PORT: String(await freePort()),
      AP_LOCAL_ROOT: library,
      AP_ALLOW_INSECURE: '1',
      AP_LOG_LEVEL: 'error',
      ...(values.concurrency ? { AP_MAX_CONCURRENCY: values.concurrency } : {}),
      ...(fromSource ? { AUDIO_PROXY_FROM_SOURCE: '1' } : {}),
    };
    const started = performance.now();
    const child = spawn(process.execPath, [join(ROOT, 'bin/audio-proxy.mjs'), 'serve'], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const base = `http://127.0.0.1:${port}`;
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(`the proxy exited with ${child.exitCode}: ${stderr}`);
      }
      try {
        if ((await fetch(`${base}/health`)).status === 200) break;
      } catch {}
      if (performance.now() - started > 60_000) throw new Error('no /health 200 within 60 s');
      await sleep(10);
    }
    const startupMs = Math.round(performance.now() - started);
    const startupCpuMs = cpuMs(child.pid);
    await sleep(IDLE_SETTLE_MS);
    const idle = status(child.pid);
    const res = await fetch(`${base}/insecure/f:mp3/t:0:30/plain/local://tone.flac`);
    const bytes = (await res.arrayBuffer()).byteLength;
    if (res.status !== 200 || bytes < 1000) throw new Error(`render: ${res.status}, ${bytes} B`);
    await sleep(AFTER_RENDER_MS);
    const rendered = status(child.pid);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    if ((await exited) !== 0) throw new Error(`the proxy did not stop cleanly: ${stderr}`);
    const row = { startupMs, startupCpuMs, idle, afterFirstRender: rendered };
    results.push(row);
    process.stdout.write(`${JSON.stringify(row)}\n`);
  }
} finally {
  rmSync(library, { recursive: true, force: true });
}
const m = (pick) => median(results.map(pick));
process.stdout.write(
  `${JSON.stringify({
    build: fromSource ? 'source (tsx)' : 'compiled (dist/)',
    node: process.version,
    cpus: availableParallelism(),
    concurrency: values.concurrency ? Number(values.concurrency) : availableParallelism(),
    runs,
    median: {
      startupMs: m((r) => r.startupMs),
      startupCpuMs: m((r) => r.startupCpuMs),
      idleRssMiB: m((r) => r.idle.rssMiB),
      idleThreads: m((r) => r.idle.threads),
      afterFirstRenderRssMiB: m((r) => r.afterFirstRender.rssMiB),
      afterFirstRenderThreads: m((r) => r.afterFirstRender.threads),
    },
  })}\n`,
);
