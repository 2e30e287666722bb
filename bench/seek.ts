/**
 * Seeking on the first play: `npm run bench -- seek [--minutes 10] [--rounds 1]`.
 *
 * Headless Chromium (Debian's, through playwright-core) plays an uncached variant of a generated
 * 10-minute source (mp3, 128 kb/s, a tone piece) from a proxy on loopback, and measures two
 * figures per way of playing it:
 * - **duration shown**: from setting the `<audio>` source to the first finite `duration`;
 * - **seek to 80 % plays**: from setting `currentTime` to 80 % of it to the first `timeupdate`
 *   past that point (playback has started there).
 * The ways, each on a fresh cache key (`cb:`), in the same run:
 * - `hls`: `f:hls` (flac segments of 6 s, the default), the browser's own HLS;
 * - `today`: `f:mp3`, the MISS streamed as one file: no length, no ranges. Chromium shows no
 *   duration during that first play (it reads only as far ahead as it buffers, so it never
 *   learns the end; checked 3 s in), so the soonest a seek can work is a play once the render
 *   has ended: the whole render's wall time (one reader taking the MISS to its end), plus the
 *   duration and seek figures of playing the same URL again, now a HIT (the baseline);
 * - `range`: `f:wav` when the server answers a `Range` on a MISS with 206 (exact-length
 *   formats, a separate change): the duration from `Content-Length`, the seek a range request.
 *   Otherwise it is reported as not available.
 * Prints one table; `report('seek', …)` feeds `bench/all.ts`. Figures go to docs/performance.md
 * ("Seeking on the first play").
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { loadConfig, mutableConfig } from '../src/config/index.js';
import { createAudioProxy } from '../src/proxy.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';
import { CHROMIUM } from '../test/browser.js';
import { report } from './report.js';

/** A browser global, used only inside `page.evaluate` callbacks (the tsconfig has no DOM lib). */
declare const document: any;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const MINUTES = arg('minutes', 10);
const ROUNDS = arg('rounds', 1);
const SEEK_AT = 0.8;
/** How long one way may take: the whole render of the baseline, on a loaded machine. */
const WAY_TIMEOUT_MS = 300_000;

const ffmpeg = resolveFfmpeg({ env: process.env }).path;

/** The source, made once per length and kept in the tmpdir. */
function source(dir: string): string {
  const file = join(dir, `long-${MINUTES}m.mp3`);
  if (existsSync(file)) return file;
  const s = MINUTES * 60;
  const expr =
    "aevalsrc='0.25*sin(2*PI*(220+55*floor(mod(t,8)))*t)*(0.7+0.3*sin(2*PI*2*t))|0.25*sin(2*PI*(330+55*floor(mod(t,6)))*t)'";
  execFileSync(ffmpeg, [
    ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `${expr}:s=44100:d=${s}`],
    ...['-c:a', 'libmp3lame', '-b:a', '128k', file],
  ]);
  return file;
}

/** Reads `path` to its end; resolves with the status. */
function readAll(base: string, path: string): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Reads `path` to its end beside a player (the same render: a COALESCED join, or the MISS that
 * starts it) and resolves with the moment (this process's `performance.now()`) the bytes up to
 * `fraction` of its `Content-Length` had arrived: when the render had reached that point.
 */
function reachedAt(base: string, path: string, fraction: number): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      const total = Number(res.headers['content-length']);
      if (!(total > 0)) {
        res.destroy();
        reject(new Error(`no Content-Length (${res.statusCode})`));
        return;
      }
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes >= total * fraction) {
          resolve(performance.now());
          res.destroy();
        }
      });
      res.on('error', () => {});
    });
    req.on('error', reject);
    req.end();
  });
}

/** Status of a GET with `range` on `path` (the request is dropped once the head arrives). */
function rangeStatus(base: string, path: string, range: string): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, headers: { range }, agent: false },
      (res) => {
        resolve(res.statusCode ?? 0);
        res.destroy();
      },
    );
    req.on('error', reject);
    req.end();
  });
}

interface Figures {
  readonly durationMs: number;
  readonly seekMs: number;
  readonly durationS: number;
  readonly engine: string;
  /** Range way only: from the render reaching the seek's point to playing there. */
  readonly overheadMs?: number;
}

async function main(): Promise<void> {
  const dir = join(tmpdir(), 'audio-proxy-bench-seek');
  mkdirSync(dir, { recursive: true });
  const t0 = performance.now();
  const file = source(dir);
  console.log(
    `source: ${MINUTES} min mp3 at ${file} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  const store = mkdtempSync(join(tmpdir(), 'ap-bench-seek-store-'));
  const config = mutableConfig(
    loadConfig({
      AP_LOCAL_ROOT: dir,
      AP_ALLOW_INSECURE: '1',
      AP_LOG_LEVEL: 'error',
      AP_MAX_CONCURRENCY: '2',
      AP_VARIANT_STORE: `file://${store}`,
      AP_SERVE_MODE: 'proxy',
    }),
  );
  const proxy = await createAudioProxy({
    config,
    logger: (await import('pino')).pino({ level: 'silent' }),
  });
  const { url: base } = await proxy.listen({ host: '127.0.0.1', port: 0 });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
  });
  const name = `long-${MINUTES}m.mp3`;
  /** Plays `path` in a fresh page; the figures, or why not. */
  async function play(path: string): Promise<Figures | string> {
    const page = await browser.newPage();
    try {
      // tsx names functions with an `__name` helper the page does not have.
      await page.addInitScript('globalThis.__name = (f) => f;');
      await page.goto(`${base}/health`); // any page of the proxy's origin
      return await page.evaluate(
        async ({ src, at, timeout }) => {
          const audio = document.createElement('audio');
          audio.muted = true; // autoplay without a gesture
          document.body.append(audio);
          const engine = src.includes('/f:hls/') ? 'native-hls' : 'file';
          const until = (check: () => boolean, events: string[]) =>
            new Promise<void>((resolve, reject) => {
              const timer = setTimeout(() => reject(new Error('timed out')), timeout);
              const test = () => {
                if (!check()) return;
                clearTimeout(timer);
                for (const e of events) audio.removeEventListener(e, test);
                resolve();
              };
              for (const e of events) audio.addEventListener(e, test);
              audio.addEventListener('error', () =>
                reject(new Error(`media error ${audio.error?.code}`)),
              );
              test();
            });
          const start = performance.now();
          audio.src = src;
          void audio.play().catch(() => {});
          await until(
            () => Number.isFinite(audio.duration) && audio.duration > 0,
            ['durationchange', 'loadedmetadata'],
          );
          const durationMs = performance.now() - start;
          const durationS = audio.duration;
          const target = durationS * at;
          const seekStart = performance.now();
          audio.currentTime = target;
          void audio.play().catch(() => {});
          await until(
            () => !audio.seeking && audio.currentTime > target && !audio.paused,
            ['timeupdate', 'playing'],
          );
          return { durationMs, seekMs: performance.now() - seekStart, durationS, engine };
        },
        { src: `${base}${path}`, at: SEEK_AT, timeout: WAY_TIMEOUT_MS },
      );
    } catch (error) {
      return (error as Error).message.split('\n')[0]!;
    } finally {
      await page.close();
    }
  }

  /** What Chromium knows of a streamed MISS `ms` into its first play: duration, seekable end. */
  async function firstPlayView(path: string, ms: number): Promise<string> {
    const page = await browser.newPage();
    try {
      await page.addInitScript('globalThis.__name = (f) => f;');
      await page.goto(`${base}/health`);
      return await page.evaluate(
        async ({ src, wait }) => {
          const audio = document.createElement('audio');
          audio.muted = true;
          document.body.append(audio);
          audio.src = src;
          void audio.play().catch(() => {});
          await new Promise((r) => setTimeout(r, wait));
          const s = audio.seekable;
          const end = s.length > 0 ? s.end(s.length - 1) : 0;
          return `duration ${audio.duration}, seekable to ${end.toFixed(1)} s`;
        },
        { src: `${base}${path}`, wait: ms },
      );
    } finally {
      await page.close();
    }
  }

  /** Today: the first play shows no duration; the seek works once the whole render is in. */
  async function baseline(path: string): Promise<Figures | string> {
    const started = performance.now();
    const whole = readAll(base, path);
    const view = await firstPlayView(path, 3_000);
    console.log(`today, 3 s into the first play: ${view}`);
    const status = await whole;
    const renderMs = performance.now() - started;
    if (status !== 200) return `the MISS answered ${status}`;
    const hit = await play(path);
    if (typeof hit === 'string') return hit;
    return { ...hit, durationMs: renderMs + hit.durationMs, engine: 'file (after the render)' };
  }

  const rows: Record<string, (Figures | string)[]> = { hls: [], today: [], range: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const cb = `cb:${Date.now()}r${round}`;
    rows.hls!.push(await play(`/insecure/f:hls/${cb}/plain/local://${name}`));
    rows.today!.push(await baseline(`/insecure/f:mp3/${cb}/plain/local://${name}`));
    // Exact-length ranges on a MISS: asked once on a key of its own, then played on another.
    const status = await rangeStatus(
      base,
      `/insecure/f:wav/${cb}probe/plain/local://${name}`,
      'bytes=1000-1999',
    );
    if (status !== 206) {
      rows.range!.push(`not available: a Range on a f:wav MISS is answered ${status}`);
      continue;
    }
    // The target is "within 1 s plus the time to render up to that point": a reader beside the
    // player says when the render got there, and the seek's overhead is what came after.
    const path = `/insecure/f:wav/${cb}/plain/local://${name}`;
    const reached = reachedAt(base, path, SEEK_AT);
    const played = await play(path);
    const playingAt = performance.now();
    if (typeof played === 'string') {
      rows.range!.push(played);
      continue;
    }
    const overheadMs = playingAt - (await reached);
    console.log(
      `range: playing ${overheadMs.toFixed(0)} ms after the render reached ${SEEK_AT * 100} % (target ≤ 1000 ms)`,
    );
    rows.range!.push({ ...played, overheadMs });
  }
  await browser.close();
  await proxy.close();

  const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const figures: Record<string, number | string> = {};
  console.log(`\nuncached ${MINUTES}-minute source, seek to ${SEEK_AT * 100} %, headless Chromium`);
  console.log('way    | duration shown | seek → playing | duration (s) | engine');
  for (const [way, results] of Object.entries(rows)) {
    for (const r of results) {
      if (typeof r === 'string') {
        console.log(`${way.padEnd(6)} | ${r}`);
        figures[`${way}_note`] = r;
        continue;
      }
      console.log(
        `${way.padEnd(6)} | ${fmt(r.durationMs).padStart(14)} | ${fmt(r.seekMs).padStart(14)} | ${r.durationS.toFixed(1).padStart(12)} | ${r.engine}`,
      );
      figures[`${way}_duration_ms`] = Math.round(r.durationMs);
      figures[`${way}_seek_ms`] = Math.round(r.seekMs);
      if (r.overheadMs !== undefined) {
        console.log(
          `${way.padEnd(6)} | playing ${fmt(r.overheadMs)} after the render reached the point`,
        );
        figures[`${way}_after_render_ms`] = Math.round(r.overheadMs);
      }
    }
  }
  const hls = rows.hls!.find((r): r is Figures => typeof r !== 'string');
  const today = rows.today!.find((r): r is Figures => typeof r !== 'string');
  if (hls && today) {
    const ratio = (today.durationMs + today.seekMs) / (hls.durationMs + hls.seekMs);
    console.log(
      `\nfrom Play to playing at ${SEEK_AT * 100} %: hls ${fmt(hls.durationMs + hls.seekMs)}, today ${fmt(today.durationMs + today.seekMs)} (${ratio.toFixed(0)}× sooner)`,
    );
    figures.ratio = Number(ratio.toFixed(1));
  }
  report('seek', figures);
}

await main();
