/**
 * Orphans yield (issue #14, item 5), through the real proxy: real ffmpeg slowed to real time
 * (`-re`), a real file variant store. Clients that connect and close at once leave renders kept
 * alive only for the store (orphans) in every slot; a live listener that comes next must be
 * served well before those orphans would finish, the orphans' partial writes must be thrown
 * away (nothing stored, nothing staged), and afterwards no slot, coordinator or ffmpeg is left.
 *
 * On the code before the fix the listener waits in the queue behind the orphans (a 60 s
 * source at real time), so its bounded wait below fails.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import { FileVariantStore } from '../../src/store/file.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { get, type Harness, isAlive, startHarness, waitFor } from './harness.js';

const SLOTS = 2;
/** The orphans' source: at real time (`-re`) each would hold its slot this long. */
const LONG_SOURCE_S = 60;
/** A listener must be served well inside the orphans' remaining time. */
const LISTENER_BUDGET_MS = 15_000;

/** A 60 s stereo tone next to the fixtures. */
async function longSource(dir: string): Promise<string> {
  const name = 'orphan-long.wav';
  const target = join(dir, name);
  if (await stat(target).catch(() => null)) return name;
  const tmp = `${target}.${process.pid}.part.wav`;
  execFileSync(resolveFfmpeg({ env: process.env }).path, [
    ...['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi'],
    ...['-i', `sine=frequency=220:sample_rate=44100:duration=${LONG_SOURCE_S}`, '-ac', '2', tmp],
  ]);
  await rename(tmp, target);
  return name;
}

/** Connects, waits for the response head (the render is running), and hangs up: the ETag. */
function connectAndClose(base: string, path: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      const etag = String(res.headers.etag ?? '')
        .replace(/^W\//, '')
        .replaceAll('"', '');
      res.destroy();
      req.destroy();
      if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
      else resolve(etag);
    });
    req.on('error', () => {});
    req.end();
  });
}

async function metric(h: Harness, name: string): Promise<number> {
  const text = await (await fetch(`${h.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
}

describe('orphaned renders yield their slots to live listeners', () => {
  let h: Harness;
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ap-itest-orphans-'));
    h = await startHarness(
      {
        AP_VARIANT_STORE: `file://${root}`,
        AP_SERVE_MODE: 'proxy',
        AP_MAX_CONCURRENCY: String(SLOTS),
      },
      { ffmpegArgs: ['-re'] },
    );
  });
  afterAll(async () => {
    await h?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('connect-and-close requests fill every slot; listeners are served at once, nothing partial is stored', async () => {
    const long = await longSource(h.fixtures.dir);
    const semaphore = h.proxy.actors.semaphore;
    // Distinct variants, one per slot; each client hangs up as soon as the render is running.
    const orphanKeys: string[] = [];
    for (let i = 0; i < SLOTS; i++) {
      orphanKeys.push(
        await connectAndClose(h.url, `/insecure/f:opus/cb:orphan${i}/plain/local://${long}`),
      );
    }
    expect(orphanKeys.every((k) => /^[0-9a-f]{64}$/.test(k))).toBe(true);
    expect((await stats(semaphore)).held).toBe(SLOTS);

    // Live listeners for other variants, as many as there are slots: each must get a slot now.
    const started = Date.now();
    const listeners = await Promise.all(
      Array.from({ length: SLOTS }, (_, i) =>
        get(h.url, `/insecure/f:mp3/t:0:1/cb:live${i}/plain/local://stereo.wav`, {
          signal: AbortSignal.timeout(LISTENER_BUDGET_MS),
        }),
      ),
    );
    const elapsedMs = Date.now() - started;
    for (const r of listeners) {
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      expect(r.body.length).toBeGreaterThan(0);
    }
    expect(elapsedMs).toBeLessThan(LISTENER_BUDGET_MS);
    expect(await metric(h, 'audio_proxy_render_orphans_preempted_total')).toBe(SLOTS);

    // Nothing of the orphans reached the store: no variant, no staging file left behind.
    const disk = new FileVariantStore({ root });
    await waitFor(async () => (await disk.staging()).length === 0, 10_000);
    for (const key of orphanKeys) {
      expect(await h.proxy.store!.head(key)).toBeUndefined();
      expect(await disk.head(key)).toBeUndefined();
    }
    // And nothing is left running: slots, coordinators, ffmpeg children.
    await waitFor(async () => (await stats(semaphore)).held === 0, 10_000);
    expect((await stats(semaphore)).queued).toBe(0);
    await waitFor(() => h.proxy.renders.live === 0, 10_000);
    for (const pid of await h.spawns()) expect(isAlive(pid)).toBe(false);
    // The listeners' own renders were stored as usual (the store still works).
    for (const r of listeners) {
      const key = String(r.headers.etag).replace(/^W\//, '').replaceAll('"', '');
      await waitFor(async () => (await disk.head(key)) !== undefined, 10_000);
    }
    console.log(`orphans: ${SLOTS} listeners served in ${elapsedMs} ms behind ${SLOTS} orphans`);
  }, 60_000);
});
