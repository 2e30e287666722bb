/**
 * A real incident, end to end: a running proxy (real ffmpeg, real HTTP) with the flight recorder
 * on loses messages: after a render's `release`, nothing about that slot reaches the semaphore
 * (neither the release nor the `gone` the render service sends when the coordinator ends; the
 * fault is injected where the actor system hands an event to the semaphore). The render completes, its slot stays
 * held, `slot_after_render` trips and the recorder saves; the real `audio-proxy replay FILE`
 * serves the recording, and headless Chromium shows the incident, steps to the step that broke
 * it (the coordinator `completed` while the semaphore still holds one slot), steps to an earlier
 * event (the render streaming) and draws the key's sequence diagram with the lost `release`.
 * Then SIGUSR2 on `audio-proxy serve` saves the ring on demand. About 10 s on a quiet machine.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRecording, type Recording } from '../../src/core/recording.js';
import { startBin } from '../binProcess.js';
import { chromiumPresent, launchChromium } from '../browser.js';
import { get, startHarness, waitFor } from '../integration/harness.js';
import { freePort } from '../ports.js';

const SLOW_MS = 90_000;
const UI_TIMEOUT_MS = 15_000;
const present = chromiumPresent('the flight recorder replay test');

const children: ChildProcess[] = [];
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

type Sendable = { _send(event: { type: string; id?: string }): void };

describe('a recorded incident', () => {
  let file = '';
  let recording: Recording;

  it(
    'saves the ring when a lost release leaves a slot held past its render',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'ap-incident-'));
      const h = await startHarness({
        AP_MAX_CONCURRENCY: '1',
        AP_FLIGHT_RECORDER: '20000',
        AP_FLIGHT_RECORDER_DIR: dir,
      });
      try {
        // The fault: once the first render slot is given back, nothing about it reaches the
        // semaphore any more: neither the coordinator's `release` nor the safety net's `gone`
        // (sent when the coordinator ends, a linger later).
        const semaphore = h.proxy.actors.semaphore as unknown as Sendable;
        const deliver = semaphore._send.bind(semaphore);
        let lost: string | undefined;
        semaphore._send = (event) => {
          if (lost === undefined && event.type === 'release' && event.id?.startsWith('render-')) {
            lost = event.id;
          }
          if (lost !== undefined && event.id === lost) return;
          deliver(event);
        };
        const r = await get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav');
        expect(r.status).toBe(200);
        expect(lost).toMatch(/^render-\d+$/);
        await waitFor(async () => (await readdir(dir)).length > 0, 15_000, 50);
        const [name] = await readdir(dir);
        expect(name).toMatch(/-invariant-slot_after_render\.ndjson$/);
        file = join(dir, name!);
        // the download on the metrics listener holds the same story
        const download = await get(h.metricsUrl, '/debug/recording');
        expect(download.status).toBe(200);
        expect(download.headers['content-type']).toContain('application/x-ndjson');
        const live = parseRecording(download.body.toString());
        expect(live.entries.some((e) => e.kind === 'invariant')).toBe(true);
        // the live page draws the same flow from the ring
        const key = live.header.actors
          .find((a) => a.chart === 'renderCoordinator')!
          .name.slice('renderCoordinator:'.length);
        const seq = await get(h.metricsUrl, `/debug/actors/sequence?key=${key}`);
        expect(seq.status).toBe(200);
        const drawn = JSON.parse(seq.body.toString()) as { mermaid: string };
        expect(drawn.mermaid).toMatch(/->>P\d+: release render-\d+/);
        // the incident over, the slot is given back so the proxy closes clean
        deliver({ type: 'release', id: lost! });
      } finally {
        await h.close();
      }
      recording = parseRecording(await readFile(file, 'utf8'));
      const trip = recording.entries.find((e) => e.kind === 'invariant');
      expect(trip).toMatchObject({ kind: 'invariant', check: 'slot_after_render' });
      const cause = recording.entries.find(
        (e) => trip?.kind === 'invariant' && e.seq === trip.step,
      );
      expect(cause).toMatchObject({ kind: 'snapshot', value: 'completed' });
      // the release was sent (the recorder saw the event) but the semaphore still held the slot
      const release = recording.entries.find(
        (e) =>
          e.kind === 'event' &&
          e.event.type === 'release' &&
          String(e.event.id).startsWith('render-'),
      );
      expect(release).toBeDefined();
      expect(release!.seq).toBeLessThan(cause!.seq);
    },
    SLOW_MS,
  );

  it.skipIf(!present)(
    'audio-proxy replay opens it in Chromium and shows the step that broke it',
    async () => {
      expect(file).not.toBe('');
      const bin = startBin(['replay', '--port', '0', file], { PATH: process.env.PATH ?? '' });
      children.push(bin.child);
      await waitFor(() => /open http:\/\/\S+/.test(bin.output()), 30_000, 50);
      const url = /open (http:\/\/\S+)/.exec(bin.output())![1]!;
      expect(bin.output()).toContain('1 invariant trip(s)');
      browser = await launchChromium();
      const page = await browser.newPage();
      const external: string[] = [];
      page.on('request', (req) => {
        if (!req.url().startsWith(new URL(url).origin)) external.push(req.url());
      });
      await page.goto(url);
      await page.waitForSelector('body[data-ready=true]', { timeout: UI_TIMEOUT_MS });

      await page.click('#goto-incident');
      await page.waitForSelector('#incident.shown[data-check=slot_after_render]', {
        timeout: UI_TIMEOUT_MS,
      });
      expect(await page.textContent('#incident')).toMatch(/render-\d+ is still held/);
      expect(await page.getAttribute('#step-info', 'data-kind')).toBe('invariant');

      await page.click('#goto-cause');
      await page.waitForSelector('body[data-cause=true]', { timeout: UI_TIMEOUT_MS });
      const trip = recording.entries.find((e) => e.kind === 'invariant');
      expect(await page.getAttribute('#step-info', 'data-seq')).toBe(
        String(trip?.kind === 'invariant' && trip.step),
      );
      // the recorded state at that instant: the coordinator completed, one slot still held
      await page.waitForSelector(
        '[data-chart=renderCoordinator] [data-state="renderCoordinator.completed"].active',
        { timeout: UI_TIMEOUT_MS },
      );
      await waitFor(async () => (await page.textContent('#sem-held')) === '1', UI_TIMEOUT_MS);

      // step to an earlier event: the render streaming
      const streaming = recording.entries.find(
        (e) => e.kind === 'snapshot' && e.value === 'rendering.streaming',
      )!;
      await page.goto(`${url}#seq=${streaming.seq}`);
      await page.reload();
      await page.waitForSelector('body[data-ready=true]', { timeout: UI_TIMEOUT_MS });
      expect(await page.getAttribute('#step-info', 'data-seq')).toBe(String(streaming.seq));
      await page.waitForSelector(
        '[data-chart=renderCoordinator] [data-state="renderCoordinator.rendering.streaming"].active',
        { timeout: UI_TIMEOUT_MS },
      );
      expect(await page.$('#incident.shown')).toBeNull();
      await page.click('#step');
      expect(Number(await page.getAttribute('#step-info', 'data-seq'))).toBeGreaterThan(
        streaming.seq,
      );

      // the key's sequence diagram, with the release that was lost, and its Mermaid text
      const coordinator = recording.header.actors.find((a) => a.chart === 'renderCoordinator')!;
      await page.fill('#f-key', coordinator.name.slice('renderCoordinator:'.length));
      await page.click('#seq-draw');
      await page.click('#last');
      await waitFor(
        async () => ((await page.textContent('#sequence')) ?? '').includes('release render-'),
        UI_TIMEOUT_MS,
      );
      const mermaid = await page.inputValue('#mermaid');
      expect(mermaid).toMatch(/^sequenceDiagram\n/);
      expect(mermaid).toMatch(/->>P\d+: release render-\d+/);
      expect(external).toEqual([]);
      bin.child.kill('SIGTERM');
      expect(await bin.exited).toBe(0);
    },
    SLOW_MS,
  );

  it(
    'SIGUSR2 on audio-proxy serve saves the ring',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'ap-sigusr2-'));
      const bin = startBin(['serve'], {
        PATH: process.env.PATH ?? '',
        AP_BIND: '127.0.0.1',
        AP_PORT: String(await freePort()),
        AP_METRICS_PORT: String(await freePort()),
        AP_LOCAL_ROOT: dir,
        AP_ALLOW_INSECURE: '1',
        AP_LOG_LEVEL: 'info',
        AP_LOG_FORMAT: 'json',
        AP_FLIGHT_RECORDER: '1000',
        AP_FLIGHT_RECORDER_DIR: dir,
      });
      children.push(bin.child);
      await waitFor(() => bin.output().includes('audio-proxy listening'), 60_000, 50);
      await waitFor(
        async () => {
          bin.child.kill('SIGUSR2');
          await new Promise((r) => setTimeout(r, 200));
          return (await readdir(dir)).some((f) => f.endsWith('-signal.ndjson'));
        },
        60_000,
        100,
      );
      expect(bin.output()).toContain('flight recorder saved');
      const saved = (await readdir(dir)).find((f) => f.endsWith('-signal.ndjson'))!;
      const rec = parseRecording(await readFile(join(dir, saved), 'utf8'));
      expect(rec.header.reason).toBe('signal');
      expect(rec.header.actors.map((a) => a.name)).toContain('semaphore');
      bin.child.kill('SIGTERM');
      expect(await bin.exited).toBe(0);
    },
    SLOW_MS,
  );
});
