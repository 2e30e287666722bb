// Proves, scaled down from the bench (40 slow readers, 4 that never read, a 60-s source, one
// render), that a crowd of slow clients costs the proxy at most one backlog of memory plus
// 64 MiB over idle, that it does not slow the render down (the fast reader coalesced onto the
// crowd's render finishes about as fast as a render with no crowd), and that readers which stall
// forever hold neither a render slot nor the coordinator once the render is done.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RSS_HEADROOM_BYTES, runCrowd } from './slowCrowd.js';

const CLIENTS = 40;
const STALLED = 4;
const SOURCE_SECONDS = 60;
/** The render may be this much slower with the crowd: a loaded 2-core CI box, not a budget. */
const RENDER_SLOWDOWN_FACTOR = 2;
const RENDER_SLOWDOWN_SLACK_MS = 2_000;

const dir = mkdtempSync(join(tmpdir(), 'ap-slow-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('slow clients', () => {
  it(`${CLIENTS} readers at 1/10 bitrate and ${STALLED} stalled ones on one render`, async () => {
    const f = await runCrowd({ clients: CLIENTS, stalled: STALLED, seconds: SOURCE_SECONDS, dir });
    const n = CLIENTS + STALLED + 1;
    expect(f.statuses).toEqual({ 200: n });
    expect(f.cacheStatuses).toEqual({ MISS: 1, COALESCED: n - 1 });
    // a 60 s mp3 at 128 kb/s is close to 1 MB: the backlog is real, not empty
    expect(f.backlogBytes).toBeGreaterThan(900_000);
    // the slow readers really were slow: none got more than a fraction of the variant
    expect(f.slowReceived[1]).toBeLessThan(f.backlogBytes / 2);
    expect(f.peakRss).toBeLessThanOrEqual(f.idleRss + f.backlogBytes + RSS_HEADROOM_BYTES);
    expect(f.stallRss).toBeLessThanOrEqual(f.idleRss + f.backlogBytes + RSS_HEADROOM_BYTES);
    expect(f.crowdRenderMs).toBeLessThanOrEqual(
      f.soloMs * RENDER_SLOWDOWN_FACTOR + RENDER_SLOWDOWN_SLACK_MS,
    );
    expect(f.slotsHeldAfter).toBe(0);
    expect(f.rendersRunningAfter).toBe(0);
    expect(f.exitCode).toBe(0);
  }, 50_000);
});
