/**
 * Membership: this node's entry in the cluster registry. It announces the node's address, its
 * render capacity, its label and whether it is draining, under a heartbeat lease that it renews;
 * a node that stops renewing (crashed, partitioned) lapses out of every selection by itself.
 *
 * ## Invariants
 * - **One record per node id**, rewritten whole by every heartbeat: a Redis that restarted empty
 *   has the node back within one heartbeat, with no separate "re-register" path.
 * - **The lease is renewed at a third of its length**, so two heartbeats may be lost (or slow)
 *   before the node lapses.
 * - **A change is written at once** (`setDraining`, `setCapacity`), not at the next beat: a
 *   draining node must stop being chosen now. If that write fails, it rejects (named), and the
 *   next heartbeat carries the change anyway.
 * - **`stop()` removes the node** (and stops the beat); if Redis cannot be reached, the lease
 *   removes it instead.
 *
 * ## Races
 * - *A heartbeat overlapping a change*: writes are chained, so the last one written is the
 *   latest state; a beat never writes an older `draining` over a newer one.
 * - *Heartbeat fails*: reported through `onError` (with this node named) and retried at the next
 *   beat; the node lapses only if every beat of a whole lease fails.
 *
 * ## Events
 * | Call | Writes |
 * |---|---|
 * | `start()` | the record, then a heartbeat every `leaseMs / 3` |
 * | `setDraining(d)` / `setCapacity(c)` | the record, now (a wake-up if it frees slots) |
 * | `stop()` | removes the record and the node from its pools |
 */

import { RECORD_GRACE_MS } from './capacityRegistry.js';
import {
  closeClusterRedis,
  connectClusterRedis,
  isUnreachable,
  REDIS_CONNECT_TIMEOUT_MS,
} from './redis.js';
import { DEFAULT_PREFIX, keys, SCRIPTS, type ScriptName } from './scripts.js';
import { type Membership, type MembershipOptions, RegistryError } from './types.js';

/** Heartbeat lease: a silent node stops being chosen within this. */
export const NODE_LEASE_MS = 6_000;
/** The pool every node serves unless told otherwise. */
export const DEFAULT_POOL = 'render';

type Runner = Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;

function checkCapacity(capacity: number | null): void {
  if (capacity !== null && !(Number.isInteger(capacity) && capacity >= 0)) {
    throw new RangeError(`capacity must be an integer >= 0 or null, got ${capacity}`);
  }
}

export function createMembership(options: MembershipOptions): Membership {
  const { node } = options;
  if (typeof node?.id !== 'string' || node.id === '') {
    throw new TypeError(`node.id must be a non-empty string, got ${String(node?.id)}`);
  }
  if (typeof node.url !== 'string' || node.url === '') {
    throw new TypeError(`node.url must be a non-empty string, got ${String(node.url)}`);
  }
  checkCapacity(node.capacity);
  const leaseMs = options.leaseMs ?? NODE_LEASE_MS;
  if (!(Number.isInteger(leaseMs) && leaseMs >= 30)) {
    throw new RangeError(`leaseMs must be an integer >= 30, got ${leaseMs}`);
  }
  const pools = options.pools ?? [DEFAULT_POOL];
  if (pools.length === 0 || pools.some((p) => typeof p !== 'string' || p === '')) {
    throw new TypeError('pools must be a non-empty list of non-empty strings');
  }
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const k = keys(prefix);
  const clock = options.clock;

  let capacity = node.capacity;
  let draining = false;
  let redis: ReturnType<typeof connectClusterRedis> | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let stopped = false;

  const fail = (what: string, cause: unknown) =>
    new RegistryError(
      isUnreachable(cause) ? 'ERR_REGISTRY_UNREACHABLE' : 'ERR_REGISTRY_SCRIPT',
      `membership ${what} of ${node.id} failed: ${(cause as Error).message}`,
      { worker: node.id, cause },
    );

  /** Writes the record as it is now; chained so writes land in the order they were made. */
  function beat(what: string): Promise<void> {
    const step = async () => {
      if (!redis || stopped) return;
      const run = redis as unknown as Runner;
      try {
        await run.apHeartbeat(
          k.nodes,
          prefix,
          clock ? String(Math.floor(clock())) : '',
          node.id,
          node.url,
          capacity === null ? '' : String(capacity),
          node.label ?? '',
          draining ? '1' : '0',
          String(leaseMs),
          String(RECORD_GRACE_MS),
          ...pools,
        );
      } catch (cause) {
        throw fail(what, cause);
      }
    };
    const next = chain.then(step, step);
    chain = next.catch(() => undefined);
    return next;
  }

  return {
    async start() {
      if (redis) throw new TypeError('membership already started');
      redis = connectClusterRedis(options.url, `audio-proxy-member-${node.id}`);
      for (const [name, def] of Object.entries(SCRIPTS)) redis.defineCommand(name, def);
      const client = redis;
      // The first write needs the first connect attempt to end (there is no offline queue);
      // later beats just fail fast while Redis is down, and the first to get through registers.
      await new Promise<void>((resolve) => {
        client.once('ready', () => resolve());
        client.once('close', () => resolve());
        setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS).unref();
      });
      timer = setInterval(
        () => {
          beat('heartbeat').catch((error: RegistryError) => options.onError?.(error));
        },
        Math.max(1, Math.floor(leaseMs / 3)),
      );
      timer.unref();
      await beat('registration');
    },

    async setDraining(value) {
      draining = value === true;
      await beat(draining ? 'drain' : 'undrain');
    },

    async setCapacity(value) {
      checkCapacity(value);
      capacity = value;
      await beat('capacity change');
    },

    async stop() {
      if (stopped) return;
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      const client = redis;
      const leave = async () => {
        stopped = true;
        if (!client) return;
        try {
          await (client as unknown as Runner).apLeave(k.nodes, prefix, node.id, ...pools);
        } catch (cause) {
          options.onError?.(fail('leave', cause));
        }
      };
      const step = chain.then(leave, leave);
      chain = step;
      await step;
      if (client) await closeClusterRedis(client);
    },
  };
}
