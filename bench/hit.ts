/**
 * HIT throughput in proxy mode: one 1 MiB variant fetched over 64 keep-alive connections, against
 * nginx serving the same bytes from disk, in the same run.
 *
 * Servers (each its own process, so the load generator and the servers compete alike; the Node
 * ones compiled, on plain Node, from `bench/hitServe.mjs`, as the proxy runs in production):
 * - `nginx`: Debian nginx-light, one worker, `sendfile on` (`bench/nginx.ts`);
 * - `node memory`: the floor for Node: the bytes in a Buffer, one `res.end`, nothing else;
 * - `node hot`: `serveHit` over the file store wrapped in the hot-variant cache (the default
 *   budget, `DEFAULT_HIT_CACHE_BYTES`): a warm HIT is a Map lookup and one `res.end(buffer)`;
 * - `node stream`: `serveHit` over the bare file store: metadata read, stat, open and a read
 *   stream per request (what a HIT costs without the cache);
 * - `proxy (full)`: the whole proxy (`createAudioProxy`: signature, options, source
 *   authorisation, cache key, lookup) with a file store and `AP_SERVE_MODE=proxy`;
 * - `proxy (disk)`: the same with the hot cache off (`AP_HIT_CACHE_BYTES=0`): the disk path.
 * Each server's bytes are checked before it is measured, and each gets a discarded warm-up
 * (`--warmup` s) so the JIT and the hot cache are settled. Each round measures every Node server
 * once, in rotating order, each right beside a run of nginx (before it in even rounds, after it
 * in odd ones), and a server's ratio to nginx is to that neighbour: CPU time per byte rises with
 * whatever else the machine runs (a busy sibling hyperthread, cold caches), and nginx's moves
 * with its own throughput (0.13-0.29 CPU s/GiB within one run at load 13-15), so a ratio is
 * only as steady as its two halves are near in time. Figures are medians over rounds.
 * Each server is also divided by `node memory` run in the same round (P9, "÷ Node's floor"):
 * nginx's own CPU per GiB falls by a third or more when the machine is busy while a Node
 * writer's does not (`bench/sendfile-load.ts`), so only the ratio to the floor holds across loads.
 *
 * CPU is the serving process's user + system time from `/proc/<pid>/stat` (every thread; for
 * nginx its worker), per GiB the client read (wrk's own byte count). The Node servers' RSS after
 * each run shows the memory bound holds.
 *
 * Load: `wrk -t1 -c64 -d<s>s` (autocannon with 64 connections when wrk is not installed).
 * Run: `npx tsx bench/hit.ts [--rounds 5] [--seconds 5] [--warmup 2] [--cache-bytes N]
 * [--only hot,proxy]`; `--profile <memory|hot|stream|proxy|proxy-disk>` runs that server alone
 * under V8's sampling profiler for one load and prints its top self-time functions.
 * The figures go to docs/performance.md ("HIT serving").
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileVariantStore } from '../src/store/file.js';
import { DEFAULT_HIT_CACHE_BYTES } from '../src/store/hotCache.js';
import { ensureBuilt } from './built.js';
import { fmtSpread, processCpuMs, settle, spread, spreadFigures } from './cpuclock.js';
import { startNginx } from './nginx.js';
import { topOfProfile } from './profileTop.js';
import { report } from './report.js';

const VARIANT_BYTES = 1024 * 1024; // the issue's figure: a 1 MiB variant
const CONNECTIONS = 64; // the issue's figure: 64 keep-alive connections
const KEY = 'b'.repeat(64);
const META = {
  contentType: 'audio/mpeg',
  cacheControl: 'public, max-age=31536000, immutable, no-transform',
};

const args = process.argv.slice(2);
function flag(name: string, fallback: number): number {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
}
const ROUNDS = flag('rounds', 5);
const SECONDS = flag('seconds', 5);
const CACHE_BYTES = flag('cache-bytes', DEFAULT_HIT_CACHE_BYTES);
/** Seconds of load per server before the rounds, not measured. */
const WARMUP_SECONDS = flag('warmup', 2);
/** `--profile <mode>`: only that server, V8's sampling profiler over one load of `--seconds`. */
/** `--only hot,proxy`: these Node servers (beside nginx) instead of all five. */
const ONLY = ((at) =>
  (at === -1 ? 'memory,hot,stream,proxy,proxy-disk' : args[at + 1]!).split(',') as Mode[])(
  args.indexOf('--only'),
);
const PROFILE = ((at) => (at === -1 ? undefined : (args[at + 1] as Mode)))(
  args.indexOf('--profile'),
);

// ---------------------------------------------------------------------------------------------
// Driver

interface Target {
  readonly name: string;
  readonly port: number;
  readonly path: string;
  readonly pid: number;
  stop(): void;
  /** What a Node server printed so far (nginx: nothing). */
  output?(): string;
  /** nginx only: its worker's pid, the process that serves. */
  workerPid?(): number;
}

interface Run {
  readonly rps: number;
  /** Server CPU (user + system) per request, in ms: steadier than req/s on a shared box. */
  readonly cpuMsPerReq: number;
  /** Server CPU seconds per GiB the client read (wrk's byte count): the issue's figure. */
  readonly cpuSPerGiB: number;
  readonly mbps: number;
  readonly p50ms: number;
  readonly p99ms: number;
  readonly rssMiB?: number;
}

/** nginx as a Target; its CPU is read from its worker (`servingPid`). */
function startNginxTarget(dir: string): Target {
  const n = startNginx(dir);
  return {
    name: 'nginx',
    port: n.port,
    path: '/variant.bin',
    pid: n.pid,
    stop: n.stop,
    workerPid: n.workerPid,
  };
}

type Mode = 'memory' | 'hot' | 'stream' | 'proxy' | 'proxy-disk';
const NAMES: Record<Mode, string> = {
  memory: 'node memory',
  hot: 'node hot',
  stream: 'node stream',
  proxy: 'proxy (full)',
  'proxy-disk': 'proxy (disk)',
};

/** A Node server from `bench/hitServe.mjs` on plain Node; `profile`: where SIGUSR2 writes. */
function startNode(mode: Mode, store: string, sources: string, profile?: string): Promise<Target> {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('hitServe.mjs', import.meta.url)),
      ...[mode, store, KEY, sources, String(CACHE_BYTES)],
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: profile ? { ...process.env, AP_BENCH_PROFILE: profile } : process.env,
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+) (\S+)/.exec(out);
      if (m) {
        resolve({
          name: NAMES[mode],
          port: Number(m[1]),
          path: m[2]!,
          pid: child.pid!,
          stop: () => child.kill('SIGTERM'),
          output: () => out,
        });
      }
    });
    child.once('exit', (code) => reject(new Error(`${mode} server exited (${code})`)));
  });
}

async function waitReady(t: Target, expected?: Buffer): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${t.port}${t.path}`);
      const body = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200) throw new Error(`${t.name}: status ${r.status}`);
      if (expected && !body.equals(expected)) throw new Error(`${t.name}: wrong bytes`);
      return;
    } catch (error) {
      if (i === 99) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function rssMiB(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1];
    return kb ? Number(kb) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The process that serves: nginx's worker (the master's child), or the Node server itself. */
function servingPid(t: Target): number {
  return t.workerPid?.() ?? t.pid;
}

function hasWrk(): boolean {
  return spawnSync('wrk', ['--version']).error === undefined;
}

function msOf(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text);
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

async function load(t: Target, seconds = SECONDS): Promise<Run> {
  const url = `http://127.0.0.1:${t.port}${t.path}`;
  const pid = servingPid(t);
  const cpuBefore = processCpuMs(pid);
  let run: Omit<Run, 'cpuMsPerReq' | 'cpuSPerGiB'>;
  let gib: number;
  let requests: number;
  if (hasWrk()) {
    const r = spawnSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', url], {
      encoding: 'utf8',
    });
    const out = r.stdout;
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
    const transfer = /Transfer\/sec:\s+([\d.]+)(\w+)/.exec(out);
    const unit = transfer?.[2] === 'GB' ? 1024 : transfer?.[2] === 'KB' ? 1 / 1024 : 1;
    requests = Number(/(\d+) requests in/.exec(out)?.[1]);
    const read = /([\d.]+)(GB|MB|KB) read/.exec(out);
    gib = Number(read?.[1]) / (read?.[2] === 'GB' ? 1 : read?.[2] === 'MB' ? 1024 : 1024 ** 2);
    run = {
      rps,
      mbps: Number(transfer?.[1]) * unit,
      p50ms: msOf(/50%\s+(\S+)/.exec(out)?.[1] ?? ''),
      p99ms: msOf(/99%\s+(\S+)/.exec(out)?.[1] ?? ''),
    };
  } else {
    const name = 'autocannon'; // untyped package: imported by name, used through `any`
    const autocannon = (await import(name)).default as (o: object) => Promise<any>;
    const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds });
    run = {
      rps: r.requests.average,
      mbps: r.throughput.average / (1024 * 1024),
      p50ms: r.latency.p50,
      p99ms: r.latency.p99,
    };
    gib = r.throughput.total / 2 ** 30;
    requests = r.requests.total;
  }
  const cpu = (processCpuMs(pid) - cpuBefore) / 1000;
  const cpuMsPerReq = (cpu * 1000) / requests;
  const cpuSPerGiB = cpu / gib;
  const rss = t.name === 'nginx' ? undefined : rssMiB(t.pid);
  const figures = { ...run, cpuMsPerReq, cpuSPerGiB };
  return rss === undefined ? figures : { ...figures, rssMiB: rss };
}

/** One load of `--seconds` on `t` with V8's sampling profiler on its main thread. */
async function profileRun(t: Target, file: string): Promise<void> {
  const said = async (word: string) => {
    while (!t.output!().includes(word)) await new Promise((r) => setTimeout(r, 20));
  };
  process.kill(t.pid, 'SIGUSR2');
  await said('PROFILING');
  const r = await load(t);
  process.kill(t.pid, 'SIGUSR2');
  await said('PROFILED');
  const top = topOfProfile(file, 14);
  const kept = join(tmpdir(), `ap-bench-hit-${PROFILE}.cpuprofile`);
  copyFileSync(file, kept);
  console.log(`profile: ${kept} (open it in Chrome's DevTools)`);
  console.log(
    `${t.name}: ${r.rps.toFixed(0)} req/s, ${r.cpuSPerGiB.toFixed(3)} CPU s/GiB (profiler on); main thread ${top.totalMs.toFixed(0)} ms of samples (not idle), top self time:`,
  );
  for (const { fn, selfMs, share } of top.lines) {
    console.log(
      `  ${selfMs.toFixed(1).padStart(8)} ms ${(share * 100).toFixed(1).padStart(5)} %  ${fn}`,
    );
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'ap-bench-hit-'));
  const data = randomBytes(VARIANT_BYTES);
  writeFileSync(join(dir, 'variant.bin'), data);
  const storeRoot = join(dir, 'store');
  mkdirSync(storeRoot);
  const disk = new FileVariantStore({ root: storeRoot });
  await disk.sweepStaging();
  await disk.put(
    KEY,
    (async function* () {
      yield data;
    })(),
    META,
  );
  // The proxy's source: 6 s of a 440 Hz tone, rendered to a wav variant of about 1 MiB.
  const sources = join(dir, 'sources');
  mkdirSync(sources);
  execFileSync('ffmpeg', [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
    ...['-i', 'sine=frequency=440:sample_rate=44100:duration=6', '-ac', '2'],
    join(sources, 'stereo-6s.wav'),
  ]);
  ensureBuilt();
  const modes: Mode[] = PROFILE ? [PROFILE] : ONLY;
  const targets: Target[] = PROFILE ? [] : [startNginxTarget(dir)];
  for (const mode of modes) {
    const store = mode.startsWith('proxy') ? join(dir, `${mode}-store`) : storeRoot;
    if (store !== storeRoot) mkdirSync(store);
    const profile = PROFILE ? join(dir, `${mode}.cpuprofile`) : undefined;
    targets.push(await startNode(mode, store, sources, profile));
  }
  const loadStart = loadavg()[0]!;
  try {
    for (const t of targets) await waitReady(t, t.name.startsWith('proxy') ? undefined : data);
    // Warm-up, discarded: the JIT compiles the request path and the hot cache loads the variant.
    for (const t of targets) await load(t, WARMUP_SECONDS);
    // Rounds begin once every Node server has stopped working in the background (a proxy's
    // dozen isolates each run V8's memory reducer 8–18 s after start: `settle`).
    const settled = await Promise.all(
      targets.filter((t) => !t.workerPid).map(async (t) => [t.name, await settle(t.pid)] as const),
    );
    process.stderr.write(
      `settled: ${settled.map(([n, s]) => `${n} ${s.waitedS.toFixed(0)} s, ${s.spentMs} ms`).join('; ')}\n`,
    );
    if (PROFILE) {
      await profileRun(targets[0]!, join(dir, `${PROFILE}.cpuprofile`));
      return;
    }
    const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
    /** Per Node server, the nginx run beside each of its runs (same index). */
    const beside = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
    const tool = hasWrk() ? `wrk -t1 -c${CONNECTIONS} -d${SECONDS}s` : 'autocannon';
    process.stderr.write(`load: ${tool}; ${ROUNDS} rounds; cache ${CACHE_BYTES} B\n`);
    const say = (round: number, t: Target, r: Run) =>
      process.stderr.write(
        `round ${round + 1} ${t.name.padEnd(13)} ${r.rps.toFixed(0)} req/s p99 ${r.p99ms.toFixed(1)} ms, ${r.cpuMsPerReq.toFixed(3)} CPU ms/req, ${r.cpuSPerGiB.toFixed(3)} CPU s/GiB\n`,
      );
    // Each Node server is measured right beside a run of nginx (nginx first in even rounds,
    // second in odd ones): CPU time per byte grows with what else runs on the machine (the
    // other hyperthread, the caches), so a ratio is only as good as the nearness of its halves.
    const [nginxTarget, ...nodes] = targets as [Target, ...Target[]];
    for (let round = 0; round < ROUNDS; round++) {
      const order = nodes.map((_, i) => nodes[(i + round) % nodes.length]!);
      for (const t of order) {
        const pair = round % 2 === 0 ? [nginxTarget, t] : [t, nginxTarget];
        for (const side of pair) {
          const r = await load(side);
          runs.get(side.name)!.push(r);
          say(round, side, r);
        }
        beside.get(t.name)!.push(runs.get('nginx')!.at(-1)!);
      }
    }
    // nginx beside itself: each of its runs.
    beside.set('nginx', runs.get('nginx')!);
    const nginx = median(runs.get('nginx')!.map((r) => r.rps));
    const nginxCpu = median(runs.get('nginx')!.map((r) => r.cpuMsPerReq));
    console.log(
      '\n| server | req/s (median) | × nginx | × nginx, same round (median) | p50 ms | p99 ms | CPU ms/req | × nginx per CPU s | RSS MiB (max) |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      const rps = median(rs.map((r) => r.rps));
      const nx = beside.get(t.name)!;
      const paired = median(rs.map((r, i) => r.rps / nx[i]!.rps));
      const cpu = median(rs.map((r) => r.cpuMsPerReq));
      const rss = rs.map((r) => r.rssMiB).filter((x): x is number => x !== undefined);
      console.log(
        `| ${t.name} | ${rps.toFixed(0)} | ${(rps / nginx).toFixed(2)} | ${paired.toFixed(2)} | ${median(rs.map((r) => r.p50ms)).toFixed(1)} | ${median(rs.map((r) => r.p99ms)).toFixed(1)} | ${cpu.toFixed(3)} | ${(nginxCpu / cpu).toFixed(2)} | ${rss.length ? Math.max(...rss).toFixed(0) : '-'} |`,
      );
    }
    // Issue #17: CPU seconds per GiB served ÷ nginx's (sendfile), paired per round; GiB as the
    // client counted them (wrk's bytes read), so requests cut off at the end count what they sent.
    console.log('\nCPU s per GiB served, and ÷ nginx run beside it: median (min–max) over rounds');
    const figures: Record<string, number> = { nginxRps: nginx, loadStart, loadEnd: loadavg()[0]! };
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      const perGiB = spread(rs.map((r) => r.cpuSPerGiB));
      const nx = beside.get(t.name)!;
      const ratio = spread(rs.map((r, i) => r.cpuSPerGiB / nx[i]!.cpuSPerGiB));
      Object.assign(figures, spreadFigures(`cpuPerGiBVsNginx:${t.name}`, ratio));
      figures[`cpuSPerGiB:${t.name}`] = perGiB.median;
      figures[`mibPerS:${t.name}`] = median(rs.map((r) => (r.rps * VARIANT_BYTES) / 2 ** 20));
      console.log(
        `  ${t.name.padEnd(13)} ${fmtSpread(perGiB, 3)} CPU s/GiB   ${fmtSpread(ratio)}× nginx${t.name === 'nginx' ? '' : ' (target ≤ 1.5× for the proxy)'}`,
      );
    }
    // P9: each server's CPU per GiB ÷ Node's floor (`node memory`: `res.end` of the same Buffer,
    // the same 64 connections) in the same round. Unlike nginx's, the floor's CPU per GiB moves
    // with the machine's load as the proxy's does (both are the kernel copying a Buffer into a
    // socket, plus JS), so this ratio is what the proxy adds, whatever the machine is doing.
    const floor = runs.get(NAMES.memory);
    if (floor) {
      console.log(
        "\nCPU s per GiB ÷ Node's floor (node memory) in the same round: median (min–max)",
      );
      for (const t of targets) {
        if (t.name === 'nginx' || t.name === NAMES.memory) continue;
        const rs = runs.get(t.name)!;
        const ratio = spread(rs.map((r, i) => r.cpuSPerGiB / floor[i]!.cpuSPerGiB));
        Object.assign(figures, spreadFigures(`cpuPerGiBVsFloor:${t.name}`, ratio));
        console.log(`  ${t.name.padEnd(13)} ${fmtSpread(ratio)}× the floor`);
      }
    }
    for (const t of targets) {
      const rs = runs.get(t.name)!;
      figures[`rps:${t.name}`] = median(rs.map((r) => r.rps));
      const nx = beside.get(t.name)!;
      figures[`sameRound:${t.name}`] = median(rs.map((r, i) => r.rps / nx[i]!.rps));
      figures[`cpuMsPerReq:${t.name}`] = median(rs.map((r) => r.cpuMsPerReq));
    }
    report('hit', figures);
    const [l1, l5] = loadavg();
    console.log(
      `\nload average: ${loadStart.toFixed(1)} at the start, ${l1!.toFixed(1)} (1 min) and ${l5!.toFixed(1)} (5 min) at the end`,
    );
  } finally {
    for (const t of targets) t.stop();
    await new Promise((r) => setTimeout(r, 300));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
