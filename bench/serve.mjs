/**
 * The proxy `bench/cpu.ts` measures, as it runs in production: the compiled build (`dist/`) on
 * plain Node, with no TypeScript loader in the process (tsx's loader thread and its esbuild
 * child would be counted as the proxy's CPU: about 30 % more per MISS and 5× the idle cost).
 *
 * `node bench/serve.mjs ROOT STORE [PROFILE]`: serves `local://` sources from ROOT with a file
 * variant store in STORE, 2 render slots, on 127.0.0.1 at a free port, and prints
 * `LISTENING <url>`. With PROFILE, SIGUSR2 starts V8's sampling profiler on the main thread
 * (prints `PROFILING`) and SIGTERM writes the profile there. SIGTERM closes the proxy and exits.
 * A line `cpu` on stdin is answered `CPU <µs>`: the process's own CPU (`process.cpuUsage()`).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const [root, storeRoot, profileTo] = process.argv.slice(2);
const dist = new URL('../dist/', import.meta.url);
const { loadConfig } = await import(new URL('config/index.js', dist).href);
const { createAudioProxy } = await import(new URL('proxy.js', dist).href);
const { pino } = await import('pino');
const config = loadConfig({
  AP_LOCAL_ROOT: root,
  AP_ALLOW_INSECURE: '1',
  AP_MAX_CONCURRENCY: '2',
  AP_QUEUE_SIZE: '64',
  AP_VARIANT_STORE: `file://${storeRoot}`,
  AP_SERVE_MODE: 'proxy',
  AP_LOG_LEVEL: 'error',
  ...(process.env.AP_FFMPEG_NICE ? { AP_FFMPEG_NICE: process.env.AP_FFMPEG_NICE } : {}),
});
const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
const session = profileTo ? new Session() : undefined;
session?.connect();
process.on('SIGUSR2', () => {
  void (async () => {
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    process.stdout.write('PROFILING\n');
  })();
});
process.stdout.write(`LISTENING ${url}\n`);
// `cpu` on stdin: this process's CPU so far (all threads, live and exited), in microseconds.
process.stdin.setEncoding('utf8');
process.stdin.on('data', (text) => {
  for (const line of text.split('\n')) {
    if (line.trim() !== 'cpu') continue;
    const { user, system } = process.cpuUsage();
    process.stdout.write(`CPU ${user + system}\n`);
  }
});
process.once('SIGTERM', () => {
  void (async () => {
    if (session && profileTo) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(profileTo, JSON.stringify(profile));
    }
    await proxy.close();
    process.exit(0);
  })();
});
