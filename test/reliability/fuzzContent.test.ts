// Proves, over a couple of hundred generated hostile files (lying WAV/FLAC/MP3/Ogg headers,
// truncated and bit-flipped real files, HLS playlists, DASH manifests, ffconcat and SDP files
// pointing out of the root and off the allowlist, text, images, random bytes) served as
// `local://` files and as `https://` sources (a loopback server with its own CA, sometimes lying
// in HEAD or redirecting its GET), against a real proxy with real ffprobe and ffmpeg, one
// invariant per test: every answer is a row of the error table and hostile content never earns a
// 500; neither canary file beside the root is ever read nor served; neither canary host off the
// allowlist is ever contacted, nor the allowed one asked for anything but the named file; no
// body grows past the amplification bound; afterwards no slot, queue place, coordinator, child
// or staging file is left and the heap is back near its baseline.
//
// Seeded: every failure names the seed and the case; `AP_FUZZ_SEED=<seed>` replays the run,
// `AP_FUZZ_CONTENT_RUNS` sizes it (the bench runs thousands: `bench/fuzz.ts --content N`).
// Cases run one at a time, so a canary read is attributed to the case that made it.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import { type Harness, startHarness, waitFor } from '../integration/harness.js';
import {
  CASE_TIMEOUT_MS,
  type ContentWorld,
  contentCaseArb,
  describeCase,
  fetchCapped,
  fullGc,
  HEAP_SLACK_BYTES,
  judgeContent,
  liveMediaChildren,
  makeContentWorld,
} from './fuzzContent.js';

/** CI budget: well under a minute on two shared cores; the bench runs thousands. */
const RUNS = Number(process.env.AP_FUZZ_CONTENT_RUNS ?? 120);
const SEED = Number(process.env.AP_FUZZ_SEED ?? Date.now() % 2 ** 31);
/** Examples printed per failing invariant. */
const SHOWN = 5;
/** How long a case's ffmpeg/ffprobe may outlive its answer before the canaries are read. */
const CHILD_SETTLE_MS = 5_000;

type Kind = 'table' | 'status500' | 'amplification' | 'canaryFile' | 'canaryHost' | 'stray';

let world: ContentWorld;
let h: Harness;
let heapBefore = 0;
const statuses = new Map<number, number>();
const families = new Set<string>();
const seen = new Map<Kind, string[]>();

function record(kind: Kind, what: string) {
  const list = seen.get(kind) ?? [];
  list.push(what);
  seen.set(kind, list);
}

/** Passes when no case broke `kind`; else names the seed and the first few cases. */
function expectNone(kind: Kind) {
  const list = seen.get(kind) ?? [];
  const shown = list.slice(0, SHOWN).join('\n  ');
  expect(list.length, `${list.length} of ${RUNS} cases (AP_FUZZ_SEED=${SEED}):\n  ${shown}`).toBe(
    0,
  );
}

beforeAll(async () => {
  world = await makeContentWorld();
  h = await startHarness({ ...world.env, AP_MAX_CONCURRENCY: '2' });
  await fullGc();
  heapBefore = process.memoryUsage().heapUsed;
}, 60_000);

afterAll(async () => {
  await h?.close();
  await world?.close();
});

describe('content fuzzing', () => {
  it('the detectors work: a canary read and a canary request are both seen', async () => {
    expect(await world.selfTest()).toEqual({ atime: true, hosts: true });
  });

  it(`runs ${RUNS} generated hostile files through local and https sources`, async () => {
    const cases = fc.sample(contentCaseArb, { numRuns: RUNS, seed: SEED });
    for (const [i, c] of cases.entries()) {
      const placed = world.place(c, `c${i}`);
      const hits = world.canaryHits();
      const stray = world.strayHits();
      const res = await fetchCapped(h.url, placed.method, placed.path, CASE_TIMEOUT_MS);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      families.add(c.family);
      const label = `#${i} ${describeCase(c)} → ${res.status}`;
      for (const p of judgeContent(world, c, placed, res).problems) {
        if (p.startsWith('hostile content earned')) record('status500', `${label}: ${p}`);
        else if (p.startsWith('amplification')) record('amplification', `${label}: ${p}`);
        else record('table', `${label}: ${p}`);
      }
      // A refused case's child may still be winding down: let it end before reading the canaries.
      await waitFor(() => liveMediaChildren() === 0, CHILD_SETTLE_MS).catch(() => undefined);
      if (world.canaryRead()) record('canaryFile', label);
      if (world.canaryHits() !== hits) record('canaryHost', label);
      if (world.strayHits() !== stray) record('stray', label);
    }
    // Witnesses: the generators reach every family and the verdicts that matter.
    expect(families.size).toBe(13);
    expect(statuses.get(415) ?? 0, 'no 415 seen').toBeGreaterThan(0);
    expect(statuses.get(200) ?? 0, 'no 200 seen').toBeGreaterThan(0);
  }, 150_000);

  it('every answer is a row of the error table, with its body and Cache-Control', () => {
    expectNone('table');
  });

  // Needs the input slice (probe verdicts): non-audio is 415 `undecodable_source`, never 500.
  it('hostile content never earns a 500', () => {
    expectNone('status500');
  });

  // Needs the input slice (ffmpeg reads only what the proxy hands it): no playlist, manifest or
  // concat demuxer, no protocol but the proxy's own.
  it('no file outside the root is read (the canary files keep their access time)', () => {
    expectNone('canaryFile');
  });

  it('no host off the allowlist is contacted (the canary servers count every request)', () => {
    expectNone('canaryHost');
  });

  it('the allowed host is asked for the named file only (no playlist followed, no redirect)', () => {
    expectNone('stray');
  });

  // Needs the input slice's output cap (AP_MAX_DURATION_S): a 1 KB file claiming 1 Hz.
  it(`no body past the amplification bound`, () => {
    expectNone('amplification');
  });

  it('afterwards: no slot, queue place, coordinator, child or staging file; heap near baseline', async () => {
    let last = { held: -1, queued: -1, live: -1 };
    await waitFor(async () => {
      const s = await stats(h.proxy.actors.semaphore);
      last = { held: s.held, queued: s.queued, live: h.proxy.renders.live };
      return s.held === 0 && s.queued === 0 && h.proxy.renders.live === 0;
    }, 15_000).catch(() => undefined);
    expect({ ...last, children: liveMediaChildren(), staging: world.staging() }).toEqual({
      held: 0,
      queued: 0,
      live: 0,
      children: 0,
      staging: 0,
    });
    await fullGc();
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(HEAP_SLACK_BYTES);
  }, 30_000);
});
