/**
 * A purge told to every node of the cluster through Redis pub/sub: the node that answered the
 * purge request publishes the variant key on `ap:purge`; every other node deletes it from its own
 * variant store and hot cache (`onPurge`). With a shared `s3://` store the store delete is done
 * once per node, which is harmless (absent is not an error); with a store per node each drops its
 * own copy.
 *
 * ## Invariants
 * - **Nothing from the channel is trusted**: a message is JSON `{ "from": nodeId, "key": key }`
 *   with a well-formed variant key (`isVariantKey`), else it is dropped unread. The worst a
 *   publisher can do is evict variants, which then render again.
 * - **A node does not purge twice for its own message** (`from` is itself): it purged before
 *   publishing.
 * - **Best-effort, bounded**: `publish` answers the number of other nodes that heard it, or
 *   `undefined` when Redis did not answer within `CLUSTER_REDIS_DEADLINE_MS`; it never rejects.
 *
 * ## Races
 * - *A node is disconnected from Redis when the purge is published*: pub/sub keeps nothing, so
 *   that node keeps its copy in memory until evicted or restarted. The count `publish` returns
 *   says how many heard it; the operator's page (docs/cdn.md, "Purge") says so.
 * - *A purge arrives while the variant is being loaded into the hot cache*: the cache drops the
 *   load's result (`HotVariantCache.delete`).
 *
 * ## Events
 * | Source | Meaning |
 * |---|---|
 * | `onError(error)` | a message's `onPurge` failed (the store could not delete) |
 */
import type { Redis } from 'ioredis';
import { isVariantKey } from '../store/types.js';
import { closeClusterRedis, connectClusterRedis } from './redis.js';

/** The pub/sub channel purges travel on. */
export const PURGE_CHANNEL = 'ap:purge';

export interface PurgeBroadcastOptions {
  readonly url: string;
  readonly nodeId: string;
  /** Deletes `key` on this node (its store and hot cache). */
  readonly onPurge: (key: string) => Promise<void>;
  readonly onError?: (error: unknown) => void;
}

/** The key of a well-formed purge message from another node, else undefined. */
export function purgeMessageKey(message: string, self: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { from, key } = parsed as { from?: unknown; key?: unknown };
  if (typeof from !== 'string' || from === self) return undefined;
  return typeof key === 'string' && isVariantKey(key) ? key : undefined;
}

export class PurgeBroadcast {
  readonly #o: PurgeBroadcastOptions;
  readonly #sub: Redis;
  #subscribed = false;
  #closed = false;

  constructor(options: PurgeBroadcastOptions) {
    this.#o = options;
    const sub = connectClusterRedis(options.url, `audio-proxy-purge-${options.nodeId}`);
    this.#sub = sub;
    sub.on('message', (channel: string, message: string) => {
      if (channel !== PURGE_CHANNEL || this.#closed) return;
      const key = purgeMessageKey(message, options.nodeId);
      if (key === undefined) return;
      options.onPurge(key).catch((e: unknown) => options.onError?.(e));
    });
    // Subscribed once, ioredis resubscribes after a reconnect; until then every `ready` tries.
    sub.on('ready', () => {
      if (this.#subscribed || this.#closed) return;
      sub.subscribe(PURGE_CHANNEL).then(
        () => {
          this.#subscribed = true;
        },
        () => undefined,
      );
    });
  }

  /** Whether this node hears other nodes' purges now. */
  get listening(): boolean {
    return this.#subscribed && this.#sub.status === 'ready';
  }

  /**
   * Tells the other nodes to purge `key` through `redis` (a command connection: a subscribed one
   * cannot publish). The number of other nodes that heard it, or undefined without an answer.
   */
  async publish(redis: Redis, key: string, deadlineMs: number): Promise<number | undefined> {
    if (!isVariantKey(key)) throw new TypeError(`not a variant key: ${JSON.stringify(key)}`);
    const message = JSON.stringify({ from: this.#o.nodeId, key });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), deadlineMs);
    });
    try {
      const heard = await Promise.race([
        redis.publish(PURGE_CHANNEL, message).catch(() => undefined),
        deadline,
      ]);
      if (heard === undefined) return undefined;
      // Our own subscriber counts among the receivers when it is subscribed.
      return Math.max(0, heard - (this.listening ? 1 : 0));
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await closeClusterRedis(this.#sub).catch(() => undefined);
  }
}
