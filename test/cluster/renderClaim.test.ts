/**
 * Render claims against a real redis-server: the first node to ask owns a key and the others are
 * told who; local requests share one claim by reference; only the owner renews or deletes, so a
 * peer's claim is never touched; and Redis unreachable, slow or holding garbage means `alone`,
 * never an exception. Renewals are driven with faked intervals (Redis keeps its own clock), so
 * nothing here waits on a lease.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { connectClusterRedis } from '../../src/cluster/redis.js';
import {
  CLAIM_KEY_PREFIX,
  parseClaimValue,
  RENEWALS_PER_LEASE,
  RenderClaims,
} from '../../src/cluster/renderClaim.js';
import { type RedisServer, startRedisServer } from './redisServer.js';

const LEASE_MS = 60_000;
const DEADLINE_MS = 1_000;

let server: RedisServer;
let admin: Redis;
const clients: Redis[] = [];
const claimSets: RenderClaims[] = [];

function claims(nodeId: string, opts: { deadlineMs?: number; url?: string } = {}) {
  const redis = connectClusterRedis(opts.url ?? server.url, `test-${nodeId}`);
  clients.push(redis);
  const ups: boolean[] = [];
  const c = new RenderClaims({
    redis,
    nodeId,
    advertiseUrl: `http://${nodeId}.test:4000`,
    leaseMs: LEASE_MS,
    deadlineMs: opts.deadlineMs ?? DEADLINE_MS,
    onRedis: (ok) => ups.push(ok),
  });
  claimSets.push(c);
  return Object.assign(c, { ups });
}

async function ready(c: Redis) {
  if (c.status !== 'ready') await new Promise((r) => c.once('ready', r));
}

const value = (key: string) => admin.get(CLAIM_KEY_PREFIX + key);

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
});

afterAll(async () => {
  admin.disconnect();
  await server.kill();
});

beforeEach(async () => {
  await admin.flushall();
});

afterEach(async () => {
  vi.useRealTimers();
  for (const c of claimSets.splice(0)) c.abandon();
  for (const c of clients.splice(0)) c.disconnect();
});

describe('RenderClaims', () => {
  it('the first node owns a key; another is told the owner; the last release deletes it', async () => {
    const a = claims('node-a');
    const b = claims('node-b');
    await Promise.all([ready(clients[0]!), ready(clients[1]!)]);
    const mine = await a.acquire('k1');
    expect(mine.type).toBe('owned');
    expect(await value('k1')).toBe('node-a|http://node-a.test:4000');
    const ttl = await admin.pttl(CLAIM_KEY_PREFIX + 'k1');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(LEASE_MS);
    expect(await b.acquire('k1')).toEqual({
      type: 'owner',
      nodeId: 'node-a',
      url: 'http://node-a.test:4000',
    });
    expect(a.held).toBe(1);
    expect(b.held).toBe(0);
    if (mine.type === 'owned') mine.handle.release();
    await vi.waitFor(async () => expect(await value('k1')).toBeNull());
    expect(a.held).toBe(0);
    // Released, the key is anyone's again.
    expect((await b.acquire('k1')).type).toBe('owned');
  });

  it('local requests share one claim: concurrent acquires ask once, the last release deletes', async () => {
    const a = claims('node-a');
    await ready(clients[0]!);
    const handles = await Promise.all(Array.from({ length: 5 }, () => a.acquire('k2')));
    expect(handles.map((h) => h.type)).toEqual(Array(5).fill('owned'));
    expect(a.held).toBe(1);
    for (const h of handles.slice(0, 4)) if (h.type === 'owned') h.handle.release();
    // Releasing twice is one release.
    if (handles[0]!.type === 'owned') handles[0]!.handle.release();
    expect(await value('k2')).not.toBeNull();
    const last = handles[4]!;
    if (last.type === 'owned') last.handle.release();
    await vi.waitFor(async () => expect(await value('k2')).toBeNull());
  });

  it('a release never deletes a claim that lapsed and was taken by a peer', async () => {
    const a = claims('node-a');
    const b = claims('node-b');
    await Promise.all([ready(clients[0]!), ready(clients[1]!)]);
    const mine = await a.acquire('k3');
    await admin.del(CLAIM_KEY_PREFIX + 'k3'); // our lease lapsed
    expect((await b.acquire('k3')).type).toBe('owned');
    if (mine.type === 'owned') mine.handle.release();
    // The compare-and-delete ran and found node-b's value.
    await vi.waitFor(() => expect(a.ups.length).toBeGreaterThanOrEqual(2));
    expect(await value('k3')).toBe('node-b|http://node-b.test:4000');
  });

  it('renews its own claim every third of the lease, and stops at a foreign value', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const a = claims('node-a');
    await ready(clients[0]!);
    expect((await a.acquire('k4')).type).toBe('owned');
    await admin.pexpire(CLAIM_KEY_PREFIX + 'k4', 5_000); // pretend most of the lease went by
    vi.advanceTimersByTime(LEASE_MS / RENEWALS_PER_LEASE);
    await vi.waitFor(async () =>
      expect(await admin.pttl(CLAIM_KEY_PREFIX + 'k4')).toBeGreaterThan(5_000),
    );
    // A peer's value now (our claim lapsed and was taken): renewal leaves it alone, and stops.
    await admin.set(CLAIM_KEY_PREFIX + 'k4', 'node-b|http://node-b.test:4000', 'PX', 5_000);
    const before = a.ups.length;
    vi.advanceTimersByTime(LEASE_MS / RENEWALS_PER_LEASE);
    await vi.waitFor(() => expect(a.ups.length).toBeGreaterThan(before));
    expect(await admin.pttl(CLAIM_KEY_PREFIX + 'k4')).toBeLessThanOrEqual(5_000);
    expect(await value('k4')).toBe('node-b|http://node-b.test:4000');
    expect(a.held).toBe(0);
  });

  it('finds its own claim (a failed release) and takes it back instead of forwarding to itself', async () => {
    const a = claims('node-a');
    await ready(clients[0]!);
    await admin.set(CLAIM_KEY_PREFIX + 'k5', 'node-a|http://node-a.test:4000', 'PX', 1_000);
    expect((await a.acquire('k5')).type).toBe('owned');
    expect(await admin.pttl(CLAIM_KEY_PREFIX + 'k5')).toBeGreaterThan(1_000);
  });

  it('a value it did not write is `alone`, not an owner to forward to', async () => {
    const a = claims('node-a');
    await ready(clients[0]!);
    await admin.set(CLAIM_KEY_PREFIX + 'k6', 'garbage');
    expect(await a.acquire('k6')).toEqual({ type: 'alone', reason: 'malformed' });
    expect(await value('k6')).toBe('garbage');
  });

  it('an abandoned claim (a crash) stays in Redis only until its lease lapses', async () => {
    const a = claims('node-a');
    await ready(clients[0]!);
    expect((await a.acquire('k7')).type).toBe('owned');
    a.abandon();
    const ttl = await admin.pttl(CLAIM_KEY_PREFIX + 'k7');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(LEASE_MS);
    expect(a.held).toBe(0);
  });

  it('Redis unreachable: `alone` at once, reported, never thrown', async () => {
    const a = claims('node-x', { url: 'redis://127.0.0.1:1' });
    const started = Date.now();
    expect(await a.acquire('k8')).toEqual({ type: 'alone', reason: 'unreachable' });
    expect(Date.now() - started).toBeLessThan(DEADLINE_MS + 500);
    expect(a.ups).toEqual([false]);
  });

  it('Redis slow (blocked past the deadline): `alone` within the deadline', async () => {
    const a = claims('node-a', { deadlineMs: 100 });
    await ready(clients[0]!);
    await admin.call('CLIENT', 'PAUSE', '600', 'ALL'); // every command waits 600 ms
    const started = Date.now();
    const outcome = await a.acquire('k9');
    const took = Date.now() - started;
    expect(outcome).toEqual({ type: 'alone', reason: 'unreachable' });
    expect(took).toBeLessThan(600);
  });

  it('checks its arguments at the boundary', () => {
    const redis = new Redis({ lazyConnect: true });
    const base = { redis, advertiseUrl: 'http://a:1', leaseMs: 1_000, deadlineMs: 100 };
    expect(() => new RenderClaims({ ...base, nodeId: 'a|b' })).toThrow(TypeError);
    expect(() => new RenderClaims({ ...base, nodeId: '' })).toThrow(TypeError);
    expect(() => new RenderClaims({ ...base, nodeId: 'a', leaseMs: 0 })).toThrow(RangeError);
  });
});

describe('parseClaimValue', () => {
  it.each([
    ['node-a|http://10.0.0.1:4000', { nodeId: 'node-a', url: 'http://10.0.0.1:4000' }],
    ['n:4000|https://[::1]:8443', { nodeId: 'n:4000', url: 'https://[::1]:8443' }],
    ['|http://x', null],
    ['node-a|', null],
    ['node-a', null],
    ['node-a|http://x/path', null],
    ['node-a|ftp://x', null],
  ])('%s', (raw, parsed) => {
    expect(parseClaimValue(raw)).toEqual(parsed);
  });
});
