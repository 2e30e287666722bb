// The registry's rules against a real redis-server: rotation in id order with one cursor step
// per selection, node affinity, exclusion, capacity and unknown capacity, draining, refusals
// that leave Redis byte-for-byte unchanged, reservations that lapse unless committed, commit
// as a 1 → 1 hand-over, hand-off by adoption, wake-up of a waiting selection on release, and
// malformed records reported with the worker named. Leases run on a hand-driven clock.
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  CapacityRegistryClient,
  createCapacityRegistry,
  MAX_WAIT_SLICE_MS,
} from '../../src/cluster/capacityRegistry.js';
import { createMembership } from '../../src/cluster/membership.js';
import { SlotReservation } from '../../src/cluster/reservation.js';
import {
  type CapacityRegistry,
  type Membership,
  RegistryError,
  type Reservation,
} from '../../src/cluster/types.js';
import { dump, eventually, freshPrefix, keysUnder, ManualClock, rawClient } from './helpers.js';
import { type RedisServer, startRedisServer } from './redisServer.js';

let server: RedisServer;
let raw: Redis;
const open: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  raw = rawClient(server.url);
}, 30_000);

afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.stop()));
});

afterAll(async () => {
  raw?.disconnect();
  await server?.stop();
});

interface World {
  readonly prefix: string;
  readonly clock: ManualClock;
  registry(opts?: { self?: string; errors?: RegistryError[] }): CapacityRegistry;
  join(
    id: string,
    capacity: number | null,
    opts?: { label?: string; pools?: string[] },
  ): Promise<Membership>;
}

function world(): World {
  const prefix = freshPrefix();
  const clock = new ManualClock();
  return {
    prefix,
    clock,
    registry(opts = {}) {
      const registry = createCapacityRegistry({
        url: server.url,
        prefix,
        clock: clock.now,
        self: opts.self,
        reservationLeaseMs: 5_000,
        holdLeaseMs: 600_000,
        onError: (error) => opts.errors?.push(error),
      });
      open.push({ stop: () => registry.close() });
      return registry;
    },
    async join(id, capacity, opts = {}) {
      const member = createMembership({
        url: server.url,
        prefix,
        clock: clock.now,
        leaseMs: 3_600_000,
        node: { id, url: `http://${id}.test`, capacity, label: opts.label ?? null },
        pools: opts.pools,
      });
      open.push(member);
      await member.start();
      return member;
    },
  };
}

/** One node `a` with one slot and a registry on the real clock with the given short leases. */
async function realClockSlot(leases: {
  holdLeaseMs?: number;
  reservationLeaseMs?: number;
}): Promise<CapacityRegistry> {
  const prefix = freshPrefix();
  const member = createMembership({
    url: server.url,
    prefix,
    node: { id: 'a', url: 'http://a.test', capacity: 1 },
  });
  open.push(member);
  await member.start();
  const registry = createCapacityRegistry({ url: server.url, prefix, ...leases });
  open.push({ stop: () => registry.close() });
  return registry;
}

const workerOf = (r: Reservation | null) => r?.worker.id ?? null;

async function heldOn(registry: CapacityRegistry, id: string): Promise<number | undefined> {
  return (await registry.nodes()).find((n) => n.id === id)?.held;
}

describe('selection', () => {
  it('rotates through eligible workers in id order, one cursor step per selection', async () => {
    const w = world();
    for (const id of ['c', 'a', 'b']) await w.join(id, 5);
    const registry = w.registry();
    const picks: (string | null)[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await registry.selectAndReserve('render');
      picks.push(workerOf(r));
      await r?.release();
    }
    expect(picks).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a']);
    expect(await raw.get(`${w.prefix}cursor:render`)).toBe('7');
  });

  it('skips a full worker without skipping its turn for the others', async () => {
    const w = world();
    await w.join('a', 1);
    await w.join('b', 3);
    const registry = w.registry();
    const first = await registry.selectAndReserve('render'); // a (cursor 0 of [a, b])
    const next = [];
    for (let i = 0; i < 3; i++) next.push(workerOf(await registry.selectAndReserve('render')));
    expect(workerOf(first)).toBe('a');
    expect(next).toEqual(['b', 'b', 'b']);
    expect(await registry.selectAndReserve('render')).toBeNull();
    expect(await heldOn(registry, 'a')).toBe(1);
    expect(await heldOn(registry, 'b')).toBe(3);
  });

  it('honours node affinity by label, and exclusion by id', async () => {
    const w = world();
    await w.join('a', 5, { label: 'eu' });
    await w.join('b', 5, { label: 'us' });
    await w.join('c', 5, { label: 'eu' });
    const registry = w.registry();
    const eu: (string | null)[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await registry.selectAndReserve('render', { node: 'eu' });
      eu.push(workerOf(r));
      await r?.release();
    }
    expect(eu).toEqual(['a', 'c', 'a', 'c']);
    expect(await registry.selectAndReserve('render', { node: 'asia' })).toBeNull();
    const notA = await registry.selectAndReserve('render', { exclude: ['a', 'c'] });
    expect(workerOf(notA)).toBe('b');
    expect(notA?.worker).toEqual({
      id: 'b',
      url: 'http://b.test',
      capacity: 5,
      label: 'us',
      draining: false,
    });
  });

  it('least_loaded picks the worker with the most free slots, ties in rotation order', async () => {
    const w = world();
    await w.join('a', 4);
    await w.join('b', 4);
    const registry = w.registry();
    await registry.reserve('a');
    const r = await registry.selectAndReserve('render', { order: 'least_loaded' });
    expect(workerOf(r)).toBe('b');
    const tie = await registry.selectAndReserve('render', { order: 'least_loaded' });
    // a and b both have 3 free; the cursor is now 1, so the rotation starts at b.
    expect(workerOf(tie)).toBe('b');
  });

  it('only selects nodes of the pool asked for', async () => {
    const w = world();
    await w.join('a', 2, { pools: ['render'] });
    await w.join('b', 2, { pools: ['peaks'] });
    const registry = w.registry();
    expect(workerOf(await registry.selectAndReserve('peaks'))).toBe('b');
    expect(workerOf(await registry.selectAndReserve('render'))).toBe('a');
  });
});

describe('the race the registry exists to close', () => {
  it('a fan of simultaneous selections from several clients never overfills a worker', async () => {
    const w = world();
    await w.join('a', 3);
    await w.join('b', 3);
    const clients = [w.registry(), w.registry(), w.registry()];
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => clients[i % 3]!.selectAndReserve('render')),
    );
    const granted = answers.filter((r) => r !== null);
    expect(granted).toHaveLength(6);
    expect(granted.filter((r) => r.worker.id === 'a')).toHaveLength(3);
    expect(await heldOn(clients[0]!, 'a')).toBe(3);
    expect(await heldOn(clients[0]!, 'b')).toBe(3);
  });
});

describe('refusals record nothing', () => {
  it('an empty pool mints no cursor and writes no key', async () => {
    const w = world();
    const registry = w.registry();
    expect(await registry.selectAndReserve('render')).toBeNull();
    expect(await registry.reserve('nobody')).toBeNull();
    expect(await keysUnder(raw, w.prefix)).toEqual([]);
    expect(registry.stats().refusals).toBe(2);
  });

  it('a full, draining or unknown-capacity pool is left exactly as it was', async () => {
    const w = world();
    await w.join('a', 1);
    await (await w.join('b', 3)).setDraining(true);
    await w.join('c', null);
    const registry = w.registry();
    await registry.selectAndReserve('render'); // fills a
    const before = await dump(raw, w.prefix);
    expect(await registry.selectAndReserve('render')).toBeNull();
    for (const id of ['a', 'b', 'c', 'zz']) expect(await registry.reserve(id)).toBeNull();
    expect(await dump(raw, w.prefix)).toEqual(before);
  });
});

describe('eligibility', () => {
  it('unknown capacity is never a free slot, until announced', async () => {
    const w = world();
    const member = await w.join('a', null);
    const registry = w.registry();
    expect(await registry.selectAndReserve('render')).toBeNull();
    expect(await registry.reserve('a')).toBeNull();
    expect((await registry.nodes())[0]).toMatchObject({ id: 'a', capacity: null, held: 0 });
    await member.setCapacity(1);
    expect(workerOf(await registry.reserve('a'))).toBe('a');
    await member.setCapacity(0);
    expect(await registry.selectAndReserve('render')).toBeNull();
  });

  it('a draining node is not chosen, and is again once it stops draining', async () => {
    const w = world();
    const a = await w.join('a', 2);
    await w.join('b', 2);
    const registry = w.registry();
    await a.setDraining(true);
    const picks = [];
    for (let i = 0; i < 3; i++) {
      const r = await registry.selectAndReserve('render');
      picks.push(workerOf(r));
      await r?.release();
    }
    expect(picks).toEqual(['b', 'b', 'b']);
    expect(await registry.reserve('a')).toBeNull();
    await a.setDraining(false);
    expect(workerOf(await registry.reserve('a'))).toBe('a');
  });

  it('a node that stops renewing its lease disappears; one that stops leaves at once', async () => {
    const w = world();
    await w.join('a', 2);
    const b = await w.join('b', 2);
    const registry = w.registry();
    await b.stop();
    expect((await registry.nodes()).map((n) => n.id)).toEqual(['a']);
    w.clock.advance(3_600_001); // a's lease lapses: no heartbeat ran on the hand-driven clock
    expect(await registry.nodes()).toEqual([]);
    expect(await registry.selectAndReserve('render')).toBeNull();
    expect(await registry.reserve('a')).toBeNull();
  });
});

describe('reservations', () => {
  it('an uncommitted reservation lapses after its lease; commit then reports it lost', async () => {
    const w = world();
    await w.join('a', 1);
    const registry = w.registry();
    const r = await registry.selectAndReserve('render');
    expect(await registry.selectAndReserve('render')).toBeNull();
    w.clock.advance(5_001);
    expect(await heldOn(registry, 'a')).toBe(0);
    const other = await registry.selectAndReserve('render');
    expect(workerOf(other)).toBe('a');
    const error = await r!.commit().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RegistryError);
    expect(error).toMatchObject({ code: 'ERR_RESERVATION_LOST', worker: 'a' });
    expect(r!.status).toBe('lost');
    expect(await heldOn(registry, 'a')).toBe(1); // only `other`
    expect(registry.stats()).toMatchObject({ reserved: 1, lost: 1 });
  });

  it('commit hands the slot over 1 → 1 and outlives the reservation lease', async () => {
    const w = world();
    await w.join('a', 1);
    const registry = w.registry();
    const r = (await registry.reserve('a'))!;
    expect(await heldOn(registry, 'a')).toBe(1);
    await r.commit();
    expect(await heldOn(registry, 'a')).toBe(1);
    await r.commit(); // idempotent
    expect(registry.stats()).toMatchObject({ reserved: 0, committed: 1 });
    w.clock.advance(60_000);
    expect(await registry.reserve('a')).toBeNull();
    await r.release();
    expect(r.status).toBe('released');
    expect(await heldOn(registry, 'a')).toBe(0);
    await r.release(); // idempotent
    expect(registry.stats()).toMatchObject({ reserved: 0, committed: 0 });
  });

  it("a crashed holder's committed slot lapses within the hold lease", async () => {
    const w = world();
    await w.join('a', 1);
    const holder = w.registry();
    await (await holder.reserve('a'))!.commit();
    await holder.close(); // stops renewing, as a crash would
    const other = w.registry();
    w.clock.advance(599_000);
    expect(await other.reserve('a')).toBeNull();
    w.clock.advance(1_001);
    expect(workerOf(await other.reserve('a'))).toBe('a');
  });

  it('committed holds are renewed in the background (real clock, short lease)', async () => {
    const registry = await realClockSlot({ holdLeaseMs: 300 });
    const r = (await registry.reserve('a'))!;
    await r.commit();
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // three leases
    expect(await heldOn(registry, 'a')).toBe(1);
    await r.release();
    expect(await heldOn(registry, 'a')).toBe(0);
  });

  it('a peer adopts a forwarded reservation (fresh lease); the forwarder can no longer free it', async () => {
    const w = world();
    await w.join('a', 2);
    await w.join('b', 1);
    const forwarder = w.registry({ self: 'a' });
    const peer = w.registry({ self: 'b' });
    const r = (await forwarder.selectAndReserve('render', { exclude: ['a'] }))!;
    expect(r.worker.id).toBe('b');
    expect(await w.registry({ self: 'a' }).adopt(r.id)).toBeNull(); // not made for a
    w.clock.advance(4_000); // most of the 5 s reservation lease spent forwarding
    const adopted = (await peer.adopt(r.id))!;
    expect(adopted).toMatchObject({ id: r.id, status: 'reserved', worker: { id: 'b' } });
    expect(await peer.adopt(r.id)).toBeNull(); // once only
    await r.release(); // the forwarder's `finally`
    expect(r.status).toBe('handed_off');
    expect(await heldOn(peer, 'b')).toBe(1);
    w.clock.advance(4_000); // adoption gave the peer a fresh lease
    await adopted.commit();
    expect(await heldOn(peer, 'b')).toBe(1);
    await adopted.release();
    expect(await heldOn(peer, 'b')).toBe(0);
    expect(forwarder.stats()).toMatchObject({ reserved: 0, committed: 0 });
    expect(peer.stats()).toMatchObject({ reserved: 0, committed: 0 });
  });

  it('a commit by the forwarder after the hand-off is refused as foreign', async () => {
    const w = world();
    await w.join('b', 1);
    const forwarder = w.registry();
    const r = (await forwarder.reserve('b'))!;
    await w.registry({ self: 'b' }).adopt(r.id);
    await expect(r.commit()).rejects.toMatchObject({ code: 'ERR_RESERVATION_FOREIGN' });
    expect(await heldOn(forwarder, 'b')).toBe(1);
  });
});

describe('waiting for a slot', () => {
  it('a release wakes a waiting selection at once (pub/sub, not the slice)', async () => {
    const w = world();
    await w.join('a', 1);
    const holder = w.registry();
    const waiter = w.registry();
    const held = (await holder.reserve('a'))!;
    const started = performance.now();
    const waiting = waiter.selectAndReserve('render', { waitMs: 10_000 });
    setTimeout(() => void held.release(), 100);
    const got = await waiting;
    expect(workerOf(got)).toBe('a');
    // The lease is 5 s on the hand-driven clock, so only the wake message can explain this.
    expect(performance.now() - started).toBeLessThan(MAX_WAIT_SLICE_MS - 100);
    expect(waiter.stats().refusals).toBe(1);
  });

  it('one release wakes every waiter but only one of them gets the slot', async () => {
    const w = world();
    await w.join('a', 1);
    const holder = w.registry();
    let held = (await holder.reserve('a'))!;
    const waiters = [w.registry(), w.registry(), w.registry()];
    const got: Reservation[] = [];
    const waiting = waiters.map((r) =>
      r.selectAndReserve('render', { waitMs: 20_000 }).then((x) => {
        if (x) got.push(x);
        return x;
      }),
    );
    for (let round = 1; round <= 3; round++) {
      await held.release();
      await eventually(() => got.length === round);
      expect(await heldOn(holder, 'a')).toBe(1);
      held = got[round - 1]!;
    }
    expect((await Promise.all(waiting)).every((x) => x !== null)).toBe(true);
    await held.release();
  });

  it('a waiter gives up after waitMs with null, and at once when aborted', async () => {
    const w = world();
    await w.join('a', 1);
    const registry = w.registry();
    await registry.reserve('a');
    expect(await registry.selectAndReserve('render', { waitMs: 50 })).toBeNull();
    const abort = new AbortController();
    const waiting = registry.selectAndReserve('render', { waitMs: 60_000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    const started = performance.now();
    expect(await waiting).toBeNull();
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('a waiter also wakes when a held slot lapses (real clock, short lease)', async () => {
    const registry = await realClockSlot({ reservationLeaseMs: 200 });
    await registry.reserve('a'); // never released: lapses after 200 ms
    const got = await registry.selectAndReserve('render', { waitMs: 10_000 });
    expect(workerOf(got)).toBe('a');
    expect(registry.stats().refusals).toBeLessThanOrEqual(3);
  });
});

describe('malformed records', () => {
  it('are skipped by selection and reported with the worker named', async () => {
    const w = world();
    await w.join('a', 2);
    await w.join('b', 2);
    await raw.hset(`${w.prefix}node:a`, 'capacity', 'lots');
    const errors: RegistryError[] = [];
    const registry = w.registry({ errors });
    expect(workerOf(await registry.selectAndReserve('render'))).toBe('b');
    expect(errors.map((e) => [e.code, e.worker])).toEqual([['ERR_REGISTRY_MALFORMED', 'a']]);
    const thrown = await registry.reserve('a').catch((e: unknown) => e);
    expect(thrown).toMatchObject({ code: 'ERR_REGISTRY_MALFORMED', worker: 'a' });
    expect(registry.stats().lastError).toEqual({ code: 'ERR_REGISTRY_MALFORMED', worker: 'a' });
    expect(registry.stats().state).toBe('ready'); // an answered error is not an outage
  });

  it('a record of the wrong type is a script error naming the worker', async () => {
    const w = world();
    await w.join('a', 2);
    await raw.set(`${w.prefix}held:a`, 'not a zset');
    const registry = w.registry();
    const thrown = await registry.reserve('a').catch((e: unknown) => e);
    expect(thrown).toMatchObject({ code: 'ERR_REGISTRY_SCRIPT', worker: 'a' });
    expect((thrown as Error).message).toContain('worker a');
  });
});

describe('programmer mistakes throw at the boundary', () => {
  it('rejects bad arguments with TypeError/RangeError', async () => {
    const registry = world().registry();
    await expect(registry.selectAndReserve('')).rejects.toBeInstanceOf(TypeError);
    await expect(registry.selectAndReserve('render', { waitMs: -1 })).rejects.toBeInstanceOf(
      RangeError,
    );
    await expect(registry.reserve('')).rejects.toBeInstanceOf(TypeError);
    await expect(registry.adopt('')).rejects.toBeInstanceOf(TypeError);
    expect(() =>
      createMembership({ url: server.url, node: { id: 'x', url: 'http://x', capacity: -1 } }),
    ).toThrow(RangeError);
    expect(() => createCapacityRegistry({ url: 'http://nope' })).toThrow(TypeError);
    expect(() => createCapacityRegistry({ url: server.url, holdLeaseMs: 5 })).toThrow(RangeError);
  });

  it('is a CapacityRegistryClient whose state is private, and whose reservations are too', async () => {
    const w = world();
    await w.join('a', 1);
    const registry = w.registry();
    expect(registry).toBeInstanceOf(CapacityRegistryClient);
    expect(Object.keys(registry)).toEqual([]);
    const r = (await registry.selectAndReserve('render'))!;
    expect(r).toBeInstanceOf(SlotReservation);
    expect(Object.keys(r).sort()).toEqual(['id', 'worker']);
    await r.release();
  });
});
