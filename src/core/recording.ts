/**
 * The recording format: what the flight recorder writes (`GET /debug/recording`, a signal, an
 * invariant trip), what the simulator writes for a failing seed, and what `audio-proxy replay`
 * and the sequence diagrams read. One format, versioned, so a file outlives the code that made it.
 *
 * ## The file (NDJSON, `application/x-ndjson`)
 * Line 1 is the header, every later line one entry, in the order the recorder saw them:
 * ```text
 * {"format":"audio-proxy-recording","version":1,"reason":"signal","timeOrigin":1764776000000.5,
 *  "capacity":4096,"dropped":0,"actors":[{"actor":"a1","chart":"semaphore","name":"semaphore",
 *  "parent":null}],"initial":[{"seq":0,"t":0,"kind":"snapshot","actor":"a1",…}]}
 * {"seq":1,"t":12.25,"kind":"event","actor":"a1","source":"a7","event":{"type":"request","id":"render-1"}}
 * {"seq":2,"t":12.3,"kind":"snapshot","actor":"a1","status":"active","value":"ready","details":{"held":1}}
 * ```
 * - `t` is monotonic milliseconds (`performance.now()` of the writer); `timeOrigin + t` is the
 *   wall clock. `seq` rises by one per entry the writer saw; a gap means the ring overwrote it.
 * - `actors` names every actor an entry or `initial` refers to: its chart (the machine id, null
 *   for a promise or callback actor), a readable name, and its parent actor's id.
 * - `initial` holds, per actor, its last snapshot *before* the first entry (the ring had
 *   overwritten it), so a replay starts from the true state, not from nothing.
 * - Kinds: `actor` (created), `event` (delivered to `actor`, sent by `source` or from outside),
 *   `snapshot` (the actor's state after a step), `telemetry` (a diagnostics-channel message),
 *   `invariant` (a check failed here: the step just before it broke it).
 *
 * ## Invariants
 * - **Trust nothing read.** `parseRecording` accepts only this shape: known kinds, string ids,
 *   finite numbers, flat primitive payloads, no `__proto__` keys; it refuses a file over
 *   `MAX_RECORDING_BYTES` or `MAX_RECORDING_ENTRIES` and a version it does not know, with a
 *   `RecordingError` naming the line.
 * - **Plain data only**: every value is a string, finite number, boolean or null, in objects
 *   at most one level deep, so a recording is safe to embed in a page and to diff.
 * - **Writing is the inverse of reading**: `parseRecording(formatRecording(r))` equals `r`.
 */

export const RECORDING_FORMAT = 'audio-proxy-recording';
export const RECORDING_VERSION = 1;
/** The largest file `parseRecording` reads. */
export const MAX_RECORDING_BYTES = 64 * 1024 * 1024;
/** The most entries `parseRecording` accepts. */
export const MAX_RECORDING_ENTRIES = 1_000_000;
/** A payload (event fields, details, telemetry data) has at most this many fields. */
export const MAX_PAYLOAD_FIELDS = 24;
/** Longest string kept in a payload. */
export const MAX_PAYLOAD_CHARS = 200;

export type Primitive = string | number | boolean | null;
export type Payload = Readonly<Record<string, Primitive>>;

interface EntryBase {
  readonly seq: number;
  /** Monotonic ms. */
  readonly t: number;
}
export interface ActorEntry extends EntryBase {
  readonly kind: 'actor';
  readonly actor: string;
}
export interface EventEntry extends EntryBase {
  readonly kind: 'event';
  /** The receiver. */
  readonly actor: string;
  /** The sender, or null from outside the actors (a timer, a service's `send`). */
  readonly source: string | null;
  /** `type` and the event's primitive fields. */
  readonly event: Payload & { readonly type: string };
}
export interface SnapshotEntry extends EntryBase {
  readonly kind: 'snapshot';
  readonly actor: string;
  /** `active`, `done`, `error` or `stopped`. */
  readonly status: string;
  /** The state value, e.g. `rendering.streaming` (parallel regions joined by `, `); '' if none. */
  readonly value: string;
  readonly details: Payload;
}
export interface TelemetryEntry extends EntryBase {
  readonly kind: 'telemetry';
  readonly channel: string;
  readonly data: Payload;
}
export interface InvariantEntry extends EntryBase {
  readonly kind: 'invariant';
  /** `queue_bound`, `slot_after_render`, `actor_error` (or a simulator's own check). */
  readonly check: string;
  /** The actor the check is about, if one. */
  readonly actor: string | null;
  readonly message: string;
}
export type RecordingEntry =
  | ActorEntry
  | EventEntry
  | SnapshotEntry
  | TelemetryEntry
  | InvariantEntry;

export interface RecordedActor {
  readonly actor: string;
  /** The machine id (`renderCoordinator`); null for a promise or callback actor. */
  readonly chart: string | null;
  readonly name: string;
  readonly parent: string | null;
}

export interface RecordingHeader {
  readonly format: typeof RECORDING_FORMAT;
  readonly version: typeof RECORDING_VERSION;
  /** Why it was written: `download`, `signal`, `invariant:<check>`, `simulator seed=…`. */
  readonly reason: string;
  /** Epoch ms at which `t` is 0. */
  readonly timeOrigin: number;
  /** The ring's size (entries). */
  readonly capacity: number;
  /** Entries the ring overwrote before this was written. */
  readonly dropped: number;
  readonly actors: readonly RecordedActor[];
  readonly initial: readonly SnapshotEntry[];
}

export interface Recording {
  readonly header: RecordingHeader;
  readonly entries: readonly RecordingEntry[];
}

export class RecordingError extends Error {
  override readonly name = 'RecordingError';
  readonly line: number;
  constructor(line: number, message: string) {
    super(line > 0 ? `recording line ${line}: ${message}` : `recording: ${message}`);
    this.line = line;
  }
}

/** A value cut down to a payload primitive, or undefined when it is not one. */
export function primitive(value: unknown): Primitive | undefined {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string') {
    return value.length > MAX_PAYLOAD_CHARS ? `${value.slice(0, MAX_PAYLOAD_CHARS - 1)}…` : value;
  }
  return undefined;
}

/** The recording as NDJSON: the header line, then one line per entry. */
export function formatRecording(recording: Recording): string {
  const lines = [JSON.stringify(recording.header)];
  for (const entry of recording.entries) lines.push(JSON.stringify(entry));
  return `${lines.join('\n')}\n`;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function payload(v: unknown, line: number, what: string): Payload {
  if (!isObject(v)) throw new RecordingError(line, `${what} is not an object`);
  const keys = Object.keys(v);
  if (keys.length > MAX_PAYLOAD_FIELDS) throw new RecordingError(line, `${what}: too many fields`);
  const out: Record<string, Primitive> = Object.create(null);
  for (const k of keys) {
    if (FORBIDDEN_KEYS.has(k)) throw new RecordingError(line, `${what}: forbidden key ${k}`);
    const p = v[k];
    if (p !== null && typeof p !== 'string' && typeof p !== 'boolean' && typeof p !== 'number') {
      throw new RecordingError(line, `${what}.${k} is not a string, number, boolean or null`);
    }
    if (typeof p === 'string' && p.length > MAX_PAYLOAD_CHARS * 4) {
      throw new RecordingError(line, `${what}.${k} is too long`);
    }
    out[k] = p;
  }
  return { ...out };
}

function str(v: unknown, line: number, what: string): string {
  if (typeof v !== 'string' || v.length > 1_000) {
    throw new RecordingError(line, `${what} is not a string`);
  }
  return v;
}
function strOrNull(v: unknown, line: number, what: string): string | null {
  return v === null ? null : str(v, line, what);
}
function num(v: unknown, line: number, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new RecordingError(line, `${what} is not a finite number`);
  }
  return v;
}

/** One entry line, checked field by field; unknown fields are dropped. */
export function parseEntry(v: unknown, line: number): RecordingEntry {
  if (!isObject(v)) throw new RecordingError(line, 'an entry is a JSON object');
  const seq = num(v.seq, line, 'seq');
  const t = num(v.t, line, 't');
  switch (v.kind) {
    case 'actor':
      return { seq, t, kind: 'actor', actor: str(v.actor, line, 'actor') };
    case 'event': {
      const event = payload(v.event, line, 'event');
      if (typeof event.type !== 'string') throw new RecordingError(line, 'event.type is missing');
      return {
        seq,
        t,
        kind: 'event',
        actor: str(v.actor, line, 'actor'),
        source: strOrNull(v.source, line, 'source'),
        event: event as Payload & { type: string },
      };
    }
    case 'snapshot':
      return {
        seq,
        t,
        kind: 'snapshot',
        actor: str(v.actor, line, 'actor'),
        status: str(v.status, line, 'status'),
        value: str(v.value, line, 'value'),
        details: payload(v.details, line, 'details'),
      };
    case 'telemetry':
      return {
        seq,
        t,
        kind: 'telemetry',
        channel: str(v.channel, line, 'channel'),
        data: payload(v.data, line, 'data'),
      };
    case 'invariant':
      return {
        seq,
        t,
        kind: 'invariant',
        check: str(v.check, line, 'check'),
        actor: strOrNull(v.actor, line, 'actor'),
        message: str(v.message, line, 'message'),
      };
    default:
      throw new RecordingError(line, `unknown kind ${JSON.stringify(String(v.kind)).slice(0, 40)}`);
  }
}

function parseHeader(v: unknown): RecordingHeader {
  if (!isObject(v) || v.format !== RECORDING_FORMAT) {
    throw new RecordingError(1, `not an ${RECORDING_FORMAT} file`);
  }
  if (v.version !== RECORDING_VERSION) {
    throw new RecordingError(
      1,
      `version ${String(v.version)} is not supported (this reads ${RECORDING_VERSION})`,
    );
  }
  if (!Array.isArray(v.actors) || !Array.isArray(v.initial)) {
    throw new RecordingError(1, 'actors and initial must be arrays');
  }
  if (v.actors.length > MAX_RECORDING_ENTRIES || v.initial.length > MAX_RECORDING_ENTRIES) {
    throw new RecordingError(1, 'too many actors');
  }
  const actors = v.actors.map((a: unknown): RecordedActor => {
    if (!isObject(a)) throw new RecordingError(1, 'an actor is an object');
    return {
      actor: str(a.actor, 1, 'actors[].actor'),
      chart: strOrNull(a.chart, 1, 'actors[].chart'),
      name: str(a.name, 1, 'actors[].name'),
      parent: strOrNull(a.parent, 1, 'actors[].parent'),
    };
  });
  const initial = v.initial.map((e: unknown) => {
    const entry = parseEntry(e, 1);
    if (entry.kind !== 'snapshot') throw new RecordingError(1, 'initial holds snapshots only');
    return entry;
  });
  return {
    format: RECORDING_FORMAT,
    version: RECORDING_VERSION,
    reason: str(v.reason, 1, 'reason'),
    timeOrigin: num(v.timeOrigin, 1, 'timeOrigin'),
    capacity: num(v.capacity, 1, 'capacity'),
    dropped: num(v.dropped, 1, 'dropped'),
    actors,
    initial,
  };
}

/** Reads an NDJSON recording; throws `RecordingError` (with the line) on anything else. */
export function parseRecording(text: string): Recording {
  if (typeof text !== 'string') throw new RecordingError(0, 'not text');
  if (text.length > MAX_RECORDING_BYTES) throw new RecordingError(0, 'file too large');
  const lines = text.split('\n');
  let header: RecordingHeader | undefined;
  const entries: RecordingEntry[] = [];
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] ?? '').trim();
    if (raw === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      throw new RecordingError(i + 1, 'not JSON');
    }
    if (header === undefined) {
      header = parseHeader(value);
      continue;
    }
    if (entries.length >= MAX_RECORDING_ENTRIES)
      throw new RecordingError(i + 1, 'too many entries');
    entries.push(parseEntry(value, i + 1));
  }
  if (header === undefined) throw new RecordingError(0, 'empty file');
  return { header, entries };
}
