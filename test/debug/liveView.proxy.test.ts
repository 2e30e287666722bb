/**
 * The live view on a real proxy (one slot, ffmpeg paced by `-re` so a render lasts about as long
 * as its audio):
 * - it is served on the metrics listener and on no other (every `/debug/actors` path is a 404
 *   on the public listener); the page is self-contained (CSP `default-src 'none'`, no external
 *   URL) and carries every chart;
 * - the event stream opens with a snapshot of the long-lived actors, then follows a real render
 *   (coordinator `rendering` → `completed` → gone, semaphore held 1 → 0);
 * - in headless Chromium (skipped only when /usr/bin/chromium is absent) the page, loading
 *   nothing but itself, shows one coordinator `rendering` while a second is `queued`, then
 *   `completed`, then none; a screenshot of the busy moment goes to test-artifacts/;
 * - each render request is followed as a delivery actor (`streaming`, then gone), and a client
 *   connecting afterwards sees none: an ended delivery is not kept;
 * - `close()` ends an open stream instead of hanging on it.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActorView } from '../../src/debug/liveView.js';
import { CHROMIUM, chromiumPresent, launchChromium } from '../browser.js';
import { get, type Harness, startHarness } from '../integration/harness.js';
import { openSse } from './sse.js';

const ARTIFACTS = join(process.cwd(), 'test-artifacts');
/** Wall-clock waits are generous: up to seven agents share two cores. */
const UI_TIMEOUT_MS = 15_000;
/** Starting a proxy (warm worker pools) or a browser under heavy load; a hang is far beyond. */
const SLOW_HOOK_MS = 60_000;
/** Two paced renders and the page's reactions, with room for a loaded machine. */
const SLOW_TEST_MS = 60_000;
const present = chromiumPresent('the live-view browser test');

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ AP_MAX_CONCURRENCY: '1' }, { ffmpegArgs: ['-re'] });
}, SLOW_HOOK_MS);
afterAll(async () => {
  await h?.close();
});

const view = (r: { data: unknown }) => r.data as ActorView;

describe('live view on a real proxy', () => {
  it('is not served on the public listener', async () => {
    for (const path of [
      '/debug/actors',
      '/debug/actors/',
      '/debug/actors/events',
      '/debug/actors/charts',
    ]) {
      const r = await get(h.url, path);
      expect(r.status, path).toBe(404);
      expect(r.body.toString()).not.toContain('<html');
    }
  });

  it('serves a self-contained page with every chart on the metrics listener', async () => {
    const r = await get(h.metricsUrl, '/debug/actors');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['content-security-policy']).toContain("default-src 'none'");
    const html = r.body.toString();
    expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//i);
    const charts = (await get(h.metricsUrl, '/debug/actors/charts')).body.toString();
    const ids = (JSON.parse(charts) as { id: string }[]).map((c) => c.id);
    expect(ids).toContain('renderCoordinator');
    expect(ids).toHaveLength(11);
    for (const id of ids) expect(html).toContain(`"id":"${id}"`);
    const head = await get(h.metricsUrl, '/debug/actors', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect((await get(h.metricsUrl, '/debug/actors/nope')).status).toBe(404);
    expect((await get(h.metricsUrl, '/metrics')).status).toBe(200);
  });

  it('streams a snapshot, then a render moving through its states', async () => {
    const sse = await openSse(h.metricsUrl, '/debug/actors/events');
    try {
      expect(sse.status).toBe(200);
      expect(sse.headers['content-type']).toContain('text/event-stream');
      const snap = (await sse.waitFor((r) => r.event === 'snapshot')).data as {
        actors: ActorView[];
      };
      const labels = snap.actors.map((a) => a.label).sort();
      expect(labels).toEqual([
        'pool:probe',
        'pool:render',
        'probeLimiter',
        'readiness',
        'semaphore',
      ]);
      const sem = snap.actors.find((a) => a.chart === 'semaphore')!;
      expect(sem.value).toBe('serving');
      expect(sem.details).toMatchObject({ held: 0, queued: 0, capacity: 1, queued_low: 0 });

      const render = get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
      const rendering = await sse.waitFor(
        (r) =>
          r.event === 'actor' &&
          view(r).chart === 'renderCoordinator' &&
          view(r).value === 'rendering.streaming',
      );
      expect(view(rendering).active).toContain('renderCoordinator.rendering');
      expect(String(view(rendering).details.input)).toContain('stereo.wav');
      expect(view(rendering).details.output).toBe('mp3');
      await sse.waitFor(
        (r) => r.event === 'actor' && view(r).chart === 'semaphore' && view(r).details.held === 1,
      );
      await sse.waitFor(
        (r) =>
          r.event === 'actor' &&
          view(r).chart === 'render' &&
          view(r).parent === view(rendering).id,
      );
      expect((await render).status).toBe(200);
      const completed = await sse.waitFor(
        (r) =>
          r.event === 'actor' && view(r).id === view(rendering).id && view(r).value === 'completed',
      );
      const at = sse.records.indexOf(completed);
      await sse.waitFor(
        (r) => r.event === 'actor' && view(r).chart === 'semaphore' && view(r).details.held === 0,
        10_000,
        at - 3,
      );
      await sse.waitFor(
        (r) => r.event === 'gone' && (r.data as { id: string }).id === view(rendering).id,
        10_000,
        at,
      );
      const feed = sse.records
        .filter((r) => r.event === 'feed')
        .map((r) => (r.data as { channel: string }).channel);
      expect(feed).toContain('audio_proxy.semaphore.acquired');
      expect(feed).toContain('audio_proxy.semaphore.released');
    } finally {
      sse.close();
    }
  });

  it('follows each render request as a delivery actor and forgets it when its response ends', async () => {
    const sse = await openSse(h.metricsUrl, '/debug/actors/events');
    try {
      await sse.waitFor((r) => r.event === 'snapshot');
      const render = get(h.url, '/insecure/f:opus/t:0:1/cb:delivery/plain/local://stereo.wav');
      const streaming = await sse.waitFor(
        (r) => r.event === 'actor' && view(r).chart === 'delivery' && view(r).value === 'streaming',
      );
      expect(view(streaming).label).toMatch(/^delivery:sub-\d+$/);
      expect(view(streaming).active).toContain('delivery.streaming');
      expect(view(streaming).details.cache).toBe('MISS');
      expect((await render).status).toBe(200);
      await sse.waitFor(
        (r) => r.event === 'gone' && (r.data as { id: string }).id === view(streaming).id,
      );
      // Its coordinator lingers a while: wait it out, so the next test starts with none.
      const coordinator = await sse.waitFor(
        (r) => r.event === 'actor' && view(r).chart === 'renderCoordinator',
      );
      await sse.waitFor(
        (r) => r.event === 'gone' && (r.data as { id: string }).id === view(coordinator).id,
        UI_TIMEOUT_MS,
      );
    } finally {
      sse.close();
    }
    // Nothing of it is kept: a client arriving now sees no delivery.
    const later = await openSse(h.metricsUrl, '/debug/actors/events');
    try {
      const snap = (await later.waitFor((r) => r.event === 'snapshot')).data as {
        actors: ActorView[];
      };
      expect(snap.actors.filter((a) => a.chart === 'delivery')).toEqual([]);
    } finally {
      later.close();
    }
  });
});

describe.skipIf(!present)(`live view in headless Chromium (${CHROMIUM})`, () => {
  let browser: Browser;
  let page: Page;
  const requests: string[] = [];
  const errors: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
  }, SLOW_HOOK_MS);
  afterAll(async () => {
    await browser?.close();
  });

  const active = (state: string) =>
    `[data-chart="renderCoordinator"] [data-state="renderCoordinator.${state}"].active`;
  /** Waits until the element's text is `value` (polled through the locator: the page's CSP forbids eval). */
  const text = (id: string, value: string) =>
    expect
      .poll(() => page.locator(`#${id}`).textContent(), { timeout: UI_TIMEOUT_MS, interval: 50 })
      .toBe(value);

  it(
    'shows renders moving through the coordinator and the semaphore',
    async () => {
      await page.goto(`${h.metricsUrl}/debug/actors`);
      await page.waitForSelector('#conn[data-state=open]', { timeout: UI_TIMEOUT_MS });
      await text('sem-held', '0');
      // every chart is drawn, with the idle long-lived actors in their states
      expect(await page.locator('section.chart').count()).toBe(11);
      await page.waitForSelector(
        '[data-chart="semaphore"] [data-state="semaphore.serving"].active',
      );
      expect(await page.locator('#pools tr').count()).toBe(2);

      // the whole 3 s file: long enough, even on a loaded machine, for the second to queue behind it
      const first = get(h.url, '/insecure/f:mp3/plain/local://stereo.wav');
      await page.waitForSelector(active('rendering'), { timeout: UI_TIMEOUT_MS });
      await text('sem-held', '1');
      const second = get(h.url, '/insecure/f:opus/t:0:1/plain/local://stereo.wav');
      await page.waitForSelector(active('queued'), { timeout: UI_TIMEOUT_MS });
      await text('sem-queued', '1');
      await text('sem-q-interactive', '1');
      // the busy moment, kept as the artifact: one rendering, one queued behind it
      await mkdir(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'debug-actors.png'), fullPage: true });
      expect(await page.locator('#renders tr[data-key]').count()).toBe(2);
      await page.waitForSelector('[data-chart="render"] [data-state="render.active"].active', {
        timeout: UI_TIMEOUT_MS,
      });

      // the first finishes and lingers as completed while the second takes the slot
      await page.waitForSelector(active('completed'), { timeout: UI_TIMEOUT_MS });
      await text('sem-queued', '0');
      expect((await first).status).toBe(200);
      expect((await second).status).toBe(200);
      await text('sem-held', '0');
      await expect
        .poll(() => page.locator('#renders tr[data-key]:not(.ended)').count(), {
          timeout: UI_TIMEOUT_MS,
          interval: 50,
        })
        .toBe(0);
      expect(await page.locator(active('rendering')).count()).toBe(0);

      expect(errors).toEqual([]);
      const origin = new URL(h.metricsUrl).origin;
      expect(requests.length).toBeGreaterThan(0);
      for (const url of requests) expect(url.startsWith(`${origin}/debug/actors`)).toBe(true);
    },
    SLOW_TEST_MS,
  );
});

describe('live view at shutdown', () => {
  it('ends open streams on close(), which does not hang', async () => {
    const sse = await openSse(h.metricsUrl, '/debug/actors/events');
    await sse.waitFor((r) => r.event === 'snapshot');
    const started = Date.now();
    await h.close();
    await sse.ended;
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
