/**
 * Faults through the real server, with fake ffmpeg scripts selected as AP_FFMPEG_PATH (real
 * ffprobe still gates the source): the sole client leaving kills its render, a full queue is a
 * 429 with Retry-After, a slot that never comes is a 429 while a render that goes silent is a
 * 504, and a failure after the first byte tears the stream down. Every test ends with no slot
 * held and every spawned process dead.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import {
  closeLeavingNothing,
  get,
  type Harness,
  isAlive,
  startHarness,
  waitFor,
} from './harness.js';

const fake = (name: string) =>
  fileURLToPath(new URL(`../fixtures/fake-ffmpeg/${name}`, import.meta.url));

let h: Harness | null = null;
afterEach(async () => {
  if (!h) return;
  await closeLeavingNothing(h);
  h = null;
});

describe('render faults over HTTP', () => {
  it('the sole client leaving kills its render and frees the slot', async () => {
    h = await startHarness(
      {},
      { ffmpegTarget: fake('slow-drip.sh'), ffmpegArgs: ['100000', '0.05'] },
    );
    const ac = new AbortController();
    const pending = get(h.url, '/insecure/f:mp3/plain/local://stereo.wav', {
      signal: ac.signal,
      onFirstByte: () => ac.abort(),
    }).catch(() => null);
    await pending;
    await waitFor(async () => (await h!.spawns()).length === 1);
    const [pid] = await h.spawns();
    await waitFor(() => !isAlive(pid!), 8_000);
    await waitFor(() => h!.proxy.renders.live === 0, 8_000);
  });

  it('429 with Retry-After when every slot is busy and the queue is full', async () => {
    h = await startHarness(
      { AP_MAX_CONCURRENCY: '1', AP_QUEUE_SIZE: '0' },
      { ffmpegTarget: fake('hang.sh') },
    );
    const ac = new AbortController();
    const blocker = get(h.url, '/insecure/f:mp3/cb:a/plain/local://stereo.wav', {
      signal: ac.signal,
    }).catch(() => null);
    await waitFor(async () => (await stats(h!.proxy.actors.semaphore)).held === 1);
    const r = await get(h.url, '/insecure/f:mp3/cb:b/plain/local://stereo.wav');
    expect(r.status).toBe(429);
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(r.body.toString())).toEqual({
      error: 'queue_full',
      message: 'Render queue is full',
    });
    ac.abort();
    await blocker;
  });

  it('RT=1: a render that holds its slot and goes silent is a 504; a wait for a slot past RT+1 s is a 429', async () => {
    h = await startHarness(
      { AP_MAX_CONCURRENCY: '1', AP_QUEUE_SIZE: '4', AP_RENDER_TIMEOUT: '1' },
      { ffmpegTarget: fake('hang.sh') },
    );
    const [first, second] = await Promise.all([
      get(h.url, '/insecure/f:mp3/cb:x/plain/local://stereo.wav'),
      new Promise((r) => setTimeout(r, 150)).then(() =>
        get(h!.url, '/insecure/f:mp3/cb:y/plain/local://stereo.wav'),
      ),
    ]);
    expect(first.status).toBe(504);
    expect(JSON.parse(first.body.toString()).error).toBe('render_timeout');
    // The second waited behind a hung render; it either got its slot and timed out itself (504)
    // or waited past its own deadline (429). Both are distinct from success, never a 500.
    expect([429, 504]).toContain(second.status);
  });

  it('a failure after the first byte tears the stream down (200 status, no terminating chunk)', async () => {
    h = await startHarness(
      {},
      { ffmpegTarget: fake('crash-after.sh'), ffmpegArgs: ['200000', '3'] },
    );
    const r = await get(h.url, '/insecure/f:mp3/plain/local://stereo.wav');
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body.length).toBeGreaterThan(0);
  });

  it('an unclassified failure before the first byte is a 500 render_failed', async () => {
    h = await startHarness({}, { ffmpegTarget: fake('crash-after.sh'), ffmpegArgs: ['0', '3'] });
    const r = await get(h.url, '/insecure/f:mp3/plain/local://stereo.wav');
    expect(r.status).toBe(500);
    expect(JSON.parse(r.body.toString()).error).toBe('render_failed');
  });
});
