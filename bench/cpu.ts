/**
 * `npm run bench -- cpu [--rounds 5] [--profile]`: what the proxy costs in CPU time, beside the
 * CPU of the ffmpeg it runs and beside the machine's limits (issue #17). The proxy runs in a
 * process of its own (AP_MAX_CONCURRENCY=2, a file variant store, proxy serve mode); this
 * process is only the load generator, so `/proc/<proxy>/stat` counts the proxy alone: main
 * thread, worker threads, libuv's pool and V8's helpers. ffmpeg's CPU is the proxy's
 * cutime + cstime, the exact CPU of every child it has reaped; each round is read only once the
 * proxy has no live child left (`quiesce`).
 *
 *  MISS   6 distinct mp3 128k renders of a 60 s stereo WAV per round, 2 at a time:
 *         proxy CPU ÷ ffmpeg CPU.                                                target ≤ 3 %
 *  COAL   what 63 more listeners of one render cost: per round, CROWD_PAIRS pairs of opus 96k
 *         renders of the 60 s source, each pair one render with 1 listener and one with 64
 *         (fresh keys, the pair's order alternating so a drift in background work falls on both
 *         sides): (proxy CPU with 64 − proxy CPU with 1) ÷ ffmpeg CPU of the 64 side, per pair;
 *         a round's figure is its median pair's (a GC or a slow store write lands in one render
 *         of one pair), the run's the median over rounds.
 *         Every crowd's connections are open before its first request is written, and the
 *         requests are written in one go, so the whole crowd has joined long before ffmpeg's
 *         first output (~100 ms of process start): each listener gets every chunk live, not a
 *         backlog whose size would depend on when it arrived.                 target ≤ 10 %
 *  LIMITS ffmpeg's own process start (`-f lavfi -i anullsrc -t 0 -f null -`: wall and CPU),
 *         the floor of a MISS's first byte, beside the proxy's median first byte; and loopback
 *         copy bandwidth (a Node process writing a 1 MiB Buffer to a socket as fast as it can,
 *         this process reading), the ceiling of a HIT, with the writer's CPU per GiB.
 *  IDLE   the proxy's CPU while idle, per second, so a reader can see what is background.
 *
 * `--profile` then runs the two largest proxy costs again in a fresh proxy process each, after
 * the same warm-up, with V8's sampling profiler on the main thread (the inspector's `Profiler`,
 * what `--cpu-prof` uses, started by a signal so start-up stays out): MISS, 6 mp3 renders; HIT,
 * 3 s of 16 keep-alive connections fetching one cached variant. It prints the top self-time
 * functions.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './built.js';
import {
  childrenCpuMs,
  fmtSpread,
  loadAvg,
  mainThreadCpuMs,
  processCpuMs,
  quiesce,
  type Spread,
  settle,
  spread,
  spreadFigures,
} from './cpuclock.js';
import { makeStereoWav } from './fixtures.js';
import { topOfProfile } from './profileTop.js';
import { report } from './report.js';

const args = process.argv.slice(2);
function flag(name: string, fallback: number): number {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
}
const ROUNDS = flag('rounds', 5);
/** `--crowd-only`: the COAL rounds alone (no MISS, no limits, nothing reported to bench:all). */
const CROWD_ONLY = args.includes('--crowd-only');
/** Distinct mp3 renders per MISS round: enough ffmpeg CPU (~4 s) that a 10 ms tick is noise. */
const MISS_RENDERS = 6;
/** The issue's coalescing crowd. */
const LISTENERS = 64;
/**
 * 1-listener / 64-listener render pairs per COAL round: one pair's difference (~60–200 ms) is
 * as small as the proxy's own per-render noise (GC, JIT, the store's write), so a round sums
 * several.
 */
const CROWD_PAIRS = 4;
/** The variant P2 coalesces (`bench/render.ts`). */
const COAL_VARIANT = '/insecure/f:opus/br:96';
const MISS_VARIANT = '/insecure/f:mp3/br:128';
/** Bytes the loopback probe pushes per round. */
const LOOPBACK_BYTES = 1024 * 1024 * 1024;
/** Process starts timed for ffmpeg's floor. */
const FFMPEG_STARTS = 10;
/** The idle window, in ms. */
const IDLE_MS = 3_000;
/** HIT profiling load: connections and seconds. */
const HIT_CONNECTIONS = 16;
const HIT_SECONDS = 3;

// ---------------------------------------------------------------------------------------------
// Child modes

/** Writes a 1 MiB Buffer to whoever connects until `bytes` are sent. */
function serveBlast(bytes: number): void {
  const chunk = Buffer.alloc(1024 * 1024, 7);
  const server = createServer((socket) => {
    let sent = 0;
    const pump = () => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
      socket.end();
    };
    pump();
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    process.stdout.write(`LISTENING ${port}\n`);
  });
  process.once('SIGTERM', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------
// Driver

interface Child {
  readonly pid: number;
  readonly line: string;
  /** Resolves once the child printed `marker` after `signal`. */
  signal(signal: NodeJS.Signals, marker: string): Promise<void>;
  /**
   * The proxy's own CPU so far in ms, to the microsecond (`process.cpuUsage()` asked over
   * stdin): /proc's 10 ms ticks, four readings per difference, were ±30 % of COAL's figure.
   */
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
}

function startChild(mode: string[]): Promise<Child> {
  const self = fileURLToPath(import.meta.url);
  // The proxy runs compiled, on plain Node (see bench/serve.mjs); the blaster is this file.
  const argv =
    mode[0] === '--serve'
      ? [fileURLToPath(new URL('serve.mjs', import.meta.url)), ...mode.slice(1)]
      : ['--import', 'tsx', self, ...mode];
  const child = spawn(process.execPath, argv, {
    stdio: [mode[0] === '--serve' ? 'pipe' : 'ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // A crash of this process must not orphan the proxy (it would keep its port and its CPU).
  process.once('exit', () => child.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stdout!.on('data', () => {
      const m = /LISTENING (\S+)/.exec(out);
      if (m)
        resolve({
          pid: child.pid!,
          line: m[1]!,
          signal: async (signal, marker) => {
            child.kill(signal);
            while (!out.includes(marker)) await new Promise((r) => setTimeout(r, 20));
          },
          cpuMs: async () => {
            const from = out.length;
            child.stdin!.write('cpu\n');
            for (;;) {
              const m = /CPU (\d+)\n/.exec(out.slice(from));
              if (m) return Number(m[1]) / 1000;
              await new Promise((r) => setTimeout(r, 5));
            }
          },
          stop: async () => {
            child.kill('SIGTERM');
            await exited;
          },
        });
    });
    child.once('exit', (code) => reject(new Error(`${mode[0]} child exited (${code})`)));
  });
}

function fetchTimed(
  base: string,
  path: string,
  agent?: Agent,
): Promise<{ ttfbMs: number; bytes: number }> {
  const url = new URL(base);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, agent: agent ?? false },
      (res) => {
        let ttfb = -1;
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          if (ttfb < 0) ttfb = performance.now() - t0;
          bytes += c.length;
        });
        res.on('end', () =>
          res.statusCode === 200
            ? resolve({ ttfbMs: ttfb, bytes })
            : reject(new Error(`status ${res.statusCode} for ${path}`)),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function twoAtATime<T>(jobs: Array<() => Promise<T>>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await jobs[i]!();
    }
  };
  await Promise.all([lane(), lane()]);
  return out;
}

/** Proxy CPU and its reaped children's CPU over `work`, read after every child is reaped. */
async function measure<T>(
  proxy: Child,
  work: () => Promise<T>,
): Promise<{ proxyMs: number; mainMs: number; ffmpegMs: number; result: T }> {
  const { pid } = proxy;
  await quiesce(pid);
  const p0 = await proxy.cpuMs();
  const m0 = mainThreadCpuMs(pid);
  const c0 = childrenCpuMs(pid);
  const result = await work();
  await quiesce(pid);
  return {
    proxyMs: (await proxy.cpuMs()) - p0,
    mainMs: mainThreadCpuMs(pid) - m0,
    ffmpegMs: childrenCpuMs(pid) - c0,
    result,
  };
}

/** stime of every thread of `pid` (the kernel's part of its CPU), in ms (10 ms ticks). */
function systemCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]) * 10;
}

const missRound = (url: string, tag: string) =>
  twoAtATime(
    Array.from(
      { length: MISS_RENDERS },
      (_, i) => () => fetchTimed(url, `${MISS_VARIANT}/cb:${tag}-${i}/plain/local://in.wav`),
    ),
  );

/** One listener's answer: its status line and the body's bytes and HTTP chunks. */
interface Heard {
  readonly status: string;
  readonly bytes: number;
  readonly chunks: number;
}

/**
 * Reads one raw HTTP/1.1 response off `socket` until the server closes it: the status line, and
 * a chunked body's bytes and chunk count (the proxy's socket writes, one chunk each).
 */
function hear(socket: Socket): Promise<Heard> {
  return new Promise((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    let status = '';
    let bytes = 0;
    let chunks = 0;
    /** Bytes of the current chunk's data (and its CRLF) still to skip; -1: a size line is next. */
    let skip = -1;
    let ended = false;
    socket.on('data', (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (;;) {
        if (!status) {
          const at = buf.indexOf('\r\n\r\n');
          if (at < 0) return;
          status = buf.subarray(0, buf.indexOf('\r\n')).toString('latin1');
          buf = buf.subarray(at + 4);
        } else if (skip >= 0) {
          const n = Math.min(skip, buf.length);
          skip -= n;
          buf = buf.subarray(n);
          if (skip > 0 || buf.length === 0) return;
          skip = -1;
        } else {
          const at = buf.indexOf('\r\n');
          if (at < 0) return;
          const size = Number.parseInt(buf.subarray(0, at).toString('latin1'), 16);
          buf = buf.subarray(at + 2);
          if (size === 0) {
            ended = true;
            return void socket.end();
          }
          bytes += size;
          chunks++;
          skip = size + 2;
        }
      }
    });
    socket.on('close', () =>
      ended ? resolve({ status, bytes, chunks }) : reject(new Error(`torn response (${status})`)),
    );
    socket.on('error', reject);
  });
}

/**
 * `n` listeners of one fresh key: every connection is opened first, then every request is
 * written in one synchronous loop, so the proxy reads the whole crowd in a few milliseconds,
 * before the render's first byte. Resolves with what each listener heard; rejects on a status
 * other than 200, a torn body, or listeners that got bodies of different lengths.
 */
async function crowd(base: string, n: number, path: string): Promise<Heard[]> {
  const url = new URL(base);
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect(Number(url.port), url.hostname, () => resolve(s));
          s.once('error', reject);
        }),
    ),
  );
  const heard = sockets.map(hear);
  const head = `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`;
  for (const s of sockets) s.write(head);
  const all = await Promise.all(heard);
  for (const h of all) {
    if (!h.status.startsWith('HTTP/1.1 200 ')) throw new Error(`${h.status} for ${path}`);
    if (h.bytes !== all[0]!.bytes) throw new Error(`listeners got unequal bodies for ${path}`);
  }
  return all;
}

/** ffmpeg's floor: a process that starts, opens a null input and exits. */
function ffmpegStart(): { wallMs: Spread; cpuMs: Spread } {
  const walls: number[] = [];
  const c0 = childrenCpuMs('self');
  for (let i = 0; i < FFMPEG_STARTS; i++) {
    const t0 = performance.now();
    spawnSync('ffmpeg', [
      ...['-nostdin', '-loglevel', 'error', '-f', 'lavfi', '-i', 'anullsrc'],
      ...['-t', '0', '-f', 'null', '-'],
    ]);
    walls.push(performance.now() - t0);
  }
  const cpu = (childrenCpuMs('self') - c0) / FFMPEG_STARTS;
  return { wallMs: spread(walls), cpuMs: spread([cpu]) };
}

/** Loopback ceiling: GiB/s from a Node writer to this process, and the writer's CPU per GiB. */
async function loopback(): Promise<{ gibPerS: number; writerCpuSPerGiB: number }> {
  const blast = await startChild(['--blast', String(LOOPBACK_BYTES)]);
  try {
    const cpu0 = processCpuMs(blast.pid);
    const t0 = performance.now();
    let got = 0;
    await new Promise<void>((resolve, reject) => {
      const s = connect(Number(blast.line), '127.0.0.1');
      s.on('data', (c: Buffer) => {
        got += c.length;
      });
      s.on('end', resolve);
      s.on('error', reject);
    });
    const seconds = (performance.now() - t0) / 1000;
    const gib = got / 2 ** 30;
    return {
      gibPerS: gib / seconds,
      writerCpuSPerGiB: (processCpuMs(blast.pid) - cpu0) / 1000 / gib,
    };
  } finally {
    await blast.stop();
  }
}

async function profile(root: string): Promise<void> {
  const phases = CROWD_ONLY ? (['CROWD'] as const) : (['MISS', 'HIT', 'CROWD'] as const);
  for (const phase of phases) {
    const dir = mkdtempSync(join(tmpdir(), `ap-prof-${phase}-`));
    const store = join(dir, 'store');
    mkdirSync(store);
    const file = join(dir, 'main.cpuprofile');
    const proxy = await startChild(['--serve', root, store, file]);
    const url = proxy.line;
    await warmUp(url, proxy.pid);
    const path = `${MISS_VARIANT}/cb:phit/plain/local://in.wav`;
    if (phase === 'HIT') {
      await fetchTimed(url, path);
      await quiesce(proxy.pid);
      await new Promise((r) => setTimeout(r, 500)); // the store's write settles
    }
    await proxy.signal('SIGUSR2', 'PROFILING');
    const p0 = processCpuMs(proxy.pid);
    if (phase === 'MISS') {
      await missRound(url, `prof-${Date.now()}`);
      await quiesce(proxy.pid);
    } else if (phase === 'CROWD') {
      for (let i = 0; i < CROWD_PAIRS; i++) {
        await crowd(
          url,
          LISTENERS,
          `${COAL_VARIANT}/cb:prof-${i}-${Date.now()}/plain/local://in.wav`,
        );
        await quiesce(proxy.pid);
      }
      console.log(`\nCROWD profile load: ${CROWD_PAIRS} renders with ${LISTENERS} listeners each`);
    } else {
      const agent = new Agent({ keepAlive: true, maxSockets: HIT_CONNECTIONS });
      const end = performance.now() + HIT_SECONDS * 1000;
      let n = 0;
      let bytes = 0;
      await Promise.all(
        Array.from({ length: HIT_CONNECTIONS }, async () => {
          while (performance.now() < end) {
            bytes += (await fetchTimed(url, path, agent)).bytes;
            n++;
          }
        }),
      );
      agent.destroy();
      console.log(
        `\nHIT profile load: ${n} requests of one cached mp3 (${(bytes / n / 1024).toFixed(0)} KiB) in ${HIT_SECONDS} s`,
      );
    }
    const processMs = processCpuMs(proxy.pid) - p0;
    await proxy.stop();
    const top = topOfProfile(file, phase === 'CROWD' ? 25 : 12);
    console.log(
      `\n${phase} profile, main thread: ${top.totalMs.toFixed(0)} ms of samples (not idle) of ${processMs} ms CPU in the whole proxy process; top self time:`,
    );
    for (const l of top.lines)
      console.log(
        `  ${l.selfMs.toFixed(1).padStart(8)} ms ${(l.share * 100).toFixed(1).padStart(5)} %  ${l.fn}`,
      );
  }
}

/**
 * One COAL round: CROWD_PAIRS pairs of a 1-listener and a LISTENERS-listener render, each on a
 * fresh key and measured alone (`measure`), the pair's order alternating. Per render: the extra
 * proxy CPU of the crowd and ffmpeg's CPU; the ratio of the sums; µs per extra listener.
 */
function crowdRounds(proxy: Child) {
  let pairs = 0;
  return async (tag: string) => {
    let oneMs = 0;
    let crowdMs = 0;
    let ffmpegSumMs = 0;
    let systemExtraMs = 0;
    let late = 0;
    const chunks: number[] = [];
    /** Each pair's extra proxy CPU and its crowd's ffmpeg CPU, in ms. */
    const pairList: Array<{ extraMs: number; ffmpegMs: number }> = [];
    for (let i = 0; i < CROWD_PAIRS; i++) {
      const size = async (n: number) => {
        const path = `${COAL_VARIANT}/cb:c${n}-${tag}-${i}/plain/local://in.wav`;
        const s0 = systemCpuMs(proxy.pid);
        const m = await measure(proxy, () => crowd(proxy.line, n, path));
        return { ...m, systemMs: systemCpuMs(proxy.pid) - s0 };
      };
      const first = pairs++ % 2 === 0 ? 1 : LISTENERS;
      const a = await size(first);
      const b = await size(first === 1 ? LISTENERS : 1);
      const [one, many] = first === 1 ? [a, b] : [b, a];
      oneMs += one.proxyMs;
      crowdMs += many.proxyMs;
      systemExtraMs += many.systemMs - one.systemMs;
      ffmpegSumMs += many.ffmpegMs;
      pairList.push({ extraMs: many.proxyMs - one.proxyMs, ffmpegMs: many.ffmpegMs });
      chunks.push(...many.result.map((h) => h.chunks));
      // A listener that joined after the first byte got the backlog as one write: fewer writes.
      const most = Math.max(...many.result.map((h) => h.chunks));
      late += many.result.filter((h) => h.chunks < most).length;
    }
    const extra = crowdMs - oneMs;
    // The round's figures are its median pair's: a GC or a slow store write lands in one render.
    const extraMs = spread(pairList.map((q) => q.extraMs)).median;
    return {
      oneMs,
      crowdMs,
      ffmpegSumMs,
      ratio: spread(pairList.map((q) => q.extraMs / q.ffmpegMs)).median,
      extraMs,
      ffmpegMs: ffmpegSumMs / CROWD_PAIRS,
      perListenerUs: (1000 * extraMs) / (LISTENERS - 1),
      /** The kernel's part of the extra (stime, 10 ms ticks), as a share. */
      systemShare: systemExtraMs / extra,
      /** HTTP chunks (socket writes) per crowd listener: median (min–max). */
      chunks: spread(chunks),
      /** Crowd listeners with fewer writes than their render's most: joined after its first byte. */
      late,
    };
  };
}

/** JIT, lazy module loads (tsx), the workers' first tasks and the probe cache, then a settle. */
async function warmUp(url: string, pid: number): Promise<void> {
  await fetchTimed(url, `${MISS_VARIANT}/cb:warm/plain/local://in.wav`);
  await missRound(url, `warm-${Date.now()}`);
  // Two crowds (one key each): the crowd path's code is optimised before the first round.
  for (const n of [1, 2]) {
    await crowd(url, LISTENERS, `${COAL_VARIANT}/cb:warm-${n}-${Date.now()}/plain/local://in.wav`);
  }
  await quiesce(pid);
  // V8's helper threads keep compiling and collecting after the first requests, and its memory
  // reducer shrinks every isolate 8–18 s after start: rounds begin once that is over.
  const settled = await settle(pid);
  console.log(
    `settled ${settled.waitedS.toFixed(0)} s after the warm-up (${settled.spentMs} ms of background CPU)`,
  );
}

async function main(): Promise<void> {
  const loadStart = loadAvg();
  const root = mkdtempSync(join(tmpdir(), 'ap-bench-cpu-'));
  const store = join(root, 'store');
  mkdirSync(store);
  makeStereoWav(join(root, 'in.wav'));
  const proxy = await startChild(['--serve', root, store]);
  const url = proxy.line;
  const pid = proxy.pid;

  await warmUp(url, pid);

  const idle0 = processCpuMs(pid);
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idleMsPerS = (processCpuMs(pid) - idle0) / (IDLE_MS / 1000);

  const miss: number[] = [];
  const missProxyMs: number[] = [];
  const missMainMs: number[] = [];
  const missFfmpegMs: number[] = [];
  const ttfb: number[] = [];
  const coal: number[] = [];
  const coalExtraMs: number[] = [];
  const coalFfmpegMs: number[] = [];
  const coalPerListenerUs: number[] = [];
  const coalRound = crowdRounds(proxy);
  for (let round = 0; round < ROUNDS; round++) {
    const tag = `r${round}-${Date.now()}`;
    const m = CROWD_ONLY ? null : await measure(proxy, () => missRound(url, tag));
    if (m) {
      miss.push(m.proxyMs / m.ffmpegMs);
      missProxyMs.push(m.proxyMs / MISS_RENDERS);
      missMainMs.push(m.mainMs / MISS_RENDERS);
      missFfmpegMs.push(m.ffmpegMs / MISS_RENDERS);
      ttfb.push(...m.result.map((r) => r.ttfbMs));
    }

    const c = await coalRound(tag);
    coal.push(c.ratio);
    coalExtraMs.push(c.extraMs);
    coalFfmpegMs.push(c.ffmpegMs);
    coalPerListenerUs.push(c.perListenerUs);
    process.stderr.write(
      `round ${round + 1}/${ROUNDS}: ${m ? `MISS proxy ${m.proxyMs} ms / ffmpeg ${m.ffmpegMs} ms = ${((100 * m.proxyMs) / m.ffmpegMs).toFixed(2)} %; ` : ''}` +
        `COAL ${CROWD_PAIRS} pairs, proxy ${c.crowdMs.toFixed(0)} ms with 64 and ${c.oneMs.toFixed(0)} ms with 1, ffmpeg ${c.ffmpegSumMs} ms; median pair ${(100 * c.ratio).toFixed(2)} %, ${c.perListenerUs.toFixed(0)} µs per extra listener (${(100 * c.systemShare).toFixed(0)} % in the kernel), ${fmtSpread(c.chunks, 0)} writes per listener, ${c.late} of ${CROWD_PAIRS * LISTENERS} joined after the first byte\n`,
    );
  }
  await proxy.stop();
  // COAL's figures: the median over rounds of each round's median pair.
  const coalS = spread(coal);
  const perListenerS = spread(coalPerListenerUs);
  const extraS = spread(coalExtraMs);
  if (CROWD_ONLY) {
    if (ROUNDS > 0)
      console.log(
        `\nCOAL  ${ROUNDS} rounds of ${CROWD_PAIRS} pairs, load ${loadStart.toFixed(1)} → ${loadAvg().toFixed(1)}: ${fmtSpread(perListenerS, 0)} µs per extra listener; +${fmtSpread(extraS, 0)} ms for 63 more, ffmpeg ${fmtSpread(spread(coalFfmpegMs), 0)} ms per render, ratio ${fmtSpread(coalS, 2, 100, ' %')} (target ≤ 10 %); idle ${idleMsPerS.toFixed(1)} ms/s`,
      );
    if (args.includes('--profile')) await profile(root);
    return;
  }

  const start = ffmpegStart();
  const lb = await loopback();
  const loadEnd = loadAvg();

  const missS = spread(miss);
  const ttfbS = spread(ttfb);
  console.log(
    `\nproxy CPU vs ffmpeg CPU, ${ROUNDS} rounds, median (min–max); load ${loadStart.toFixed(1)} → ${loadEnd.toFixed(1)}`,
  );
  console.log(
    `MISS  ${MISS_RENDERS} mp3 128k renders of 60 s per round: proxy ${fmtSpread(spread(missProxyMs), 0)} ms / render (main thread ${fmtSpread(spread(missMainMs), 0)}, the rest workers and V8 helpers), ffmpeg ${fmtSpread(spread(missFfmpegMs), 0)} ms / render, ratio ${fmtSpread(missS, 2, 100, ' %')} (target ≤ 3 %)`,
  );
  console.log(
    `COAL  63 more listeners (${CROWD_PAIRS} render pairs a round): ${fmtSpread(perListenerS, 0)} µs per extra listener, proxy +${fmtSpread(extraS, 0)} ms per render over one listener, ffmpeg ${fmtSpread(spread(coalFfmpegMs), 0)} ms, ratio ${fmtSpread(coalS, 2, 100, ' %')} (target ≤ 10 %)`,
  );
  console.log(`IDLE  proxy ${idleMsPerS.toFixed(1)} ms CPU per s while idle`);
  console.log(
    `LIMIT ffmpeg process start (anullsrc, -t 0): wall ${fmtSpread(start.wallMs, 0)} ms, CPU ${start.cpuMs.median.toFixed(0)} ms; MISS first byte through the proxy ${fmtSpread(ttfbS, 0)} ms = ${(ttfbS.median / start.wallMs.median).toFixed(2)}× the start`,
  );
  console.log(
    `LIMIT loopback, one Node writer of 1 MiB Buffers: ${lb.gibPerS.toFixed(2)} GiB/s, writer ${lb.writerCpuSPerGiB.toFixed(3)} CPU s / GiB`,
  );
  report('cpu', {
    ...spreadFigures('missCpu', missS),
    ...spreadFigures('coalCpu', coalS),
    missProxyMsPerRender: spread(missProxyMs).median,
    missFfmpegMsPerRender: spread(missFfmpegMs).median,
    coalExtraMs: extraS.median,
    coalFfmpegMs: spread(coalFfmpegMs).median,
    coalPerListenerUs: perListenerS.median,
    idleMsPerS,
    ...spreadFigures('ttfbMs', ttfbS),
    ffmpegStartWallMs: start.wallMs.median,
    ffmpegStartCpuMs: start.cpuMs.median,
    loopbackGiBps: lb.gibPerS,
    loopbackWriterCpuSPerGiB: lb.writerCpuSPerGiB,
    loadStart,
    loadEnd,
    rounds: ROUNDS,
  });
  if (args.includes('--profile')) await profile(root);
}

if (args[0] === '--blast') serveBlast(Number(args[1]));
else {
  ensureBuilt();
  await main();
}
