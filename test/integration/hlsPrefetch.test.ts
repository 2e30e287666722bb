/**
 * HLS prefetch through HTTP with real ffmpeg (issue #19 item 3): a MISS of `hls_seg:N` renders
 * `hls_seg:N+1` (… `N+count`, `AP_PREFETCH_HLS_SEGMENTS`) into the store at class `low`, so the
 * next segment is a HIT without a client asking for it; never past the last segment, never the
 * init part, nothing without a store; and a prefetch never goes before a live listener in the
 * render queue (an ordering proof through the semaphore: one slot, ffmpeg behind a gate that
 * logs each render's arguments as it is let through, then execs the real ffmpeg).
 *
 * The source is the harness's 3 s `stereo.wav`; `hls_len:1` makes three segments (0, 1, 2).
 * Takes ~5 s on 2 cores.
 */
import { chmod, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

interface JobView {
  job: string;
  path: string;
  class: string;
  reason: string;
  state: string;
  history: string[];
}

async function warmJobs(h: Harness): Promise<JobView[]> {
  const s = (await (await fetch(`${h.metricsUrl}/debug/warm`)).json()) as {
    jobs: JobView[];
    recent: JobView[];
  };
  return [...s.jobs, ...s.recent];
}

async function metric(h: Harness, line: string): Promise<number> {
  const text = await (await fetch(`${h.metricsUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.slice(line.length + 1));
}

/** Segment `part` of a 1 s segmented playlist; `tag` keeps each test's keys its own. */
const segment = (tag: string, part: number | 'init', extra = '') =>
  `/insecure/f:hls/hls_len:1${extra}/cb:${tag}/hls_seg:${part}/plain/local://stereo.wav`;
/** The same path as the warm service names a prediction (no signature). */
const unsigned = (path: string) => path.slice('/insecure'.length);

/** Whether the store has `path` now: a HEAD answers HIT only for a stored variant, renders nothing. */
const stored = async (h: Harness, path: string) =>
  (await get(h.url, path, { method: 'HEAD' })).headers['x-audio-proxy'] === 'HIT';

describe('HLS prefetch with a store', () => {
  let h: Harness;
  let root: string;
  let gateDir: string;
  let hold: string;
  let log: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-hlspf-'));
    gateDir = await mkdtemp(join(tmpdir(), 'ap-gate-'));
    hold = join(gateDir, 'hold');
    log = join(gateDir, 'order.log');
    const script = join(gateDir, 'gated-ffmpeg');
    await writeFile(
      script,
      [
        '#!/bin/sh',
        `while [ -e '${hold}' ]; do sleep 0.02; done`,
        `echo "$*" >> '${log}'`,
        `exec '${resolveFfmpeg({ env: process.env }).path}' "$@"`,
        '',
      ].join('\n'),
    );
    await chmod(script, 0o755);
    await writeFile(log, '');
    h = await startHarness(
      {
        AP_VARIANT_STORE: `file://${root}`,
        AP_SERVE_MODE: 'proxy',
        AP_MAX_CONCURRENCY: '1',
        AP_QUEUE_SIZE: '5',
      },
      { ffmpegTarget: script },
    );
  }, 30_000);

  afterAll(async () => {
    await unlink(hold).catch(() => {});
    await h?.close();
    await rm(root, { recursive: true, force: true });
    await rm(gateDir, { recursive: true, force: true });
  });

  it('a MISS of hls_seg:0 stores hls_seg:1 at low without a client asking (default: one)', async () => {
    expect(h.config.get().prefetchHlsSegments).toBe(1);
    const first = await get(h.url, segment('one', 0));
    expect(first.status).toBe(200);
    expect(first.headers['x-audio-proxy']).toBe('MISS');
    // Polled through the store (HEAD renders nothing and predicts nothing).
    await waitFor(() => stored(h, segment('one', 1)), 15_000, 100);
    const job = (await warmJobs(h)).find((j) => j.path === unsigned(segment('one', 1)))!;
    expect(job).toMatchObject({ reason: 'prefetch', class: 'low', state: 'stored' });
    const next = await get(h.url, segment('one', 1));
    expect(next.status).toBe(200);
    expect(next.headers['x-audio-proxy']).toBe('HIT');
    // A HIT predicts nothing, and one segment ahead is the default: segment 2 is not stored.
    await new Promise((r) => setTimeout(r, 300));
    expect(await stored(h, segment('one', 2))).toBe(false);
    expect((await warmJobs(h)).some((j) => j.path.includes('cb:one/hls_seg:2'))).toBe(false);
  }, 30_000);

  it('never past the last segment, never the init part; 0 turns it off', async () => {
    h.config.set({ prefetchHlsSegments: 3 });
    try {
      // three segments (0, 1, 2): a MISS of 0 predicts 1 and 2, and nothing after them
      expect((await get(h.url, segment('end', 0))).headers['x-audio-proxy']).toBe('MISS');
      await waitFor(
        async () => (await stored(h, segment('end', 1))) && stored(h, segment('end', 2)),
        15_000,
        100,
      );
      // a trim windows the playlist: t:0:1.5 has segments 0 and 1 only
      const trimmed = (p: number) => segment('trim', p, '/t:0:1.5');
      expect((await get(h.url, trimmed(0))).headers['x-audio-proxy']).toBe('MISS');
      await waitFor(() => stored(h, trimmed(1)), 15_000, 100);
      // the init part and the last segment predict nothing
      expect((await get(h.url, segment('tail', 'init'))).headers['x-audio-proxy']).toBe('MISS');
      expect((await get(h.url, segment('tail', 2))).headers['x-audio-proxy']).toBe('MISS');
      h.config.set({ prefetchHlsSegments: 0 });
      expect((await get(h.url, segment('off', 0))).headers['x-audio-proxy']).toBe('MISS');
      await new Promise((r) => setTimeout(r, 500));
      const paths = (await warmJobs(h)).map((j) => j.path);
      expect(paths.filter((p) => p.includes('cb:end/')).sort()).toEqual([
        unsigned(segment('end', 1)),
        unsigned(segment('end', 2)),
      ]);
      expect(paths.filter((p) => p.includes('cb:trim/'))).toEqual([unsigned(trimmed(1))]);
      expect(paths.filter((p) => p.includes('cb:tail/') || p.includes('cb:off/'))).toEqual([]);
      expect(await stored(h, segment('tail', 0))).toBe(false);
      expect(await stored(h, segment('off', 1))).toBe(false);
    } finally {
      h.config.set({ prefetchHlsSegments: 1 });
    }
  }, 30_000);

  it('a prefetch waiter is never granted before a live listener who arrived after it', async () => {
    await writeFile(hold, '');
    await writeFile(log, '');
    const spawned = (await h.spawns()).length;
    // A takes the one slot and waits at the gate.
    const holder = get(h.url, '/insecure/f:mp3/t:0:0.3/cb:order/plain/local://stereo.wav');
    await waitFor(async () => (await h.spawns()).length === spawned + 1);
    // The segment MISS queues (interactive), then its prediction queues behind it (low).
    const seg0 = get(h.url, segment('order', 0));
    await waitFor(
      async () =>
        (await metric(h, 'audio_proxy_render_queue_depth_by_class{class="interactive"}')) === 1 &&
        (await metric(h, 'audio_proxy_render_queue_depth_by_class{class="low"}')) === 1,
    );
    // B arrives after the prefetch waiter.
    const late = get(h.url, '/insecure/f:mp3/t:0:0.4/cb:order/plain/local://stereo.wav');
    await waitFor(
      async () =>
        (await metric(h, 'audio_proxy_render_queue_depth_by_class{class="interactive"}')) === 2,
    );
    await unlink(hold);
    const answers = await Promise.all([holder, seg0, late]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    await waitFor(() => stored(h, segment('order', 1)), 15_000, 100);
    // The gate's log is the order the semaphore granted the slot: `-t` tells the renders apart
    // (segment 0 reads 1 s, segment 1 its 1 s plus 0.5 s of pre-roll).
    const order = (await readFile(log, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => /(?:^| )-t (\S+)/.exec(l)?.[1] ?? '?');
    expect(order).toEqual(['0.3', '1', '0.4', '1.5']);
  }, 30_000);
});

describe('HLS prefetch without a store', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ AP_SERVE_MODE: 'proxy' });
  }, 30_000);
  afterAll(() => h?.close());

  it('renders only what is asked for', async () => {
    const before = (await h.spawns()).length;
    const res = await get(h.url, segment('nostore', 0));
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.spawns()).length - before).toBe(1);
  });
});
