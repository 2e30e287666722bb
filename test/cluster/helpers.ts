/**
 * Shared by the cluster tests: a raw Redis client for looking at what the scripts wrote, a
 * fresh key prefix per test (so tests share one server without seeing each other), a dump of
 * every key under a prefix, and a hand-driven clock for lease expiry without sleeping.
 */
import { Redis } from 'ioredis';

let counter = 0;
/** A prefix no other test uses, keeping the hash tag. */
export const freshPrefix = (): string => `{t${process.pid}-${++counter}}:`;

export function rawClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/** Every key under `prefix` (SCAN, never KEYS), sorted. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  const pattern = `${prefix.replace(/[{}[\]*?\\]/g, '\\$&')}*`;
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found.sort();
}

/** Contents of every key under `prefix` (TTLs left out: they move with time). */
export async function dump(redis: Redis, prefix: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of await keysUnder(redis, prefix)) {
    const type = await redis.type(key);
    if (type === 'hash') out[key] = await redis.hgetall(key);
    else if (type === 'zset') out[key] = await redis.call('ZRANGE', key, '0', '-1', 'WITHSCORES');
    else if (type === 'string') out[key] = await redis.get(key);
    else out[key] = type;
  }
  return out;
}

/** A clock the test moves by hand (ms since the epoch, like Redis TIME). */
export class ManualClock {
  ms = 1_800_000_000_000;
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** Polls `check` until it is true or `timeoutMs` passes (for waits on a real server's state). */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  stepMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
