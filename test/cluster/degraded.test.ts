// What the registry does when Redis goes away: a registry pointed at nothing fails fast with
// ERR_REGISTRY_UNREACHABLE (never hangs); stopping the server mid-run degrades the chart and
// every call throws unreachable naming the worker; restarting it (empty) brings the registry
// back to ready, membership re-registers within a heartbeat, and committed holds are
// re-asserted for their running renders and reported as lost.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCapacityRegistry } from '../../src/cluster/capacityRegistry.js';
import { createMembership } from '../../src/cluster/membership.js';
import { COMMAND_TIMEOUT_MS, REDIS_CONNECT_TIMEOUT_MS } from '../../src/cluster/redis.js';
import type { RegistryError } from '../../src/cluster/types.js';
import { eventually, freshPrefix } from './helpers.js';
import { type RedisServer, startRedisServer } from './redisServer.js';

let server: RedisServer;

beforeAll(async () => {
  server = await startRedisServer();
}, 30_000);

afterAll(async () => {
  await server?.stop();
});

async function closedPort(): Promise<number> {
  return await new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const address = s.address();
      s.close(() => resolve(typeof address === 'object' && address ? address.port : 1));
    });
  });
}

describe('an unreachable registry', () => {
  it('fails fast with ERR_REGISTRY_UNREACHABLE and reports degraded', async () => {
    const registry = createCapacityRegistry({ url: `redis://127.0.0.1:${await closedPort()}` });
    try {
      const started = performance.now();
      const error = await registry.selectAndReserve('render').catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ERR_REGISTRY_UNREACHABLE' });
      const reserveError = await registry.reserve('b').catch((e: unknown) => e);
      expect(reserveError).toMatchObject({ code: 'ERR_REGISTRY_UNREACHABLE', worker: 'b' });
      expect(performance.now() - started).toBeLessThan(
        REDIS_CONNECT_TIMEOUT_MS + COMMAND_TIMEOUT_MS,
      );
      expect(registry.stats().state).toBe('degraded');
    } finally {
      await registry.close();
    }
    expect(registry.stats().state).toBe('closed');
    await expect(registry.nodes()).rejects.toMatchObject({ code: 'ERR_REGISTRY_CLOSED' });
  });

  it('membership start rejects, naming the node', async () => {
    const member = createMembership({
      url: `redis://127.0.0.1:${await closedPort()}`,
      node: { id: 'n1', url: 'http://n1', capacity: 2 },
    });
    try {
      await expect(member.start()).rejects.toMatchObject({
        code: 'ERR_REGISTRY_UNREACHABLE',
        worker: 'n1',
      });
    } finally {
      await member.stop();
    }
  });
});

describe('Redis stopped mid-run, then restarted empty', () => {
  it('degrades, throws unreachable, then recovers with the node and its holds back', async () => {
    const prefix = freshPrefix();
    const errors: RegistryError[] = [];
    const member = createMembership({
      url: server.url,
      prefix,
      leaseMs: 300, // a heartbeat every 100 ms: re-registration is quick after the restart
      node: { id: 'a', url: 'http://a', capacity: 2 },
    });
    const registry = createCapacityRegistry({
      url: server.url,
      prefix,
      holdLeaseMs: 300,
      onError: (e) => errors.push(e),
    });
    try {
      await member.start();
      const hold = (await registry.reserve('a'))!;
      await hold.commit();
      expect(registry.stats().state).toBe('ready');

      await server.stop();
      await eventually(() => registry.stats().state === 'degraded');
      const error = await registry.reserve('a').catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ERR_REGISTRY_UNREACHABLE', worker: 'a' });
      await expect(registry.selectAndReserve('render')).rejects.toMatchObject({
        code: 'ERR_REGISTRY_UNREACHABLE',
      });

      await server.restart();
      await eventually(() => registry.stats().state === 'ready');
      // The heartbeat puts the node back; the renewal re-asserts the running render's hold.
      await eventually(async () => {
        const nodes = await registry.nodes().catch(() => []);
        return nodes.length === 1 && nodes[0]!.held === 1;
      });
      expect(errors.some((e) => e.code === 'ERR_RESERVATION_LOST' && e.worker === 'a')).toBe(true);
      const second = await registry.selectAndReserve('render');
      expect(second?.worker.id).toBe('a');
      expect(await registry.selectAndReserve('render')).toBeNull(); // 2 of 2 held
      await hold.release();
      await second!.release();
      expect((await registry.nodes())[0]!.held).toBe(0);
      expect(registry.stats()).toMatchObject({ reserved: 0, committed: 0 });
    } finally {
      await registry.close();
      await member.stop();
    }
  }, 30_000);
});
