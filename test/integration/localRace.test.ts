/**
 * Issue #14, "check and open race", through a real proxy: a swapper process flips a directory
 * inside the root for a symlink to a directory outside it (and a file for a FIFO) while requests
 * for the file run. Before the fix the confinement walk and ffmpeg's own open of the path were two
 * moments: a render that passed the walk could read the outside file (7 in 150), and a FIFO made
 * ffprobe wait for a writer until the probe timeout. Now the proxy opens the file itself and
 * judges the open file, so every answer is the inside file or a 404, and promptly.
 *
 * Then the descriptor ledger: many renders, failures and cancels leave the process's open
 * descriptors where they were.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { makeFixtures } from '../fixtures/audio.js';
import { closeLeavingNothing, get, type Harness, startHarness, waitFor } from './harness.js';

const ffmpeg = resolveFfmpeg({ env: process.env }).path;
const RACERS = 150;
const PARALLEL = 6;
/** A FIFO held open for a writer would answer at the probe timeout (30 s here); nothing may. */
const PROMPT_MS = 10_000;

let h: Harness;
let base: string;
let root: string;
let swapper: ChildProcess | undefined;

function tone(path: string, seconds: number, hz: number): void {
  execFileSync(ffmpeg, [
    ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi'],
    ...['-i', `sine=frequency=${hz}:sample_rate=8000:duration=${seconds}`],
    ...['-c:a', 'pcm_s16le', path],
  ]);
}

/** Runs `body` (Python statements) in a loop in its own process until stopped. */
function startSwapper(setup: string, body: string): ChildProcess {
  const indented = body
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
  const script = `import os, time\n${setup}\nwhile True:\n${indented}\n`;
  return spawn('python3', ['-c', script], { cwd: root, stdio: 'ignore' });
}

/** Python takes a few tens of ms to start: requests before that would race nothing. */
const SWAPPER_START_MS = 300;

async function stopSwapper(restore: string): Promise<void> {
  const child = swapper;
  swapper = undefined;
  if (!child) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  execFileSync('sh', ['-c', restore], { cwd: root });
}

/** `count` requests, `PARALLEL` at a time; `path(i)` varies the variant so none coalesce. */
async function race(count: number, path: (i: number) => string) {
  const results: { status: number; bytes: number; ms: number }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < count) {
        next += 1;
        const t0 = performance.now();
        const r = await get(h.url, path(next));
        results.push({ status: r.status, bytes: r.body.length, ms: performance.now() - t0 });
      }
    }),
  );
  return results;
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'ap-race-'));
  root = join(base, 'root');
  mkdirSync(join(root, 'd'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  // Inside: 1 s. Outside: 3 s. A wav render's length says which one was read.
  tone(join(root, 'd', 'song.wav'), 1, 440);
  tone(join(root, 'f.wav'), 1, 440);
  tone(join(base, 'outside', 'song.wav'), 3, 1000);
  copyFileSync((await makeFixtures()).stereoWav, join(root, 'ok.wav'));
  h = await startHarness({
    AP_LOCAL_ROOT: root,
    AP_PROBE_TIMEOUT: '30',
    AP_RENDER_TIMEOUT: '30',
    AP_QUEUE_SIZE: '64',
  });
});

afterAll(async () => {
  if (swapper) await stopSwapper('true');
  await new Promise((r) => setTimeout(r, 0));
  await closeLeavingNothing(h);
  rmSync(base, { recursive: true, force: true });
});

describe('a swap between the confinement walk and the open', () => {
  it('directory ↔ symlink to outside: only the inside file or a 404, never the outside one', async () => {
    const inside = await get(h.url, '/insecure/f:wav/plain/local://d/song.wav');
    expect(inside.status).toBe(200);
    // The outside file renders to about three times the inside one's length.
    const outsideFloor = inside.body.length * 2;
    // Half a millisecond each way: the real directory, then a symlink to the outside one.
    swapper = startSwapper(
      "os.symlink('../outside', 'd.link')",
      [
        "os.rename('d', 'd.real'); os.rename('d.link', 'd')",
        'time.sleep(0.0005)',
        "os.rename('d', 'd.link'); os.rename('d.real', 'd')",
        'time.sleep(0.0005)',
      ].join('\n'),
    );
    await new Promise((r) => setTimeout(r, SWAPPER_START_MS));
    // Every request a distinct variant (its own render, its own open of the source).
    const results = await race(
      RACERS,
      (i) => `/insecure/f:wav/sr:${8_000 + i}/plain/local://d/song.wav`,
    );
    await stopSwapper('if [ -L d ]; then rm d; mv d.real d; fi; rm -f d.link');
    const leaked = results.filter((r) => r.status === 200 && r.bytes >= outsideFloor);
    expect(leaked).toEqual([]);
    for (const r of results) expect([200, 404]).toContain(r.status);
  }, 120_000);

  it('file ↔ FIFO: refused at once, no slot held until a timeout', async () => {
    // Five milliseconds each way: the file (touched, so the probe cache sees a new version),
    // then a FIFO nobody writes to.
    swapper = startSwapper(
      "os.mkfifo('f.fifo')",
      [
        "os.utime('f.wav', None); time.sleep(0.005)",
        "os.rename('f.wav', 'f.real'); os.rename('f.fifo', 'f.wav')",
        'time.sleep(0.005)',
        "os.rename('f.wav', 'f.fifo'); os.rename('f.real', 'f.wav')",
      ].join('\n'),
    );
    await new Promise((r) => setTimeout(r, SWAPPER_START_MS));
    // /info probes the source; the probe cache keys on size and mtime, so a FIFO (size 0) at
    // the walk is a new version and is probed again.
    const results = await race(60, () => '/insecure/info/plain/local://f.wav');
    await stopSwapper('if [ -p f.wav ]; then rm f.wav; mv f.real f.wav; fi; rm -f f.fifo');
    const slow = results.filter((r) => r.ms > PROMPT_MS);
    expect(slow).toEqual([]);
    for (const r of results) expect([200, 404]).toContain(r.status);
    expect((await stats(h.proxy.actors.semaphore)).held).toBe(0);
  }, 120_000);
});

describe('descriptors', () => {
  const openFds = () => readdirSync('/proc/self/fd').length;

  it('renders, failures and cancels leave the open descriptors where they were', async () => {
    // Warm every pool thread and cache first, so the baseline holds their own descriptors.
    await Promise.all([1, 2].map(() => get(h.url, '/insecure/f:mp3/plain/local://ok.wav')));
    await waitFor(async () => (await stats(h.proxy.actors.semaphore)).held === 0);
    const before = openFds();
    for (let i = 0; i < 12; i++) {
      const variant = `br:${64 + i}`;
      await get(h.url, `/insecure/f:mp3/${variant}/plain/local://ok.wav`); // a render
      await get(h.url, '/insecure/f:mp3/plain/local://missing.wav'); // 404 before any open
      // A cancel: the client leaves as soon as the first byte arrives.
      const ac = new AbortController();
      await get(h.url, `/insecure/f:wav/${variant}/sr:8000/plain/local://ok.wav`, {
        signal: ac.signal,
        onFirstByte: () => ac.abort(),
      }).catch(() => {});
    }
    await waitFor(async () => (await stats(h.proxy.actors.semaphore)).held === 0);
    await waitFor(() => openFds() <= before, 10_000).catch(() => {});
    expect(openFds()).toBeLessThanOrEqual(before);
  }, 120_000);
});
