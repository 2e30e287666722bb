/**
 * The flight recorder: every actor event XState's inspection API reports (an actor created, an
 * event delivered with its sender and receiver, a snapshot after a step) and every message on
 * the catalogued diagnostics channels, stamped with a monotonic clock, kept in a bounded ring.
 * It is written out (`core/recording.ts`'s NDJSON) on `GET /debug/recording` (metrics listener),
 * on `save()` (the CLI calls it on SIGUSR2), and by itself when an invariant check fails, so an
 * operator gets the last seconds before an incident.
 *
 * ## Invariants
 * - **Off costs nothing.** The proxy builds a recorder only when `AP_FLIGHT_RECORDER` is above 0;
 *   otherwise no observer is attached to any actor and no channel is subscribed: the actors are
 *   created exactly as without it (measured in docs/performance.md).
 * - **Bounded memory.** At most `capacity` entries; the oldest is overwritten. An actor's
 *   description is kept while it runs or while an entry still names it, never longer; its last
 *   snapshot overwritten becomes its starting state (`initial`) in a recording, so a replay
 *   begins from the true state.
 * - **A bystander.** Copies are plain and bounded (`core/recording.ts`'s payload rules), taken
 *   synchronously in the inspection callback (some contexts are mutated in place later), with
 *   absolute paths scrubbed as the inspector relay does; nothing it does can throw into an actor.
 * - **Checks, after every step they concern:**
 *   - `actor_error`: a machine failed (a machine threw, which is a bug): a snapshot saying
 *     `error`, or `fault()` from the system's fatal path (a throw inside a step reaches the
 *     actor's observers, not the inspection API);
 *   - `queue_bound`: the semaphore admitted a waiter past its queue bound (queued rose while
 *     above `queueSize`; lowering the bound at run time is not a violation);
 *   - `slot_after_render`: a render coordinator's render is over (it `completed`, or the
 *     coordinator ended) and the semaphore still holds its slot `slotGraceMs` later;
 *   - `internal_error`: a request stage reported an unhandled error on its channel.
 *   A failed check appends an `invariant` entry right after the step that broke it and saves
 *   the ring (at most once per check per `SAVE_INTERVAL_MS`).
 *
 * ## Races
 * - *An actor ends without a final snapshot* (stopped with its parent): no entry says so; its
 *   description leaves with its last ring entry, as any other.
 * - *A slot released a moment after its coordinator ended* (the release is a message): the
 *   check waits `slotGraceMs` before it reads the semaphore's table.
 */
import diagnostics from 'node:diagnostics_channel';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { AnyActorRef, InspectionEvent, StateValue } from 'xstate';
import {
  formatRecording,
  MAX_PAYLOAD_FIELDS,
  type Payload,
  type Primitive,
  primitive,
  RECORDING_FORMAT,
  RECORDING_VERSION,
  type RecordedActor,
  type Recording,
  type RecordingEntry,
  type SnapshotEntry,
} from '../core/recording.js';
import type { SemaphoreContext } from '../machines/semaphore.js';
import { CHANNELS, RENDER_CHANNELS } from '../telemetry/channels.js';
import { CHART_MACHINES } from './chartModel.js';
import { detailsOf } from './details.js';
import { valueString } from './liveView.js';

/** Where `GET` downloads the ring, on the metrics listener. */
export const RECORDING_PATH = '/debug/recording';
/** A check that fails again within this long does not save again. */
export const SAVE_INTERVAL_MS = 10_000;
/** How long a slot may outlive its coordinator before `slot_after_render` trips. */
export const SLOT_GRACE_MS = 2_000;
/** How often pending slot checks are looked at. */
const SLOT_CHECK_INTERVAL_MS = 500;

export interface FlightRecorderOptions {
  /** Entries kept (`AP_FLIGHT_RECORDER`). */
  readonly capacity: number;
  /** Where saved recordings go (`AP_FLIGHT_RECORDER_DIR`). */
  readonly dir: string;
  /** The semaphore, for the slot check (a getter: the recorder exists before the actors). */
  readonly semaphore?: () => AnyActorRef | undefined;
  /** Scrubs absolute paths from strings (`inspect.ts`'s `scrubber`). */
  readonly scrub?: ((s: string) => string) | undefined;
  /** Told after every save (the proxy logs it). */
  readonly onSaved?: (path: string, reason: string) => void;
  /** Told when a save failed (disk full, directory gone). */
  readonly onSaveError?: (error: unknown, reason: string) => void;
  /** @default SLOT_GRACE_MS */
  readonly slotGraceMs?: number;
  /** Monotonic ms. @default performance.now */
  readonly now?: () => number;
  /** @default Date.now */
  readonly wallClock?: () => number;
}

export interface FlightRecorder {
  /** The inspection observer every `createActor` gets. */
  readonly observer: (event: InspectionEvent) => void;
  /** Gives an actor its readable name (`renderCoordinator:<key>`, `delivery:<id>`). */
  name(actor: AnyActorRef, name: string): void;
  /** The ring as a recording, oldest entry first. */
  recording(reason: string): Recording;
  /** Writes the ring to `dir`; returns the file's path, or undefined if writing failed. */
  save(reason: string): string | undefined;
  /** Answers `GET|HEAD /debug/recording`; false for any other path. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean;
  /**
   * An actor failed (the system's fatal path says which, by the name it was given): its error
   * snapshot and an `actor_error` trip are recorded, and the ring saved. XState reports a throw
   * inside a step to the actor's observers, not to the inspection API, hence this door.
   */
  fault(name: string, error: unknown): void;
  /** Entries seen since the start (kept or overwritten). */
  readonly seen: number;
  /** Checks that failed, by name. */
  readonly trips: ReadonlyMap<string, number>;
  /** Unsubscribes from the channels and stops the slot timer. */
  close(): void;
}

interface Info {
  readonly actor: string;
  chart: string | null;
  /** Given by `name()` (or read from a coordinator's key); else derived from the parent's. */
  name: string | null;
  /** XState's id of the actor within its parent (`render`, `worker`), or its session id. */
  readonly local: string;
  readonly parent: string | null;
  /** Ring entries naming it. */
  inRing: number;
  ended: boolean;
  /** Its last snapshot that the ring overwrote. */
  base: SnapshotEntry | null;
  /** To tell, once no entry names it, whether it still runs (a child stopped with its parent
   *  reports no final snapshot). */
  readonly ref: WeakRef<AnyActorRef>;
}

const CHARTED = new Set(CHART_MACHINES.map((m) => m.machine.id));

function logicIdOf(actor: AnyActorRef): string | null {
  const logic = (actor as { logic?: unknown }).logic;
  if (logic === null || typeof logic !== 'object' || !('root' in logic)) return null;
  const id = (logic as { id?: unknown }).id;
  return typeof id === 'string' && CHARTED.has(id) ? id : null;
}

export function createFlightRecorder(options: FlightRecorderOptions): FlightRecorder {
  const capacity = Math.floor(options.capacity);
  if (!(capacity > 0)) throw new RangeError('a flight recorder needs a capacity above 0');
  const now = options.now ?? (() => performance.now());
  const wallClock = options.wallClock ?? Date.now;
  const timeOrigin = wallClock() - now();
  const scrub = options.scrub;
  const slotGraceMs = options.slotGraceMs ?? SLOT_GRACE_MS;
  const ring: (RecordingEntry | undefined)[] = new Array(capacity);
  let head = 0; // next write
  let size = 0;
  let seq = 0;
  const refs = new WeakMap<AnyActorRef, Info>();
  const infos = new Map<string, Info>();
  let nextId = 0;
  const trips = new Map<string, number>();
  const lastSaved = new Map<string, number>();
  const pendingSlots = new Map<
    string,
    { readonly at: number; readonly actor: string; readonly step: number }
  >();
  let slotTimer: ReturnType<typeof setInterval> | null = null;
  let lastQueued = 0;
  let closed = false;

  const text = (s: string) => primitive(scrub ? scrub(s) : s) as string;

  const flat = (
    source: unknown,
    into: Record<string, Primitive>,
    prefix: string,
    depth: number,
  ) => {
    if (source === null || typeof source !== 'object') return;
    for (const key of Object.keys(source)) {
      if (Object.keys(into).length >= MAX_PAYLOAD_FIELDS) return;
      if (key === '__proto__' || key === 'constructor' || key === 'prototype') continue;
      const v = (source as Record<string, unknown>)[key];
      const name = prefix === '' ? key : `${prefix}.${key}`;
      if (typeof v === 'string') into[name] = text(v);
      else {
        const p = primitive(v);
        if (p !== undefined) into[name] = p;
        else if (depth < 1 && v !== null && typeof v === 'object' && !Array.isArray(v)) {
          if (Buffer.isBuffer(v) || v instanceof Uint8Array) continue;
          const inner = key === 'measurements' || key === 'metadata' || key === 'message';
          flat(v, into, inner ? prefix : name, depth + 1);
        }
      }
    }
  };

  const release = (id: string) => {
    const info = infos.get(id);
    if (info === undefined) return;
    info.inRing--;
    if (info.inRing > 0) return;
    const status = info.ended ? 'ended' : info.ref.deref()?.getSnapshot()?.status;
    if (status !== 'active') infos.delete(id);
  };
  const hold = (id: string | null) => {
    if (id === null) return;
    const info = infos.get(id);
    if (info) info.inRing++;
  };

  const push = (entry: RecordingEntry) => {
    const old = ring[head];
    if (old !== undefined) {
      if (old.kind === 'snapshot') {
        const info = infos.get(old.actor);
        if (info) info.base = old;
      }
      if ('actor' in old && old.actor !== null) release(old.actor);
      if (old.kind === 'event' && old.source !== null) release(old.source);
    } else size++;
    ring[head] = entry;
    head = (head + 1) % capacity;
    if ('actor' in entry) hold(entry.actor);
    if (entry.kind === 'event') hold(entry.source);
  };

  const infoOf = (actor: AnyActorRef): Info => {
    let info = refs.get(actor);
    if (info === undefined) {
      const parentRef = (actor as { _parent?: AnyActorRef })._parent;
      const parent = parentRef ? infoOf(parentRef).actor : null;
      const id = `a${++nextId}`;
      info = {
        actor: id,
        chart: logicIdOf(actor),
        name: null,
        local: actor.id,
        parent,
        inRing: 0,
        ended: false,
        base: null,
        ref: new WeakRef(actor),
      };
      refs.set(actor, info);
      infos.set(id, info);
    }
    return info;
  };

  const save = (reason: string): string | undefined => {
    const stamp = new Date(wallClock()).toISOString().replace(/[:.]/g, '-');
    const safe = reason.replace(/[^a-z0-9_-]+/gi, '-').slice(0, 40);
    const path = join(options.dir, `audio-proxy-recording-${stamp}-${safe}.ndjson`);
    try {
      mkdirSync(options.dir, { recursive: true, mode: 0o700 });
      writeFileSync(path, formatRecording(recording(reason)), { mode: 0o600 });
    } catch (error) {
      options.onSaveError?.(error, reason);
      return undefined;
    }
    options.onSaved?.(path, reason);
    return path;
  };

  /** Records a failed check; `step` is the entry that broke it (default: the one just pushed). */
  const trip = (check: string, actor: string | null, message: string, step: number = seq) => {
    trips.set(check, (trips.get(check) ?? 0) + 1);
    push({ seq: ++seq, t: now(), kind: 'invariant', check, actor, message: text(message), step });
    const at = wallClock();
    const last = lastSaved.get(check);
    if (last !== undefined && at - last < SAVE_INTERVAL_MS) return;
    lastSaved.set(check, at);
    save(`invariant:${check}`);
  };

  const checkSlots = () => {
    const semaphore = options.semaphore;
    const t = now();
    for (const [slotId, pending] of pendingSlots) {
      if (t - pending.at < slotGraceMs) continue;
      pendingSlots.delete(slotId);
      const ctx = semaphore?.()?.getSnapshot()?.context as SemaphoreContext | undefined;
      if (ctx?.table?.holders?.has(slotId)) {
        trip(
          'slot_after_render',
          pending.actor,
          `slot ${slotId} is still held ${Math.round(t - pending.at)} ms after its render ended`,
          pending.step,
        );
      }
    }
    if (pendingSlots.size === 0 && slotTimer !== null) {
      clearInterval(slotTimer);
      slotTimer = null;
    }
  };

  const onSnapshot = (actor: AnyActorRef, snapshot: unknown) => {
    const info = infoOf(actor);
    const s = snapshot as { status?: unknown; value?: StateValue; context?: unknown };
    const status = typeof s.status === 'string' ? s.status : 'active';
    const value = info.chart !== null && s.value !== undefined ? valueString(s.value) : '';
    const raw = info.chart !== null ? detailsOf(info.chart, s.context) : {};
    const details: Record<string, Primitive> = {};
    for (const [k, v] of Object.entries(raw)) details[k] = typeof v === 'string' ? text(v) : v;
    if (info.chart === 'renderCoordinator' && info.name === null && typeof raw.key === 'string') {
      info.name = `renderCoordinator:${raw.key}`;
    }
    push({ seq: ++seq, t: now(), kind: 'snapshot', actor: info.actor, status, value, details });
    if (status !== 'active') info.ended = true;
    if (info.chart === null) return;
    if (status === 'error') {
      const error = (snapshot as { error?: unknown }).error;
      trip(
        'actor_error',
        info.actor,
        `${info.name ?? info.local} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    } else if (info.chart === 'semaphore') {
      const queued = Number(raw.queued);
      const bound = Number(raw.queueSize);
      if (queued > bound && queued > lastQueued) {
        trip('queue_bound', info.actor, `semaphore queued ${queued} waiters, bound ${bound}`);
      }
      lastQueued = queued;
    } else if (
      info.chart === 'renderCoordinator' &&
      (status !== 'active' || value === 'completed') &&
      options.semaphore
    ) {
      // the render is over (its slot was released in the step that got here)
      const slotId = (s.context as { slotId?: unknown } | undefined)?.slotId;
      if (typeof slotId === 'string' && !pendingSlots.has(slotId)) {
        pendingSlots.set(slotId, { at: now(), actor: info.actor, step: seq });
        if (slotTimer === null && !closed) {
          slotTimer = setInterval(checkSlots, SLOT_CHECK_INTERVAL_MS);
          slotTimer.unref?.();
        }
      }
    }
  };

  const observer = (event: InspectionEvent) => {
    if (closed) return;
    try {
      switch (event.type) {
        case '@xstate.actor': {
          const info = infoOf(event.actorRef as AnyActorRef);
          push({ seq: ++seq, t: now(), kind: 'actor', actor: info.actor });
          return;
        }
        case '@xstate.event': {
          const target = infoOf(event.actorRef as AnyActorRef);
          const sourceRef = event.sourceRef as AnyActorRef | undefined;
          const source = sourceRef ? infoOf(sourceRef).actor : null;
          const copy: Record<string, Primitive> = { type: '' };
          flat(event.event, copy, '', 0);
          copy.type = text(String((event.event as { type?: unknown }).type));
          push({
            seq: ++seq,
            t: now(),
            kind: 'event',
            actor: target.actor,
            source,
            event: copy as Payload & { type: string },
          });
          return;
        }
        case '@xstate.snapshot':
          onSnapshot(event.actorRef as AnyActorRef, event.snapshot);
          return;
        default:
          return; // microsteps and actions: the snapshot after the step says what they did
      }
    } catch {
      // a bystander: a copy that fails costs an entry, never the actor's step
    }
  };

  const onMessage = (message: unknown, name: string | symbol) => {
    if (closed) return;
    const data: Record<string, Primitive> = {};
    flat(message, data, '', 0);
    const channel = String(name);
    push({ seq: ++seq, t: now(), kind: 'telemetry', channel, data });
    if (channel === RENDER_CHANNELS.internalError) {
      const err = (message as { error?: unknown }).error;
      const stage = (message as { stage?: unknown }).stage;
      trip(
        'internal_error',
        null,
        `unhandled error in stage ${String(stage)}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  };
  for (const channel of CHANNELS) diagnostics.subscribe(channel, onMessage);

  function recording(reason: string): Recording {
    const entries: RecordingEntry[] = [];
    for (let i = 0; i < size; i++) {
      const e = ring[(head - size + i + capacity) % capacity];
      if (e !== undefined) entries.push(e);
    }
    const named = new Set<string>();
    const name = (id: string | null) => {
      if (id !== null) named.add(id);
    };
    for (const e of entries) {
      if ('actor' in e) name(e.actor);
      if (e.kind === 'event') name(e.source);
    }
    const initial: SnapshotEntry[] = [];
    for (const id of named) {
      const base = infos.get(id)?.base;
      if (base) initial.push(base);
    }
    // parents of named actors, so every `parent` resolves
    for (const id of [...named]) {
      for (let p = infos.get(id)?.parent ?? null; p !== null; p = infos.get(p)?.parent ?? null) {
        named.add(p);
      }
    }
    const nameOf = (info: Info, depth = 0): string => {
      if (info.name !== null) return info.name;
      const parent = info.parent === null ? undefined : infos.get(info.parent);
      return parent && depth < 16 ? `${nameOf(parent, depth + 1)} › ${info.local}` : info.local;
    };
    const actors: RecordedActor[] = [];
    for (const id of named) {
      const info = infos.get(id);
      if (info) {
        const name = text(nameOf(info));
        actors.push({ actor: id, chart: info.chart, name, parent: info.parent });
      }
    }
    return {
      header: {
        format: RECORDING_FORMAT,
        version: RECORDING_VERSION,
        reason,
        timeOrigin,
        capacity,
        dropped: seq - size,
        actors,
        initial,
      },
      entries,
    };
  }

  return {
    observer,
    name(actor, name) {
      const info = refs.get(actor);
      if (info) info.name = name;
    },
    recording,
    save,
    handle(req, res, path) {
      if (path !== RECORDING_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
      const body = formatRecording(recording('download'));
      res.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'content-disposition': 'attachment; filename="audio-proxy-recording.ndjson"',
        'cache-control': 'no-store',
        'content-length': String(Buffer.byteLength(body)),
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
    fault(name, error) {
      if (closed) return;
      let found: Info | undefined;
      for (const info of infos.values()) if (info.name === name) found = info;
      const ref = found?.ref.deref();
      if (found && ref) {
        const snapshot = ref.getSnapshot() as { status?: string };
        if (snapshot?.status === 'error') {
          onSnapshot(ref, snapshot); // records it and trips actor_error
          return;
        }
      }
      const why = error instanceof Error ? error.message : String(error);
      trip('actor_error', found?.actor ?? null, `${name} failed: ${why}`);
    },
    get seen() {
      return seq;
    },
    trips,
    close() {
      if (closed) return;
      closed = true;
      for (const channel of CHANNELS) diagnostics.unsubscribe(channel, onMessage);
      if (slotTimer !== null) clearInterval(slotTimer);
      slotTimer = null;
    },
  };
}
