/**
 * The slow-clients scenario, shared by `slowClients.test.ts` (scaled down, in CI) and
 * `bench/slow-clients.ts` (200 clients, a 10-minute source).
 *
 * A proxy runs in its own process (`slowServer.ts`) so `/proc/<pid>/status` reports its memory
 * alone. The scenario, in order:
 *  1. warm-up: a 1 s trim of the long source, so the worker pools exist before "idle" is read;
 *  2. idle RSS;
 *  3. solo: one fast client renders the whole variant (key `cb:solo`): render wall time and the
 *     variant's size, which is the backlog bound (the coordinator keeps every byte until done);
 *  4. crowd: `clients` readers at 1/10 of the variant's bitrate, `stalled` readers that never
 *     read, then one fast reader, all on one fresh key (`cb:crowd`, one render): peak RSS while
 *     it renders, and the fast reader's wall time (the render's, since it is coalesced);
 *     optionally `lateStalled` more stalled readers join when half the variant exists;
 *  5. stall: the slow readers hang up, the stalled ones stay; RSS and the render slots once the
 *     coordinator is gone.
 *
 * ## Invariants
 * - Every reader of the crowd is on one render (one MISS, the rest COALESCED).
 * - RSS is sampled every `RSS_SAMPLE_MS` from the start of the crowd to the end of the render.
 *
 * ## Races
 * - *Who starts the render*: whichever crowd request registers first gets the MISS and every
 *   other one coalesces; the figures count MISS/COALESCED so "one render" is checked, not assumed.
 * - *A reader paused mid-chunk when the render ends*: its socket keeps the rest; that is the
 *   memory the stall reading measures.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';

const RSS_SAMPLE_MS = 100; // fine enough to catch a backlog-sized spike on a 2-s render
const SERVER_BOOT_TIMEOUT_MS = 60_000; // tsx compile plus pool start on a loaded machine
const STALL_SETTLE_MS = 2_000; // after the slow readers leave, before the stall reading
const SOURCE_TIMEOUT_MS = 120_000; // a 10-minute wav is ~100 MB of lavfi output
/** The headroom above idle + one backlog. */
export const RSS_HEADROOM_BYTES = 64 * 1024 * 1024;
/** The variant every reader asks for: a real encode, so the render takes real time. */
export const CROWD_OPTIONS = 'f:mp3/br:128';
const SLOWDOWN = 10; // readers take 1/10 of the bitrate

export interface CrowdOptions {
  readonly clients: number;
  readonly stalled: number;
  /** Readers that never read and join halfway through the render (they get the backlog). */
  readonly lateStalled?: number;
  /** Source length in seconds. */
  readonly seconds: number;
  /** Directory for the generated source (becomes `AP_LOCAL_ROOT`). */
  readonly dir: string;
  /** Extra proxy environment. */
  readonly env?: Record<string, string>;
  readonly log?: (line: string) => void;
}

export interface CrowdFigures {
  readonly idleRss: number;
  /** The variant's size: everything the coordinator holds at the end of the render. */
  readonly backlogBytes: number;
  readonly soloMs: number;
  readonly crowdRenderMs: number;
  /** The proxy process's own CPU (ms) over the solo render and over the crowd's render. */
  readonly soloCpuMs: number;
  readonly crowdCpuMs: number;
  /** ffmpeg's CPU (ms, reaped children) over the same two renders. */
  readonly soloFfmpegCpuMs: number;
  readonly crowdFfmpegCpuMs: number;
  readonly peakRss: number;
  /** RSS with only the stalled readers left, the render finished. */
  readonly stallRss: number;
  /** What the slow readers had read when they hung up (min, max). */
  readonly slowReceived: readonly [number, number];
  /** `audio_proxy_render_slots_held` and `audio_proxy_renders_running` with only stalls left. */
  readonly slotsHeldAfter: number;
  readonly rendersRunningAfter: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly cacheStatuses: Readonly<Record<string, number>>;
  /** The server process's exit code after SIGTERM. */
  readonly exitCode: number | null;
}

/** A `seconds`-long stereo 44.1 kHz wav under `dir` (made once, reused). */
export function makeLongSource(dir: string, seconds: number): string {
  const name = `long-${seconds}s.wav`;
  const out = join(dir, name);
  if (existsSync(out)) return name;
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  execFileSync(
    ffmpeg,
    [
      ...['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'],
      ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${seconds}`],
      ...['-ac', '2', '-c:a', 'pcm_s16le', '-f', 'wav', `${out}.part`],
    ],
    { timeout: SOURCE_TIMEOUT_MS },
  );
  execFileSync('mv', [`${out}.part`, out]);
  return name;
}

interface Server {
  readonly url: string;
  readonly metricsUrl: string;
  readonly pid: number;
  readonly child: ChildProcess;
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const script = fileURLToPath(new URL('./slowServer.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, AP_SLOW_SERVER_ENV: JSON.stringify(env) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('server did not boot')),
      SERVER_BOOT_TIMEOUT_MS,
    );
    createInterface({ input: child.stdout! }).once('line', (l) => {
      clearTimeout(timer);
      resolve(l);
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const { url, metricsUrl, pid } = JSON.parse(line) as Omit<Server, 'child'>;
  return { url, metricsUrl, pid, child };
}

const CLOCK_TICKS_PER_S = 100; // USER_HZ on Linux: /proc reports CPU time in these

/** CPU time (ms) the process itself spent (all threads), and its reaped children (ffmpeg). */
function cpuOf(pid: number): { self: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // fields 14-17 of stat(5); f[0] is field 3
  const ms = (ticks: number) => (ticks * 1000) / CLOCK_TICKS_PER_S;
  return { self: ms(f[11]! + f[12]!), children: ms(f[13]! + f[14]!) };
}

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  return kb ? Number(kb[1]) * 1024 : 0;
}

async function metric(metricsUrl: string, name: string): Promise<number> {
  const text = await new Promise<string>((resolve, reject) => {
    request(`${metricsUrl}/metrics`, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : Number.NaN;
}

interface Reader {
  readonly req: ClientRequest;
  received: number;
  status?: number;
  cache?: string;
  readonly done: Promise<number>;
}

/**
 * GETs `path`. `bytesPerSecond` undefined reads at full speed; 0 never reads (a stall);
 * otherwise the reader pauses after each chunk for as long as that chunk "costs" at the rate.
 */
function reader(base: string, path: string, bytesPerSecond?: number): Reader {
  const url = new URL(base);
  let resolveDone!: (ms: number) => void;
  const started = performance.now();
  const done = new Promise<number>((r) => {
    resolveDone = r;
  });
  const r: Reader = {
    received: 0,
    done,
    req: request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      r.status = res.statusCode;
      r.cache = String(res.headers['x-audio-proxy']);
      if (bytesPerSecond === 0) {
        res.pause();
        return;
      }
      res.on('data', (c: Buffer) => {
        r.received += c.length;
        if (bytesPerSecond !== undefined) {
          res.pause();
          setTimeout(() => res.resume(), (c.length / bytesPerSecond) * 1000).unref();
        }
      });
      res.on('end', () => resolveDone(performance.now() - started));
      res.on('error', () => resolveDone(Number.NaN));
    }),
  };
  r.req.on('error', () => resolveDone(Number.NaN));
  r.req.end();
  return r;
}

function count(values: readonly (string | number | undefined)[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[String(v)] = (out[String(v)] ?? 0) + 1;
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runCrowd(opts: CrowdOptions): Promise<CrowdFigures> {
  const log = opts.log ?? (() => {});
  const name = makeLongSource(opts.dir, opts.seconds);
  const server = await startServer({
    AP_LOCAL_ROOT: opts.dir,
    AP_ALLOW_INSECURE: '1',
    AP_LOG_LEVEL: 'error',
    AP_MAX_CONCURRENCY: '2',
    // the 10-minute render must not trip the silence limit on a loaded machine
    AP_RENDER_TIMEOUT: '600',
    ...opts.env,
  });
  const path = (cb: string, extra = '') =>
    `/insecure/${CROWD_OPTIONS}/cb:${cb}${extra}/plain/local://${name}`;
  try {
    const warm = reader(server.url, path('warm', '/t:0:1'));
    await warm.done;
    await sleep(500);
    const idleRss = rssOf(server.pid);
    log(`idle RSS ${(idleRss / 2 ** 20).toFixed(1)} MiB`);

    const cpu0 = cpuOf(server.pid);
    const solo = reader(server.url, path('solo'));
    const soloMs = await solo.done;
    await sleep(200); // ffmpeg reaped, so its CPU is in the children's count
    const cpu1 = cpuOf(server.pid);
    const backlogBytes = solo.received;
    log(`solo render ${soloMs.toFixed(0)} ms, variant ${backlogBytes} bytes`);

    const rate = backlogBytes / opts.seconds / SLOWDOWN;
    let peakRss = rssOf(server.pid);
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, rssOf(server.pid));
    }, RSS_SAMPLE_MS);
    const slow: Reader[] = [];
    const stalls: Reader[] = [];
    for (let i = 0; i < opts.clients; i++) slow.push(reader(server.url, path('crowd'), rate));
    for (let i = 0; i < opts.stalled; i++) stalls.push(reader(server.url, path('crowd'), 0));
    const fast = reader(server.url, path('crowd'));
    const late = opts.lateStalled ?? 0;
    if (late > 0) {
      while (fast.received < backlogBytes / 2 && fast.status !== undefined) await sleep(20);
      for (let i = 0; i < late; i++) stalls.push(reader(server.url, path('crowd'), 0));
    }
    const crowdRenderMs = await fast.done;
    await sleep(200);
    const cpu2 = cpuOf(server.pid);
    clearInterval(sampler);
    peakRss = Math.max(peakRss, rssOf(server.pid));
    log(
      `crowd render ${crowdRenderMs.toFixed(0)} ms, peak RSS ${(peakRss / 2 ** 20).toFixed(1)} MiB`,
    );

    const everyone = [...slow, ...stalls, fast];
    const statuses = count(everyone.map((r) => r.status));
    const cacheStatuses = count(everyone.map((r) => r.cache));
    const slowReceived = [
      Math.min(...slow.map((r) => r.received)),
      Math.max(...slow.map((r) => r.received)),
    ] as const;
    for (const r of slow) r.req.destroy();
    await sleep(STALL_SETTLE_MS);
    const stallRss = rssOf(server.pid);
    const slotsHeldAfter = await metric(server.metricsUrl, 'audio_proxy_render_slots_held');
    const rendersRunningAfter = await metric(server.metricsUrl, 'audio_proxy_renders_running');
    for (const r of stalls) r.req.destroy();
    return {
      idleRss,
      backlogBytes,
      soloMs,
      crowdRenderMs,
      soloCpuMs: cpu1.self - cpu0.self,
      crowdCpuMs: cpu2.self - cpu1.self,
      soloFfmpegCpuMs: cpu1.children - cpu0.children,
      crowdFfmpegCpuMs: cpu2.children - cpu1.children,
      peakRss,
      stallRss,
      slowReceived,
      slotsHeldAfter,
      rendersRunningAfter,
      statuses,
      cacheStatuses,
      exitCode: await stop(server),
    };
  } catch (error) {
    await stop(server);
    throw error;
  }
}

function stop(server: Server): Promise<number | null> {
  if (server.child.exitCode !== null) return Promise.resolve(server.child.exitCode);
  return new Promise((resolve) => {
    server.child.once('exit', (code) => resolve(code));
    server.child.kill('SIGTERM');
  });
}
