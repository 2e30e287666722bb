// Proves, over a few thousand generated hostile requests against a real proxy on loopback
// (signatures valid and broken, option strings mixing good and bad, plain/enc sources with
// tricky escapes, long and deep paths, Range/If-None-Match/Origin/preflight headers), that every
// answer is a row of the error table or a success, that no client input earns a 5xx, that the
// canary beside the local root is never served, and that nothing is left running afterwards.
// Also that loadConfig, given random environments, returns a Config or throws a ConfigError.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_TABLE } from '../../src/http/errors.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { closeLeavingNothing, get, type Harness, startHarness } from '../integration/harness.js';
import {
  anyRequestArb,
  type FuzzWorld,
  judge,
  makeFuzzWorld,
  witnessRequests,
} from './fuzzCases.js';
import { configEnvArb, judgeConfig } from './fuzzConfig.js';

/** CI budget: a few thousand requests; the bench runs 100k. */
const HTTP_RUNS = Number(process.env.AP_FUZZ_RUNS ?? 2_000);
const CONFIG_RUNS = 1_000;

let world: FuzzWorld;
let h: Harness;
const statuses = new Map<number, number>();
const errors = new Map<string, number>();
let insideServed = 0;

beforeAll(async () => {
  world = makeFuzzWorld();
  h = await startHarness(world.env);
}, 60_000);

afterAll(async () => {
  await h?.close();
  world?.cleanup();
});

describe('HTTP fuzzing', () => {
  it('the world is as described: fixed requests get their known answers', async () => {
    let inside = 0;
    for (const { req, status } of witnessRequests()) {
      const res = await get(h.url, req.path, { method: req.method, headers: req.headers });
      expect(res.status, `${req.method} ${req.rest}`).toBe(status);
      expect(judge(world, req, res).problems).toEqual([]);
      if (res.body.includes(world.insideMarker)) inside += 1;
    }
    // the render (ID3 title) and both /info bodies (tags) carry the inside file's marker
    expect(inside).toBe(3);
  });

  it(`${HTTP_RUNS} generated requests: table statuses only, no 5xx, canary never served`, async () => {
    await fc.assert(
      fc.asyncProperty(anyRequestArb, async (req) => {
        const res = await get(h.url, req.path, { method: req.method, headers: req.headers });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const verdict = judge(world, req, res);
        if (verdict.error) errors.set(verdict.error, (errors.get(verdict.error) ?? 0) + 1);
        if (res.body.includes(world.insideMarker)) insideServed += 1;
        expect(verdict.problems, `${req.method} ${req.path}`).toEqual([]);
      }),
      { numRuns: HTTP_RUNS },
    );
    // Witnesses: the generators reach past the signature, the options and the source checks,
    // into renders and /info bodies that carry the inside file's tag.
    for (const s of [200, 401, 404, 422]) {
      expect(statuses.get(s) ?? 0, `status ${s} never seen`).toBeGreaterThan(0);
    }
    expect(insideServed).toBeGreaterThan(0);
    expect(errors.get('not_found') ?? 0).toBeGreaterThan(0);
    expect([...errors.keys()].every((e) => ERROR_TABLE.some((r) => r.error === e))).toBe(true);
  }, 55_000);

  it('after the run: still answering, no slot held, every ffmpeg dead', async () => {
    const health = await get(h.url, '/health');
    expect(health.status).toBe(200);
    expect((await stats(h.proxy.actors.semaphore)).queued).toBe(0);
    await closeLeavingNothing(h);
  });
});

describe('config fuzzing', () => {
  let scratch: string;
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), 'ap-fuzz-config-'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it(`${CONFIG_RUNS} random environments: a Config or a ConfigError listing problems`, () => {
    let loaded = 0;
    let refused = 0;
    fc.assert(
      fc.property(
        configEnvArb(() => scratch),
        (env) => {
          const verdict = judgeConfig(env);
          expect(verdict.problems, JSON.stringify(env)).toEqual([]);
          if (verdict.outcome === 'config') loaded += 1;
          else refused += 1;
        },
      ),
      { numRuns: CONFIG_RUNS },
    );
    expect(loaded).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
