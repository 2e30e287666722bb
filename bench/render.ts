/**
 * Render-path benchmarks, each against its baseline in the same run (interleaved rounds,
 * medians reported):
 *
 *  P1  8 distinct renders of a 60 s source at AP_MAX_CONCURRENCY=2 through the proxy, divided
 *      by the same ffmpeg argv run directly, two at a time.            target ≤ 1.02
 *  P2  64 identical concurrent requests (one ffmpeg) divided by one request.  target ≤ 1.05
 *  P7  time to first byte through the proxy vs ffmpeg's own first output.
 *  P2' P2 again with ffmpeg pinned to its own core and the proxy plus its 64 clients to the
 *      other (`taskset`; skipped without it or with fewer than 2 cores). On this 2-core box the
 *      unpinned P2 has three parties (ffmpeg, the proxy, 64 in-process clients) on two cores, so
 *      the scheduler slows ffmpeg whenever the fan-out runs on its core; pinned, the ratio shows
 *      what coalescing itself costs the render's critical path.
 *
 * Run: `npx tsx bench/render.ts [rounds]` (default 5). Needs ffmpeg on PATH. The proxies run at
 * the default `AP_FFMPEG_NICE` unless it is set in the environment (`AP_FFMPEG_NICE=0 npx tsx
 * bench/render.ts` measures encoders at the proxy's own priority).
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import { parseRoute } from '../src/http/options.js';
import { createAudioProxy } from '../src/proxy.js';
import { buildRenderArgv } from '../src/workers/argv.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { makeStereoWav } from './fixtures.js';
import { report } from './report.js';

const ROUNDS = Number(process.argv[2] ?? 5);
const ffmpeg = resolveFfmpeg({ env: process.env }).path;

const VARIANTS = [
  'f:mp3/br:128',
  'f:mp3/br:64/ch:1',
  'f:opus/br:96',
  'f:ogg/q:5',
  'f:aac/br:128',
  'f:flac',
  'f:wav/sr:22050/ch:1',
  'f:opus/br:32/ch:1',
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function fetchTimed(
  base: string,
  path: string,
): Promise<{ ttfbMs: number; totalMs: number; bytes: number }> {
  const url = new URL(base);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      let ttfb = -1;
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        if (ttfb < 0) ttfb = performance.now() - t0;
        bytes += c.length;
      });
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode} for ${path}`));
        else resolve({ ttfbMs: ttfb, totalMs: performance.now() - t0, bytes });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function runDirect(argv: readonly string[]): Promise<{ firstOutputMs: number; totalMs: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpeg, argv, { stdio: ['ignore', 'pipe', 'ignore'] });
    let first = -1;
    child.stdout.on('data', () => {
      if (first < 0) first = performance.now() - t0;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve({ firstOutputMs: first, totalMs: performance.now() - t0 })
        : reject(new Error(`exit ${code}`)),
    );
  });
}

async function twoAtATime<T>(jobs: Array<() => Promise<T>>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) await jobs[next++]!();
  };
  await Promise.all([lane(), lane()]);
}

/** The variant P2 and P2' coalesce (a 60 s opus encode, ~0.8 s of ffmpeg). */
const P2_VARIANT = '/insecure/f:opus/br:96';

/** A proxy over `root` with two slots and room for 64 waiters; `env` adds to its config. */
async function startProxy(root: string, env: Record<string, string> = {}) {
  const config = loadConfig({
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_MAX_CONCURRENCY: '2',
    AP_QUEUE_SIZE: '64',
    AP_LOG_LEVEL: 'error',
    // The one setting taken from the environment, so both sides of the trade-off can be measured.
    ...(process.env.AP_FFMPEG_NICE ? { AP_FFMPEG_NICE: process.env.AP_FFMPEG_NICE } : {}),
    ...env,
  });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  const { url } = await proxy.listen({
    host: '127.0.0.1',
    port: 0,
    metricsHost: '127.0.0.1',
    metricsPort: 0,
  });
  return { proxy, url };
}

/** One P2 round: the variant alone, then 64 identical requests for a fresh key. */
async function p2Round(url: string, tag: string): Promise<{ oneMs: number; allMs: number }> {
  const oneMs = (await fetchTimed(url, `${P2_VARIANT}/cb:one-${tag}/plain/local://in.wav`)).totalMs;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, () =>
      fetchTimed(url, `${P2_VARIANT}/cb:many-${tag}/plain/local://in.wav`),
    ),
  );
  return { oneMs, allMs: performance.now() - t0 };
}

/** Pins every thread of this process (workers started later inherit it) to `cpus`. */
function pinSelf(cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'ignore' });
}

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * P2 with the encoder isolated: ffmpeg runs through a wrapper that pins it to core 1, this
 * process (proxy, its workers, the 64 clients) is pinned to core 0 for the measurement. Same
 * source, same variant, same rounds as P2.
 */
async function pinnedP2(
  root: string,
  rounds: number,
): Promise<{ allMs: number; oneMs: number } | undefined> {
  if (availableParallelism() < 2 || !hasTaskset()) return undefined;
  const wrapper = join(root, 'ffmpeg-core1.sh');
  writeFileSync(wrapper, `#!/bin/sh\nexec taskset -c 1 '${ffmpeg}' "$@"\n`);
  chmodSync(wrapper, 0o755);
  pinSelf('0');
  try {
    const { proxy, url } = await startProxy(root, { AP_FFMPEG_PATH: wrapper });
    const all: number[] = [];
    const one: number[] = [];
    await fetchTimed(url, `${P2_VARIANT}/cb:pin-warm/plain/local://in.wav`);
    for (let round = 0; round < rounds; round++) {
      const r = await p2Round(url, `pin${round}-${Date.now()}`);
      one.push(r.oneMs);
      all.push(r.allMs);
      process.stderr.write(`pinned round ${round + 1}/${rounds} done\n`);
    }
    await proxy.close();
    return { allMs: median(all), oneMs: median(one) };
  } finally {
    pinSelf(`0-${availableParallelism() - 1}`);
  }
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'ap-bench-render-'));
  const source = join(root, 'in.wav');
  makeStereoWav(source, ffmpeg);
  const { proxy, url } = await startProxy(root);

  const argvOf = (variant: string) => {
    const route = parseRoute(`/${variant}/plain/local://in.wav`);
    if (!route.ok || route.endpoint !== 'render') throw new Error(`bad variant ${variant}`);
    return buildRenderArgv(route.options, {
      url: source,
      kind: 'local',
      sampleRate: 44_100,
      channels: 2,
      bitDepth: 16,
    });
  };

  const p1Proxy: number[] = [];
  const p1Direct: number[] = [];
  const p2All: number[] = [];
  const p2One: number[] = [];
  const ttfbProxy: number[] = [];
  const ttfbDirect: number[] = [];
  let round = 0;
  // Warm-up: first worker spawn, page cache, ffmpeg's libraries.
  await fetchTimed(url, `/insecure/f:mp3/cb:warm/plain/local://in.wav`);
  await runDirect(argvOf('f:mp3'));

  for (round = 0; round < ROUNDS; round++) {
    const tag = `r${round}-${Date.now()}`;
    // P1 direct
    let t0 = performance.now();
    await twoAtATime(VARIANTS.map((v) => () => runDirect(argvOf(v))));
    p1Direct.push(performance.now() - t0);
    // P1 proxy: all 8 at once; the semaphore runs two at a time
    t0 = performance.now();
    await Promise.all(
      VARIANTS.map((v) => fetchTimed(url, `/insecure/${v}/cb:${tag}/plain/local://in.wav`)),
    );
    p1Proxy.push(performance.now() - t0);
    // P2: one request alone, then 64 identical
    const p2 = await p2Round(url, tag);
    p2One.push(p2.oneMs);
    p2All.push(p2.allMs);
    // P7: first byte, mp3 to a pipe
    const direct = await runDirect(argvOf('f:mp3/br:128'));
    ttfbDirect.push(direct.firstOutputMs);
    const viaProxy = await fetchTimed(
      url,
      `/insecure/f:mp3/br:128/cb:ttfb-${tag}/plain/local://in.wav`,
    );
    ttfbProxy.push(viaProxy.ttfbMs);
    process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
  }
  await proxy.close();

  const pinned = await pinnedP2(root, ROUNDS);

  const r = (x: number) => Math.round(x);
  const p1 = median(p1Proxy) / median(p1Direct);
  const p2 = median(p2All) / median(p2One);
  console.log(
    `P1  8 distinct renders, C=2: proxy ${r(median(p1Proxy))} ms, direct ${r(median(p1Direct))} ms, ratio ${p1.toFixed(3)} (target <= 1.02)`,
  );
  console.log(
    `P2  64 identical requests: ${r(median(p2All))} ms vs one request ${r(median(p2One))} ms, ratio ${p2.toFixed(3)} (target <= 1.05)`,
  );
  console.log(
    `P7  first byte: proxy ${r(median(ttfbProxy))} ms vs ffmpeg's first output ${r(median(ttfbDirect))} ms (+${r(median(ttfbProxy) - median(ttfbDirect))} ms)`,
  );
  if (pinned) {
    console.log(
      `P2' the same, ffmpeg pinned to core 1, proxy and clients to core 0: ${r(pinned.allMs)} ms vs ${r(pinned.oneMs)} ms, ratio ${(pinned.allMs / pinned.oneMs).toFixed(3)} (target <= 1.05)`,
    );
  } else console.log("P2' skipped: needs taskset and 2 cores");
  console.log(`(medians of ${ROUNDS} interleaved rounds)`);
  report('render', {
    p1: p1,
    p1ProxyMs: median(p1Proxy),
    p1DirectMs: median(p1Direct),
    p2: p2,
    p2AllMs: median(p2All),
    p2OneMs: median(p2One),
    ...(pinned
      ? {
          p2Pinned: pinned.allMs / pinned.oneMs,
          p2PinnedAllMs: pinned.allMs,
          p2PinnedOneMs: pinned.oneMs,
        }
      : {}),
    p7ProxyMs: median(ttfbProxy),
    p7DirectMs: median(ttfbDirect),
    rounds: ROUNDS,
  });
}

await main();
