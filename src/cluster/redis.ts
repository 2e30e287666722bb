/**
 * Redis connections for cluster mode, set to fail fast: a registry that cannot answer quickly
 * must let the node act alone, so nothing here queues, waits for a reconnect, or retries a
 * command. Only the connection itself is retried (forever, with a capped backoff), so a Redis
 * that comes back is used again without anyone asking.
 *
 * ## Invariants
 * - **A command never outlives `COMMAND_TIMEOUT_MS`**, and one sent while disconnected fails at
 *   once (no offline queue): an unreachable Redis costs a request milliseconds, never a hang.
 * - **A command is sent once** (`maxRetriesPerRequest: 0`): a script that may have run is never
 *   replayed by the client behind its caller's back.
 * - **Connection errors are observed**: every client gets an `error` listener (ioredis would
 *   otherwise print them as unhandled); they reach `onError` once per outage, not per retry.
 *
 * ## Races
 * - *Redis restarts empty*: scripts are defined with `defineCommand`, which falls back from
 *   EVALSHA to EVAL on NOSCRIPT, so a restarted server is used without a reload step.
 * - *Subscriber reconnects*: ioredis resubscribes; a release published meanwhile is missed,
 *   which is why every waiter also has a bounded recheck (see `capacityRegistry.ts`).
 *
 * ## Events
 * | ioredis event | Meaning here |
 * |---|---|
 * | `ready` | connected and usable: the registry is (again) `ready` |
 * | `close` / `error` | the connection is gone or failing: the registry is `degraded` |
 * | `end` | no more reconnects (only after `quit`/`disconnect`) |
 */
import { Redis, type RedisOptions } from 'ioredis';

/** Connect attempt budget: long enough for a loaded loopback, short enough to notice an outage. */
export const REDIS_CONNECT_TIMEOUT_MS = 1_000;
/** Per-command budget: a registry script is sub-millisecond, so a second means Redis is in trouble. */
export const COMMAND_TIMEOUT_MS = 1_000;
/** Longest pause between reconnect attempts: a recovered Redis is back in use within this. */
export const MAX_RECONNECT_DELAY_MS = 1_000;
/** First reconnect delay, doubled per attempt up to the cap. */
export const FIRST_RECONNECT_DELAY_MS = 50;

/** The fail-fast options, for a URL. Exported so tests can check them. */
export function clusterRedisOptions(name: string): RedisOptions {
  return {
    connectionName: name,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableReadyCheck: true,
    autoResubscribe: true,
    lazyConnect: true,
    retryStrategy: (times) =>
      Math.min(FIRST_RECONNECT_DELAY_MS * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS),
  };
}

/**
 * A new fail-fast client for `url`; it starts connecting at once. `onError` hears about the
 * first error of each outage (the next `ready` re-arms it). Never throws for a bad server:
 * commands fail instead.
 */
export function connectClusterRedis(
  url: string,
  name: string,
  onError?: (error: Error) => void,
): Redis {
  if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
    throw new TypeError(`cluster Redis URL must start with redis:// or rediss://, got ${url}`);
  }
  const client = new Redis(url, clusterRedisOptions(name));
  let reported = false;
  client.on('error', (error: Error) => {
    if (reported) return;
    reported = true;
    onError?.(error);
  });
  client.on('ready', () => {
    reported = false;
  });
  client.connect().catch(() => {
    // Reported through the `error` event above; reconnects continue on their own.
  });
  return client;
}

/** Closes `client` without waiting on an unreachable server: QUIT if it can, else disconnect. */
export async function closeClusterRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') {
    try {
      await client.quit();
      return;
    } catch {
      // Fall through: the socket goes anyway.
    }
  }
  client.disconnect(false);
}

/** True for errors that mean "Redis did not answer", as opposed to an answer that was an error. */
export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === 'ReplyError') return false;
  return true;
}
