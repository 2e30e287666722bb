/**
 * The stages between the 304 and the slot, each on its own loopback exchange with fake services
 * (no proxy, no ffmpeg): source (404 for an unparseable or unauthorised source, the same bytes
 * either way), stat (404 missing, 413 past AP_MAX_SRC_BYTES), HIT (served from the store with
 * `x-audio-proxy: HIT`, or handed on with no store or no variant), HEAD on a MISS (200, no
 * body, nothing probed), the cluster claim (a relayed answer ends the request; a local claim is
 * released when the response closes), the probe gate (the probe's failure, the admission
 * verdict, peaks without a duration) and `/info` (ETag, 304, HEAD without a probe).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ProbeOutcome } from '../../../src/core/request.js';
import type { ResolvedSource } from '../../../src/core/source.js';
import { ANSWERED } from '../../../src/http/exchange.js';
import { claimStage } from '../../../src/http/stages/cluster.js';
import { headStage } from '../../../src/http/stages/head.js';
import { hitStage } from '../../../src/http/stages/hit.js';
import { infoStage } from '../../../src/http/stages/info.js';
import { optionsStage, type ParsedRoute } from '../../../src/http/stages/options.js';
import { probeGateStage } from '../../../src/http/stages/probeGate.js';
import { type AuthorisedSource, sourceStage, statStage } from '../../../src/http/stages/source.js';
import { describeVariant, type RenderRoute } from '../../../src/http/stages/variant.js';
import type { StoredVariant, VariantStore } from '../../../src/store/types.js';
import { contextOf, exchange, NOT_ANSWERED } from './harness.js';

const NOW_S = 1_900_000_000;
const root = mkdtempSync(join(tmpdir(), 'ap-stages-'));
writeFileSync(join(root, 'a.wav'), Buffer.alloc(2_000));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const local = { AP_LOCAL_ROOT: root };
const A: AuthorisedSource = {
  source: { scheme: 'local', path: 'a.wav' },
  canonical: 'local://a.wav',
};

function route(rest: string): RenderRoute {
  const parsed = optionsStage({} as never, rest) as ParsedRoute;
  if (parsed.endpoint !== 'render') throw new Error('not a render route');
  return parsed;
}
const MP3 = route('/f:mp3/plain/local://a.wav');
const variant = describeVariant(MP3, 'local://a.wav', NOW_S);

describe('source stage', () => {
  it('authorises a local source under the root', async () => {
    const r = await exchange((x) => sourceStage(x, contextOf(local), 'plain/local://a.wav'));
    expect(r.status).toBe(NOT_ANSWERED);
    expect(r.result).toEqual(A);
  });

  it('answers the same 404 for an unparseable and an unauthorised source', async () => {
    const bodies = new Set<string>();
    for (const s of ['plain/nope://x', 'plain/local://../etc/passwd', 'plain/https://x.test/a']) {
      const r = await exchange((x) => sourceStage(x, contextOf(local), s));
      expect(r.status, s).toBe(404);
      expect(r.result).toBe(ANSWERED);
      bodies.add(r.body);
    }
    expect(bodies.size).toBe(1);
  });

  it('stat: the resolved source, 404 when missing, 413 past AP_MAX_SRC_BYTES', async () => {
    const ok = await exchange((x) => statStage(x, contextOf(local), A));
    expect(ok.result).toMatchObject({ canonical: 'local://a.wav', size: 2_000 });
    const missing = await exchange((x) =>
      statStage(x, contextOf(local), { ...A, source: { scheme: 'local', path: 'b.wav' } }),
    );
    expect(missing.status).toBe(404);
    const large = await exchange((x) =>
      statStage(x, contextOf({ ...local, AP_MAX_SRC_BYTES: '1000' }), A),
    );
    expect(large.status).toBe(413);
  });
});

function memoryStore(entries: Record<string, Buffer>): VariantStore {
  const meta = (key: string): StoredVariant => ({
    key,
    size: entries[key]!.length,
    contentType: 'audio/mpeg',
    cacheControl: 'public, max-age=31536000, immutable',
  });
  return {
    kind: 'file',
    canPresign: false,
    head: async (key) => (entries[key] ? meta(key) : undefined),
    get: async (key) => (entries[key] ? { type: 'buffer', data: entries[key]! } : undefined),
    put: () => Promise.reject(new Error('read-only')),
    presign: () => Promise.reject(new Error('no presigning')),
    delete: async () => {},
    close: async () => {},
  };
}

describe('HIT stage', () => {
  it('serves a stored variant with x-audio-proxy: HIT', async () => {
    const store = memoryStore({ [variant.key]: Buffer.from('stored bytes') });
    const ctx = contextOf({ AP_SERVE_MODE: 'proxy' }, { store });
    const r = await exchange(async (x) => {
      const out = await hitStage(x, ctx, MP3, variant, NOW_S);
      expect(x.cache).toBe('HIT');
      return out;
    });
    expect(r.status).toBe(200);
    expect(r.result).toBe(ANSWERED);
    expect(r.headers['x-audio-proxy']).toBe('HIT');
    expect(r.body).toBe('stored bytes');
  });

  it('hands on without a store, or when the variant is not stored', async () => {
    for (const ctx of [contextOf(), contextOf({}, { store: memoryStore({}) })]) {
      const r = await exchange((x) => hitStage(x, ctx, MP3, variant, NOW_S));
      expect(r.status).toBe(NOT_ANSWERED);
      expect(r.result).toBeUndefined();
    }
  });
});

describe('HEAD stage', () => {
  it('describes a MISS for a HEAD and hands a GET on', async () => {
    const head = await exchange((x) => headStage(x, variant), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers['x-audio-proxy']).toBe('MISS');
    expect(head.headers.etag).toBe(variant.etag);
    expect(head.body).toBe('');
    const get = await exchange((x) => headStage(x, variant));
    expect(get.status).toBe(NOT_ANSWERED);
  });
});

describe('cluster claim stage', () => {
  it('is null outside cluster mode', async () => {
    const r = await exchange((x) => claimStage(x, contextOf(), variant.key));
    expect(r.result).toBeNull();
  });

  it('ends the request when a peer answered, and releases a local claim at close', async () => {
    const relayed = contextOf(
      {},
      {
        cluster: {
          beforeRender: async (_req, res) => {
            res.writeHead(200, { 'x-relayed': '1' });
            res.end('from a peer');
            return { type: 'relayed' };
          },
          handOff: () => Promise.reject(new Error('unused')),
        },
      },
    );
    const r = await exchange((x) => claimStage(x, relayed, variant.key));
    expect(r.result).toBe(ANSWERED);
    expect(r.body).toBe('from a peer');

    let released = 0;
    const claimed = contextOf(
      {},
      {
        cluster: {
          beforeRender: async () => ({ type: 'local', reservation: 'r1', done: () => released++ }),
          handOff: () => Promise.reject(new Error('unused')),
        },
      },
    );
    const l = await exchange((x) => claimStage(x, claimed, variant.key));
    expect(l.result).toMatchObject({ type: 'local', reservation: 'r1' });
    await expect.poll(() => released).toBe(1);
  });
});

describe('probe gate stage', () => {
  const resolved: ResolvedSource = {
    ...A,
    input: { url: join(root, 'a.wav'), kind: 'local' },
    size: 2_000_000,
  };
  const probing = (outcome: ProbeOutcome) => contextOf({}, { probe: async () => outcome });
  const stereo = { sampleRate: 44_100, channels: 2, duration: 3 };

  it('hands on what the probe found', async () => {
    const found: ProbeOutcome = { ok: true, info: { duration: 3 }, media: stereo };
    const r = await exchange((x) => probeGateStage(x, probing(found), resolved, MP3.options));
    expect(r.result).toEqual(found);
  });

  it("answers the probe's failure, the admission verdict, and peaks without a duration", async () => {
    const cases: [ProbeOutcome, RenderRoute, number][] = [
      [{ ok: false, failure: { type: 'probe_timeout' } }, MP3, 504],
      [{ ok: true, info: {}, media: { ...stereo, channels: 65 } }, MP3, 415],
      [{ ok: true, info: {}, media: { ...stereo, duration: 1e9 } }, MP3, 415],
      [
        { ok: true, info: {}, media: { sampleRate: 44_100, channels: 2 } },
        route('/f:peaks/plain/local://a.wav'),
        415,
      ],
    ];
    for (const [outcome, r, status] of cases) {
      const a = await exchange((x) => probeGateStage(x, probing(outcome), resolved, r.options));
      expect(a.status, JSON.stringify(outcome)).toBe(status);
      expect(a.result).toBe(ANSWERED);
    }
    const long = await exchange((x) =>
      probeGateStage(
        x,
        contextOf(
          { AP_MAX_DURATION_S: '2' },
          { probe: async () => ({ ok: true, info: {}, media: stereo }) },
        ),
        resolved,
        MP3.options,
      ),
    );
    expect(long.status).toBe(413);
    expect(JSON.parse(long.body).error).toBe('source_too_long');
  });
});

describe('/info stage', () => {
  const ctx = contextOf(local, {
    probe: async () => ({ ok: true, info: { duration: 3, size: 1 }, media: {} }),
  });

  it('answers the probe with the stat size and an ETag; a matching ETag is 304', async () => {
    const r = await exchange((x) => infoStage(x, ctx, A));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ duration: 3, size: 2_000 });
    expect(r.headers['cache-control']).toBe('public, max-age=3600');
    const etag = r.headers.etag as string;
    expect(etag).toBeTruthy();
    const again = await exchange((x) => infoStage(x, ctx, A), {
      headers: { 'if-none-match': etag },
    });
    expect(again.status).toBe(304);
  });

  it('answers a HEAD without probing, and 404 for a missing source', async () => {
    const noProbe = contextOf(local);
    const head = await exchange((x) => infoStage(x, noProbe, A), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    const missing = await exchange((x) =>
      infoStage(x, noProbe, { ...A, source: { scheme: 'local', path: 'b.wav' } }),
    );
    expect(missing.status).toBe(404);
  });
});
