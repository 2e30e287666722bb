/**
 * The access log through a real proxy: every public request is one `access` line (401, 404,
 * `/info`, a MISS and then its HIT), with the path but not its query, the status, the bytes on
 * the wire and the cache status; `AP_ACCESS_LOG=0` turns it off.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get, type Harness, startHarness, waitFor } from './harness.js';

interface AccessLine {
  event?: string;
  method?: string;
  path?: string;
  status?: number;
  bytes?: number;
  ms?: number;
  cache?: string;
}

function capturingLogger() {
  const lines: AccessLine[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as AccessLine);
      },
    },
  );
  return { logger, access: () => lines.filter((l) => l.event === 'access') };
}

const RENDER = '/insecure/f:mp3/t:0:1/cb:access/plain/local://stereo.wav';

describe('access log', () => {
  let h: Harness;
  let store: string;
  const log = capturingLogger();

  beforeAll(async () => {
    store = await mkdtemp(join(tmpdir(), 'ap-access-'));
    h = await startHarness(
      { AP_VARIANT_STORE: `file://${store}`, AP_SERVE_MODE: 'proxy' },
      { logger: log.logger },
    );
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await rm(store, { recursive: true, force: true });
  });

  it('writes one line per request, whatever its answer', async () => {
    const seen = () => log.access().length;
    const cases: Array<{ path: string; status: number; cache?: string }> = [
      { path: '/not-a-signature/f:mp3/plain/local://stereo.wav?secret=1', status: 401 },
      { path: '/insecure/f:mp3/plain/local://missing.wav', status: 404 },
      { path: '/insecure/info/plain/local://stereo.wav', status: 200 },
      { path: RENDER, status: 200, cache: 'MISS' },
    ];
    for (const c of cases) {
      const before = seen();
      const res = await get(h.url, c.path);
      expect(res.status).toBe(c.status);
      await waitFor(() => seen() > before, 5_000);
      const line = log.access().at(-1)!;
      expect(line.method).toBe('GET');
      expect(line.status).toBe(c.status);
      expect(line.path).toBe(c.path.replace(/\?.*$/, '?<redacted>'));
      expect(line.bytes).toBeGreaterThan(res.body.byteLength); // the body and its headers
      expect(line.ms).toBeGreaterThanOrEqual(0);
      expect(line.cache).toBe(c.cache);
    }
    // The MISS was stored; the same URL again is a HIT, and says so.
    await waitFor(
      async () => (await get(h.url, RENDER)).headers['x-audio-proxy'] === 'HIT',
      10_000,
    );
    await waitFor(() => log.access().at(-1)?.cache === 'HIT', 5_000);
    expect(log.access().at(-1)).toMatchObject({ path: RENDER, status: 200, cache: 'HIT' });
  });
});

describe('AP_ACCESS_LOG=0', () => {
  it('leaves requests out of the log', async () => {
    const log = capturingLogger();
    const h = await startHarness({ AP_ACCESS_LOG: '0' }, { logger: log.logger });
    try {
      expect((await get(h.url, '/insecure/info/plain/local://stereo.wav')).status).toBe(200);
      expect((await get(h.url, '/nope')).status).toBe(401);
      await new Promise((r) => setTimeout(r, 100));
      expect(log.access()).toEqual([]);
    } finally {
      await h.close();
    }
  }, 60_000);
});
