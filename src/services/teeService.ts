/**
 * The Tee brought to life: `attachTee` subscribes a Tee chart to a rendering coordinator and gives
 * it a writer that streams into the variant store; `TeeService` does that for every render that
 * starts, and can wait for the tees it started (shutdown).
 *
 * Wiring (renderService, before `actor.start()` of a new coordinator):
 * `tees.onRendering(actor, key, variantMetadata(request.options))`. The coordinator emits
 * `telemetry{event:'rendering'}` when it enters `rendering` (at once when admitted, later when a
 * queued render is granted), and the tee joins from that handler.
 *
 * ## Invariants
 * - **Never while queued**: a tee is attached only on the coordinator's `rendering` telemetry,
 *   so a queued render every client left still stops with nothing stored.
 * - **From byte 0, no gap**: the tee's inbox is registered before its `join`; messages that
 *   arrive before the join's reply (which carries the backlog) are held and replayed after it.
 * - **A tee listens for nobody**: it joins with `store: true`, so a render whose clients all
 *   left is an orphan that yields its slot to a queued request (`machines/renderCoordinator.ts`);
 *   the tee then gets `error(cancelled)` and its staging is discarded.
 * - **Both sides watch each other**: the coordinator gets `gone(teeId)` when the tee's actor
 *   ends (so a render nobody wants any more is cancelled), and the tee gets `coordinator.gone`
 *   when the coordinator ends without a terminal message.
 * - **A write failure never reaches a client**: it is published on
 *   `audio_proxy.variant_store.write_failure` as `{ key, reason }`, and the tee leaves. A
 *   variant a bounded store refused as too large (`too_large`) is not a failure: the store
 *   reported it already; the tee just leaves.
 * - **`done` settles after the store did**: staging removed or the variant committed.
 * - **An mp3 is stored seekable**: the tee follows its frames (`Mp3Indexer`) and hands the
 *   store the complete Xing/Info frame to write over the placeholder the worker streamed
 *   (`PutOptions.patch`); the stored bytes differ from the streamed ones only inside that frame.
 *
 * ## Races
 * - *Join lands after completion* (a very short render): the reply is the whole backlog and
 *   `done` was delivered first; it is held, replayed after the backlog, and the tee commits.
 * - *Join lands on a coordinator that is stopping*: treated as the coordinator going away.
 *
 * ## Events
 * | Event | Fields | When |
 * |---|---|---|
 * | `audio_proxy.variant_store.write_failure` | `key`, `reason` | a write failed under a healthy render |
 */
import { type Actor, type ActorOptions, type AnyActorRef, createActor, fromCallback } from 'xstate';
import { call, inbox } from '../actors/call.js';
import { watch, watchInto } from '../actors/monitor.js';
import type { Config, ConfigProvider } from '../config/index.js';
import type { RenderOptions } from '../core/variant.js';
import {
  contentDisposition,
  contentTypeFor,
  IMMUTABLE_CACHE_CONTROL,
} from '../core/variantHeaders.js';
import type { JoinReply, SubscriberMessage } from '../machines/renderCoordinator.js';
import { TEE_SLACK_MS, type TeeOutput, teeMachine, type WriterEvent } from '../machines/tee.js';
import { ChunkChannel } from '../store/channel.js';
import {
  reasonOf,
  type StoredVariant,
  StoreError,
  TOO_LARGE_REASON,
  type VariantMetadata,
  type VariantStore,
} from '../store/types.js';
import { publish, RENDER_CHANNELS } from '../telemetry/channels.js';
import { Mp3Indexer } from '../workers/xingFrame.js';

/** The stored mp3's content type: its tee completes the info frame at commit. */
const MP3_CONTENT_TYPE = 'audio/mpeg';

export const WRITE_FAILURE_CHANNEL = RENDER_CHANNELS.writeFailure;
/** How long `drain` waits for tees to settle, in ms: past any staging cleanup or abort call. */
export const TEE_DRAIN_TIMEOUT_MS = 10_000;

/** What a variant is stored with: the headers every HIT replays. */
export function variantMetadata(options: RenderOptions): VariantMetadata {
  return {
    contentType: contentTypeFor(options),
    cacheControl: IMMUTABLE_CACHE_CONTROL,
    ...(options.download !== undefined
      ? { contentDisposition: contentDisposition(options.download) }
      : {}),
  };
}

/** The writer the Tee invokes: one streaming `put`, aborted if the writer is stopped first. */
export function storeWriter(
  store: VariantStore,
  key: string,
  metadata: VariantMetadata,
  onPut: (settled: Promise<void>) => void,
) {
  return fromCallback<WriterEvent, { key: string }>(({ receive, sendBack }) => {
    const channel = new ChunkChannel();
    const controller = new AbortController();
    // An mp3's info frame is completed from the frames that passed (`workers/xingFrame.ts`).
    const mp3 = metadata.contentType === MP3_CONTENT_TYPE ? new Mp3Indexer() : undefined;
    let settled = false;
    // A store that throws instead of rejecting is a failed write all the same (not a tee that
    // dies mid-start with its coordinator still counting on it).
    let put: Promise<StoredVariant>;
    try {
      put = store.put(key, channel, metadata, {
        signal: controller.signal,
        ...(mp3 !== undefined ? { patch: () => mp3.finish() } : {}),
      });
    } catch (error) {
      put = Promise.reject(error);
    }
    onPut(
      put.then(
        (stored) => {
          settled = true;
          sendBack({ type: 'writer.committed', size: stored.size });
        },
        (error: unknown) => {
          settled = true;
          if (!controller.signal.aborted) {
            sendBack({ type: 'writer.failed', reason: reasonOf(error) });
          }
        },
      ),
    );
    receive((event) => {
      if (event.type === 'write') {
        mp3?.push(event.data);
        channel.push(event.data);
      } else channel.end();
    });
    return () => {
      if (settled) return;
      controller.abort();
      channel.fail(new StoreError('ERR_STORE_ABORTED', 'aborted', 'tee stopped'));
    };
  });
}

export interface AttachTeeOptions {
  readonly coordinator: AnyActorRef;
  readonly key: string;
  readonly store: VariantStore;
  readonly metadata: VariantMetadata;
  /** Read once, for `AP_RENDER_TIMEOUT`. */
  readonly config: Config | ConfigProvider;
  /** XState inspection observer (the proxy's `inspect` option). */
  readonly inspect?: ActorOptions<typeof teeMachine>['inspect'];
}

export type TeeActor = Actor<typeof teeMachine>;

export interface TeeHandle {
  /** The subscriber id the tee holds on the coordinator. */
  readonly id: string;
  readonly actor: TeeActor;
  /** Resolves once the chart is final and the store's put has settled. Never rejects. */
  readonly done: Promise<TeeOutput>;
}

let teeSeq = 0;

function configOf(config: Config | ConfigProvider): Config {
  return typeof (config as ConfigProvider).get === 'function'
    ? (config as ConfigProvider).get()
    : (config as Config);
}

/**
 * Subscribes a new Tee to `coordinator` (which must be rendering or completed: call it from the
 * `rendering` telemetry, or use `TeeService.onRendering`).
 */
export function attachTee(options: AttachTeeOptions): TeeHandle {
  const { coordinator, key, store, metadata } = options;
  const config = configOf(options.config);
  const id = `tee-${++teeSeq}`;
  let putSettled: Promise<void> = Promise.resolve();
  const machine = teeMachine.provide({
    actors: { writer: storeWriter(store, key, metadata, (p) => (putSettled = p)) },
  });
  const actor = createActor(machine, {
    input: { key, deadlineMs: config.renderTimeoutS * 1000 + TEE_SLACK_MS },
    ...(options.inspect ? { inspect: options.inspect } : {}),
  });
  actor.on('write_failure', (e) => {
    // A variant over a bounded store's whole bound is the store's policy, reported on its own
    // channel (`audio_proxy.variant_store.oversize`), not a failed write.
    if (e.reason === TOO_LARGE_REASON) return;
    publish(WRITE_FAILURE_CHANNEL, () => ({ key: e.key, reason: e.reason }));
  });
  const deliver = (event: Parameters<TeeActor['send']>[0]) => {
    if (actor.getSnapshot().status === 'active') actor.send(event);
  };
  let early: SubscriberMessage[] | null = [];
  const offInbox = inbox<SubscriberMessage>(coordinator, id, (message) => {
    if (early) early.push(message);
    else deliver(message);
  });
  // Assigned once the actor has started; an actor that ends inside `start` must find it callable.
  let unwatchCoordinator: () => void = () => {};
  const done = new Promise<TeeOutput>((resolve) => {
    const finish = () => {
      offInbox();
      unwatchCoordinator();
      const snapshot = actor.getSnapshot();
      const output: TeeOutput =
        snapshot.status === 'done' && snapshot.output
          ? snapshot.output
          : { outcome: 'aborted', bytes: snapshot.context.bytes };
      void putSettled.finally(() => resolve(output));
    };
    actor.subscribe({ complete: finish, error: finish });
  });
  actor.start();
  unwatchCoordinator = watch(coordinator, () => deliver({ type: 'coordinator.gone' }));
  watchInto(coordinator, id, actor);
  // `store: true`: the tee keeps the render going for the store, never a slot from a listener.
  call<JoinReply>(coordinator, { type: 'join', id, store: true }).then(
    (reply) => {
      const held = early ?? [];
      early = null;
      if (reply.type === 'stopping') {
        deliver({ type: 'coordinator.gone' });
        return;
      }
      for (const data of reply.backlog) deliver({ type: 'chunk', data });
      for (const message of held) deliver(message);
    },
    () => {
      early = null;
      deliver({ type: 'coordinator.gone' });
    },
  );
  return { id, actor, done };
}

export interface TeeServiceOptions {
  readonly store: VariantStore;
  readonly config: Config | ConfigProvider;
  /** XState inspection observer for every tee (the proxy's `inspect` option). */
  readonly inspect?: AttachTeeOptions['inspect'];
  /** Told of every tee actor as it starts (the proxy's live view follows them). */
  readonly track?: (actor: AnyActorRef, name: string) => void;
}

/** Starts a tee for each render and keeps track of the live ones. */
export class TeeService {
  readonly #store: VariantStore;
  readonly #config: Config | ConfigProvider;
  readonly #live = new Set<TeeHandle>();
  /** The newest live tee of each key: what `settled` waits for. */
  readonly #byKey = new Map<string, TeeHandle>();
  readonly #inspect: AttachTeeOptions['inspect'];
  readonly #track: TeeServiceOptions['track'];

  constructor(options: TeeServiceOptions) {
    this.#store = options.store;
    this.#config = options.config;
    this.#inspect = options.inspect;
    this.#track = options.track;
  }

  /** Tees not yet settled. */
  get live(): number {
    return this.#live.size;
  }

  attach(coordinator: AnyActorRef, key: string, metadata: VariantMetadata): TeeHandle {
    const handle = attachTee({
      coordinator,
      key,
      store: this.#store,
      metadata,
      config: this.#config,
      ...(this.#inspect ? { inspect: this.#inspect } : {}),
    });
    this.#live.add(handle);
    this.#byKey.set(key, handle);
    this.#track?.(handle.actor, `tee:${key}`);
    void handle.done.then(() => {
      this.#live.delete(handle);
      if (this.#byKey.get(key) === handle) this.#byKey.delete(key);
    });
    return handle;
  }

  /**
   * Attaches a tee when `coordinator` starts rendering (at most once). Call before the
   * coordinator is started. Returns the function that cancels the hook (not a running tee).
   */
  onRendering(
    coordinator: AnyActorRef,
    key: string,
    metadata: VariantMetadata,
    onAttach?: (handle: TeeHandle) => void,
  ): () => void {
    let attached = false;
    const subscription = coordinator.on('telemetry', (event: { event?: string }) => {
      if (attached || event.event !== 'rendering') return;
      attached = true;
      subscription.unsubscribe();
      const handle = this.attach(coordinator, key, metadata);
      onAttach?.(handle);
    });
    return () => subscription.unsubscribe();
  }

  /**
   * What the live tee of `key` ends with (committed, aborted, write_failed), once its store
   * write has settled; `undefined` when no tee of that key is live (none started, or settled).
   */
  settled(key: string): Promise<TeeOutput> | undefined {
    return this.#byKey.get(key)?.done;
  }

  /** Resolves once every live tee settled, or after `timeoutMs`. */
  async drain(timeoutMs = TEE_DRAIN_TIMEOUT_MS): Promise<void> {
    const pending = [...this.#live].map((h) => h.done);
    if (pending.length === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled(pending),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }
}
