/**
 * Admission classes through HTTP (issue #19): `POST /warm` puts work into the render queue at
 * `high|normal|low`, live GETs are `interactive`, and everything the seed says about classes is
 * observed from outside: FIFO within a class, the oldest waiter of the highest class first, the
 * newest lowest-class waiter displaced by a live arrival into a full queue (reported, retried,
 * stored in the end), warm work preempted for a listener, `interactive` never displaced, and
 * `Retry-After` on every refusal.
 *
 * Ordering is read off a gate: ffmpeg is a script that waits while a hold file exists, then logs
 * its arguments (the trim tells which variant it is) and execs the real ffmpeg. With one render
 * slot the order of those lines is the order the semaphore granted slots. The last block is a
 * real-ffmpeg run without the gate: a warm of 100 entries ends with 100 stored variants. A node
 * without a store has no warm route: test/http/stages/warm.test.ts.
 */
import { chmod, mkdtemp, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

interface WarmLine {
  path: string;
  class?: string;
  status: 'hit' | 'started' | 'invalid' | 'rejected';
  reason?: string;
  job?: string;
  retryInS?: number;
}

interface JobView {
  job: string;
  path: string;
  state: string;
  history: string[];
  failure?: string;
}

async function warm(
  h: Harness,
  entries: unknown[],
): Promise<{ status: number; lines: WarmLine[] }> {
  const res = await fetch(`${h.url}/warm`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ entries }),
  });
  const body = (await res.json()) as { entries?: WarmLine[] };
  return { status: res.status, lines: body.entries ?? [] };
}

async function warmStatus(h: Harness): Promise<{ jobs: JobView[]; recent: JobView[] }> {
  return (await fetch(`${h.metricsUrl}/debug/warm`)).json() as Promise<{
    jobs: JobView[];
    recent: JobView[];
  }>;
}

async function metric(h: Harness, line: string): Promise<number> {
  const text = await (await fetch(`${h.metricsUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.slice(line.length + 1));
}

/** A path trimmed to `end` seconds: the trim is what the gate's log tells renders apart by. */
const trimmed = (end: string, format = 'mp3') =>
  `/insecure/f:${format}/t:0:${end}/plain/local://stereo.wav`;

/** The `-t` of every render the gate let through, in order. */
async function gateOrder(log: string): Promise<string[]> {
  const text = await readFile(log, 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => /(?:^| )-t (\S+)/.exec(l)?.[1] ?? '?');
}

describe('admission classes over HTTP, one slot behind a gate', () => {
  let h: Harness;
  let root: string;
  let gateDir: string;
  let hold: string;
  let log: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-warm-'));
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
        AP_READY_QUEUE_THRESHOLD: '1',
        AP_WARM_ADMITTED: '6',
        AP_WARM_BACKOFF_MAX_SECONDS: '1',
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

  const release = async () => {
    await unlink(hold).catch(() => {});
  };
  const closeGate = async () => {
    await writeFile(hold, '');
    await writeFile(log, '');
  };
  const settled = async (paths: string[]) => {
    await waitFor(
      async () => {
        const { recent } = await warmStatus(h);
        return paths.every((p) => recent.some((j) => j.path === p));
      },
      30_000,
      100,
    );
    return (await warmStatus(h)).recent;
  };

  it('FIFO within a class, the oldest waiter of the highest class first', async () => {
    await closeGate();
    const classes = ['low', 'low', 'high', 'normal', 'low', 'high'];
    const paths = classes.map((_, i) => trimmed(`0.${i + 2}`));
    const { status, lines } = await warm(
      h,
      paths.map((path, i) => ({ path, class: classes[i] })),
    );
    expect(status).toBe(200);
    expect(lines.map((l) => l.status)).toEqual(Array(6).fill('started'));
    // the first holds the slot (at the gate), the other five wait in the semaphore
    await waitFor(async () => (await metric(h, 'audio_proxy_render_queue_depth')) === 5);
    expect(await metric(h, 'audio_proxy_render_queue_depth_by_class{class="low"}')).toBe(2);
    expect(await metric(h, 'audio_proxy_render_queue_depth_by_class{class="high"}')).toBe(2);
    // a queue of warm work leaves the node in rotation: /ready judges listeners only
    const ready = await fetch(`${h.url}/ready`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { queued: number }).queued).toBe(0);
    await release();
    const done = await settled(paths);
    expect(paths.map((p) => done.find((j) => j.path === p)?.state)).toEqual(
      Array(6).fill('stored'),
    );
    // granted: the holder, then high (oldest first), normal, low (oldest first)
    expect(await gateOrder(log)).toEqual(['0.2', '0.4', '0.7', '0.5', '0.3', '0.6']);
    // stored means a HIT now
    const hit = await get(h.url, paths[3]!);
    expect(hit.status).toBe(200);
    expect(hit.headers['x-audio-proxy']).toBe('HIT');
    // warming it again is a `hit`, not a render
    expect((await warm(h, [{ path: paths[3] }])).lines[0]!.status).toBe('hit');
  }, 60_000);

  it('live requests into a full queue of low warm work: admitted at once, the newest low displaced, retried and stored', async () => {
    await closeGate();
    const warmPaths = [1, 2, 3, 4, 5, 6].map((i) => trimmed(`1.${i}`));
    const { lines } = await warm(
      h,
      warmPaths.map((path) => ({ path, class: 'low' })),
    );
    expect(lines.map((l) => l.status)).toEqual(Array(6).fill('started'));
    await waitFor(async () => (await metric(h, 'audio_proxy_render_queue_depth')) === 5);
    const displacedBefore = await metric(h, 'audio_proxy_render_displaced_total{class="low"}');
    const preemptedBefore = await metric(h, 'audio_proxy_render_orphans_preempted_total');

    // two listeners: each displaces the newest low waiter; the first preempts the warm holder
    const live = [trimmed('2.1', 'opus'), trimmed('2.2', 'opus')].map((p) => get(h.url, p));
    await waitFor(
      async () =>
        (await metric(h, 'audio_proxy_render_queue_depth_by_class{class="interactive"}')) >= 1,
    );
    await waitFor(
      async () =>
        (await metric(h, 'audio_proxy_render_displaced_total{class="low"}')) ===
        displacedBefore + 2,
    );
    await release();
    const responses = await Promise.all(live);
    for (const r of responses) {
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
    }
    // no live request waited behind warm work: both ran before any warm render after the gate
    const order = await gateOrder(log);
    expect(order.slice(0, 2).sort()).toEqual(['2.1', '2.2']);
    expect(await metric(h, 'audio_proxy_render_orphans_preempted_total')).toBe(preemptedBefore + 1);

    // the displaced are reported, re-queued with a bounded backoff, and stored in the end
    const done = await settled(warmPaths);
    const jobOf = (p: string) => done.find((j) => j.path === p)!;
    for (const p of warmPaths) expect(jobOf(p).state).toBe('stored');
    expect(jobOf(warmPaths[5]!).history).toContain('rejected(displaced)');
    expect(jobOf(warmPaths[4]!).history).toContain('rejected(displaced)');
    expect(jobOf(warmPaths[0]!).history).toContain('rejected(preempted)');
    for (const p of warmPaths.slice(1, 4)) expect(jobOf(p).history).toEqual(['started', 'stored']);
  }, 60_000);

  it('a listener who asks for a variant still queued as warm work raises it: served first, no waiting at low', async () => {
    await closeGate();
    const paths = ['5.1', '5.2', '5.3'].map((t) => trimmed(t));
    await warm(
      h,
      paths.map((path) => ({ path, class: 'low' })),
    );
    await waitFor(async () => (await metric(h, 'audio_proxy_render_queue_depth')) === 2);
    const preempted = await metric(h, 'audio_proxy_render_orphans_preempted_total');
    // joins the newest queued warm render: promoted to interactive, it preempts the warm holder
    // and takes its slot (at the gate) ahead of the older low waiter
    const live = get(h.url, paths[2]!);
    await waitFor(
      async () =>
        (await metric(h, 'audio_proxy_render_orphans_preempted_total')) === preempted + 1 &&
        (await metric(h, 'audio_proxy_render_queue_depth_by_class{class="low"}')) >= 1 &&
        (await metric(h, 'audio_proxy_render_slots_held')) === 1,
    );
    await release();
    const r = await live;
    expect(r.status).toBe(200);
    expect(r.headers['x-audio-proxy']).toBe('COALESCED');
    expect((await gateOrder(log))[0]).toBe('5.3');
    const done = await settled(paths);
    expect(done.find((j) => j.path === paths[2])!.history).toEqual(['started', 'stored']);
    expect(done.find((j) => j.path === paths[0])!.history).toContain('rejected(preempted)');
    expect(done.every((j) => !paths.includes(j.path) || j.state === 'stored')).toBe(true);
  }, 60_000);

  it('interactive is never displaced; every refusal carries Retry-After', async () => {
    await closeGate();
    // one holder and a full queue of listeners
    const live = [1, 2, 3, 4, 5, 6].map((i) => get(h.url, trimmed(`3.${i}`, 'opus')));
    await waitFor(async () => (await metric(h, 'audio_proxy_render_queue_depth')) === 5);
    // a seventh listener: nothing below it to displace, refused with Retry-After
    const refused = await get(h.url, trimmed('3.7', 'opus'));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // warm work cannot displace a listener either: rejected(queue_full), retried later
    const { lines } = await warm(h, [{ path: trimmed('3.8'), class: 'high' }]);
    expect(lines[0]).toMatchObject({ status: 'rejected', reason: 'queue_full' });
    expect(lines[0]!.retryInS).toBeGreaterThanOrEqual(1);
    // and /ready, which judges listeners, now says so
    expect((await fetch(`${h.url}/ready`)).status).toBe(503);
    await release();
    for (const r of await Promise.all(live)) expect(r.status).toBe(200);
    const done = await settled([trimmed('3.8')]);
    expect(done.find((j) => j.path === trimmed('3.8'))!.state).toBe('stored');
  }, 60_000);

  it('entries are checked as a GET of the same path would be; interactive cannot be spelled', async () => {
    await release();
    const good = trimmed('4.1');
    const { status, lines } = await warm(h, [
      { path: good, class: 'interactive' },
      { path: good, class: 'urgent' },
      { path: '/bad-signature/f:mp3/plain/local://stereo.wav' },
      { path: '/insecure/f:nope/plain/local://stereo.wav' },
      { path: '/insecure/f:mp3/plain/local://missing.wav' },
      { path: '/insecure/f:mp3/plain/local://video.mp4' },
      { path: 'f:mp3' },
      { nothing: true },
    ]);
    expect(status).toBe(200);
    expect(lines.map((l) => [l.status, l.reason?.split(':')[0]])).toEqual([
      ['invalid', 'class'],
      ['invalid', 'class'],
      ['invalid', 'invalid_signature'],
      ['invalid', 'invalid_options'],
      ['invalid', 'not_found'],
      ['invalid', 'video_source'],
      ['invalid', 'path'],
      ['invalid', 'path'],
    ]);
    // the request's own shape
    const tooMany = await warm(
      h,
      Array.from({ length: 101 }, () => ({ path: good })),
    );
    expect(tooMany.status).toBe(422);
    const notJson = await fetch(`${h.url}/warm`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(422);
    expect((await fetch(`${h.url}/warm`)).status).toBe(404); // GET: no such route
  });
});

describe('a catalogue of 100, and a trim continuing a trim, with real ffmpeg', () => {
  let h: Harness;
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-warm100-'));
    h = await startHarness({
      AP_VARIANT_STORE: `file://${root}`,
      AP_SERVE_MODE: 'proxy',
      AP_MAX_CONCURRENCY: '2',
      AP_QUEUE_SIZE: '8',
      AP_PREFETCH_NEXT_TRIM: '1',
    });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('a warm of 100 entries ends with 100 stored variants, each a HIT', async () => {
    const paths = Array.from(
      { length: 100 },
      (_, i) => `/insecure/f:mp3/t:0:0.2/cb:cat${i}/plain/local://stereo.wav`,
    );
    const { status, lines } = await warm(
      h,
      paths.map((path) => ({ path })),
    );
    expect(status).toBe(200);
    expect(lines.every((l) => l.status === 'started' || l.status === 'rejected')).toBe(true);
    await waitFor(
      async () => {
        const s = await warmStatus(h);
        return s.jobs.length === 0 && paths.every((p) => s.recent.some((j) => j.path === p));
      },
      120_000,
      200,
    );
    const { recent } = await warmStatus(h);
    const failures = recent.filter((j) => paths.includes(j.path) && j.state !== 'stored');
    expect(failures).toEqual([]);
    const files = await Promise.all(
      paths.map(async (p) => (await get(h.url, p)).headers['x-audio-proxy']),
    );
    expect(files.every((f) => f === 'HIT')).toBe(true);
    await stat(root);
  }, 150_000);

  it('a MISS of t:S:D prefetches t:S+D:D at low; the listener who asks for it gets a HIT', async () => {
    const first = await get(h.url, '/insecure/f:mp3/t:0:0.5/cb:pf/plain/local://stereo.wav');
    expect(first.status).toBe(200);
    expect(first.headers['x-audio-proxy']).toBe('MISS');
    await waitFor(
      async () =>
        (await warmStatus(h)).recent.some(
          (j) =>
            j.path === '/f:mp3/t:0.5:0.5/cb:pf/plain/local://stereo.wav' && j.state === 'stored',
        ),
      20_000,
      100,
    );
    const view = (await warmStatus(h)).recent.find((j) => j.path.includes('cb:pf'))!;
    expect(view).toMatchObject({
      reason: 'prefetch',
      class: 'low',
      history: ['started', 'stored'],
    });
    const next = await get(h.url, '/insecure/f:mp3/t:0.5:0.5/cb:pf/plain/local://stereo.wav');
    expect(next.headers['x-audio-proxy']).toBe('HIT');
    // a trim that would start at the source's end (3 s) predicts nothing
    const last = await get(h.url, '/insecure/f:mp3/t:2.5:0.5/cb:pf/plain/local://stereo.wav');
    expect(last.status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect(
      (await warmStatus(h)).jobs
        .concat((await warmStatus(h)).recent)
        .some((j) => j.path.includes('t:3:')),
    ).toBe(false);
  }, 60_000);
});
