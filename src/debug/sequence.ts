/**
 * Sequence diagrams from a recording: for one request, one cache key or one actor, the messages
 * between the actors involved, in the order they were delivered, and their Mermaid text
 * (`sequenceDiagram`). The replay page and the live view draw the same data; the docs'
 * diagrams are generated from real recordings by `scripts/gen-concurrency-docs.ts`.
 *
 * ## Who is involved
 * - **A key**: its render coordinators (named `renderCoordinator:<key>`, or started with that
 *   key), every delivery started for that key (one per request: the coalesced crowd), their
 *   descendants (the render, its worker), and the semaphore's traffic for the coordinators'
 *   slot ids.
 * - **A request** (`delivery:<id>`): the same for its key, with only that request's delivery.
 * - **An actor**: it and its descendants.
 *
 * ## Who sent it
 * An event the inspection API saw without a sender came from outside the actors: a subscriber
 * message (`rendering`, `chunk`, `done`, `error`) into a delivery was the coordinator's
 * broadcast, so it is drawn from the coordinator of that key; anything else from `HTTP` (the
 * request's handler and the services it calls on the request's behalf).
 *
 * ## Invariants
 * - **Pure**: the same recording and filter give the same diagram, byte for byte.
 * - **Bounded**: consecutive identical arrows are one arrow `×N`; at most `MAX_MESSAGES` are
 *   kept (the rest are counted in `omitted`), so a long stream cannot make a huge diagram.
 * - **Mermaid-safe**: labels carry only characters Mermaid reads as text.
 */
import type { EventEntry, Recording, RecordingEntry } from '../core/recording.js';

/** Arrows kept per diagram. */
export const MAX_MESSAGES = 400;
/** The participant standing for the world outside the actors. */
export const OUTSIDE = 'http';
/** The semaphore's telemetry channels' common prefix (`telemetry/channels.ts`). */
const SEMAPHORE_CHANNEL = 'audio_proxy.semaphore.';

export interface SequenceFilter {
  readonly key?: string | undefined;
  readonly request?: string | undefined;
  readonly actor?: string | undefined;
}

export interface Participant {
  /** The recording's actor id, or `http`. */
  readonly id: string;
  readonly label: string;
}

export interface SequenceMessage {
  /** The entry's `seq` (the first, when collapsed). */
  readonly seq: number;
  readonly t: number;
  readonly from: string;
  readonly to: string;
  readonly label: string;
  /** How many identical arrows in a row this one stands for. */
  readonly count: number;
  /** A note over `from` (a telemetry message of a drawn actor), not an arrow. */
  readonly note?: boolean;
}

export interface Sequence {
  /** Every actor the filter takes in (for stepping through its entries). */
  readonly involved: readonly string[];
  readonly participants: readonly Participant[];
  readonly messages: readonly SequenceMessage[];
  /** Arrows dropped past `MAX_MESSAGES`. */
  readonly omitted: number;
}

const SUBSCRIBER_MESSAGES = new Set(['rendering', 'chunk', 'done', 'error']);
const ROLE_ORDER = [
  'http',
  'delivery',
  'waitingRoom',
  'renderCoordinator',
  'semaphore',
  'render',
  'worker',
  'tee',
];

/** What a reader calls an event: `start`, `done(render)`, `slot.granted`. */
export function messageLabel(event: EventEntry['event']): string {
  const type = event.type;
  let label = type;
  if (type === 'xstate.init') label = 'start';
  else if (type.startsWith('xstate.done.actor.')) label = `done(${lastPart(type)})`;
  else if (type.startsWith('xstate.error.actor.')) label = `error(${lastPart(type)})`;
  else if (type.startsWith('xstate.after.')) label = 'timeout';
  const id = typeof event.id === 'string' ? event.id : undefined;
  return id !== undefined && label !== 'start' ? `${label} ${id}` : label;
}

function lastPart(type: string): string {
  const rest = type.split('.').slice(3).join('.');
  return rest.split('.').at(-1) ?? rest;
}

export function sequenceOf(recording: Recording, filter: SequenceFilter): Sequence {
  const { actors } = recording.header;
  const byId = new Map(actors.map((a) => [a.actor, a]));
  const entries = recording.entries;
  const inits = new Map<string, EventEntry['event']>();
  for (const e of entries) {
    if (e.kind === 'event' && e.event.type === 'xstate.init') inits.set(e.actor, e.event);
  }
  const keyOf = (id: string): string | undefined => {
    const a = byId.get(id);
    const init = inits.get(id);
    if (typeof init?.['input.key'] === 'string') return init['input.key'];
    if (a?.chart === 'renderCoordinator' && a.name.startsWith('renderCoordinator:')) {
      return a.name.slice('renderCoordinator:'.length);
    }
    return undefined;
  };

  const involved = new Set<string>();
  let key = filter.key;
  let onlyDelivery: string | undefined;
  if (filter.request !== undefined) {
    const delivery = actors.find((a) => a.name === `delivery:${filter.request}`);
    if (delivery) {
      involved.add(delivery.actor);
      onlyDelivery = delivery.actor;
      key ??= keyOf(delivery.actor);
    }
  }
  if (key !== undefined) {
    for (const a of actors) {
      if (keyOf(a.actor) !== key) continue;
      if (a.chart === 'delivery' && onlyDelivery !== undefined && a.actor !== onlyDelivery)
        continue;
      if (a.chart === 'renderCoordinator' || a.chart === 'delivery') involved.add(a.actor);
    }
  }
  if (filter.actor !== undefined && byId.has(filter.actor)) involved.add(filter.actor);
  // descendants
  let grew = true;
  while (grew) {
    grew = false;
    for (const a of actors) {
      if (a.parent !== null && involved.has(a.parent) && !involved.has(a.actor)) {
        involved.add(a.actor);
        grew = true;
      }
    }
  }
  const coordinators = [...involved].filter((id) => byId.get(id)?.chart === 'renderCoordinator');
  const slotIds = new Set<string>();
  for (const c of coordinators) {
    const slot = inits.get(c)?.['input.slotId'];
    if (typeof slot === 'string') slotIds.add(slot);
  }
  const coordinatorOfKey = (k: string | undefined) =>
    coordinators.find((c) => k !== undefined && keyOf(c) === k);

  const raw: (Omit<SequenceMessage, 'count'> & { note?: boolean })[] = [];
  const include = (e: RecordingEntry): e is EventEntry => {
    if (e.kind !== 'event') return false;
    if (e.source === e.actor) return false; // an actor's own promise settling: not a message
    const id = e.event.id;
    if (onlyDelivery !== undefined && typeof id === 'string' && id !== filter.request) {
      if (e.event.type === 'join' || e.event.type === 'unsubscribe' || e.event.type === 'gone') {
        return false; // another request of the crowd
      }
    }
    if (involved.has(e.actor) || (e.source !== null && involved.has(e.source))) return true;
    const target = byId.get(e.actor);
    return (
      target?.chart === 'semaphore' && typeof e.event.id === 'string' && slotIds.has(e.event.id)
    );
  };
  // Telemetry of a semaphore drawn for itself (the actor filter) becomes notes over it.
  const semaphore = [...involved].find((id) => byId.get(id)?.chart === 'semaphore');
  // A promise or callback actor invoked again and again (a pool's `start`) is one lifeline.
  const lane = (id: string): string => {
    const a = byId.get(id);
    return a && a.chart === null ? `lane:${a.name}` : id;
  };
  for (const e of entries) {
    if (
      e.kind === 'telemetry' &&
      semaphore !== undefined &&
      e.channel.startsWith(SEMAPHORE_CHANNEL)
    ) {
      const what = e.channel.slice(SEMAPHORE_CHANNEL.length);
      const cls = typeof e.data.class === 'string' ? ` (${e.data.class})` : '';
      const label = `${what}${cls}: held ${e.data.held ?? '?'}, queued ${e.data.queued ?? '?'}`;
      raw.push({ seq: e.seq, t: e.t, from: semaphore, to: semaphore, label, note: true });
      continue;
    }
    if (!include(e)) continue;
    let from = e.source ?? OUTSIDE;
    if (e.source === null && SUBSCRIBER_MESSAGES.has(e.event.type)) {
      const target = byId.get(e.actor);
      if (target?.chart === 'delivery') from = coordinatorOfKey(keyOf(e.actor)) ?? OUTSIDE;
    }
    raw.push({
      seq: e.seq,
      t: e.t,
      from: lane(from),
      to: lane(e.actor),
      label: messageLabel(e.event),
    });
  }

  const messages: SequenceMessage[] = [];
  let omitted = 0;
  for (const m of raw) {
    const last = messages.at(-1);
    if (omitted > 0) {
      omitted++; // past the bound, nothing is merged into the last arrow out of order
      continue;
    }
    if (last && last.from === m.from && last.to === m.to && last.label === m.label) {
      messages[messages.length - 1] = { ...last, count: last.count + 1 };
      continue;
    }
    if (messages.length >= MAX_MESSAGES) {
      omitted++;
      continue;
    }
    messages.push({ ...m, count: 1 });
  }

  const used = new Set<string>();
  for (const m of messages) used.add(m.from).add(m.to);
  const laneNames = new Map<string, string>();
  for (const a of actors) if (a.chart === null) laneNames.set(`lane:${a.name}`, a.name);
  const roleOf = (id: string): string => {
    if (id === OUTSIDE) return 'http';
    const laneName = laneNames.get(id);
    if (laneName !== undefined) return laneName.endsWith('worker') ? 'worker' : 'other';
    const a = byId.get(id);
    if (a?.chart) return a.chart;
    return a?.name.endsWith('worker') ? 'worker' : 'other';
  };
  const rank = (id: string) => {
    const i = ROLE_ORDER.indexOf(roleOf(id));
    return i === -1 ? ROLE_ORDER.length : i;
  };
  const firstSeen = new Map<string, number>();
  messages.forEach((m, i) => {
    if (!firstSeen.has(m.from)) firstSeen.set(m.from, i);
    if (!firstSeen.has(m.to)) firstSeen.set(m.to, i);
  });
  const participants = [...used]
    .sort((a, b) => rank(a) - rank(b) || (firstSeen.get(a) ?? 0) - (firstSeen.get(b) ?? 0))
    .map(
      (id): Participant => ({
        id,
        label: participantLabel(id, roleOf(id), laneNames.get(id) ?? byId.get(id)?.name),
      }),
    );
  return { involved: [...involved], participants, messages, omitted };
}

function participantLabel(id: string, role: string, name: string | undefined): string {
  if (id === OUTSIDE) return 'HTTP';
  if (role === 'delivery' && name?.startsWith('delivery:')) return `delivery ${name.slice(9)}`;
  if (role === 'renderCoordinator') return 'coordinator';
  if (role === 'processSupervisor' && name) return `supervisor ${name}`;
  if (role === 'worker') return 'worker';
  if (role === 'other' && name) return name.split(' › ').at(-1) ?? name;
  return role;
}

/** Characters Mermaid reads as text in a label or an alias. */
function safe(s: string): string {
  return s
    .replace(/[^\w .:()×+/-]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The sequence as Mermaid `sequenceDiagram` text. */
export function toMermaid(sequence: Sequence): string {
  const lines = ['sequenceDiagram'];
  const alias = new Map<string, string>();
  const taken = new Map<string, number>();
  for (const p of sequence.participants) {
    const base = safe(p.label) || 'actor';
    const n = (taken.get(base) ?? 0) + 1;
    taken.set(base, n);
    const label = n > 1 ? `${base} ${n}` : base;
    const a = `P${alias.size + 1}`;
    alias.set(p.id, a);
    lines.push(`  participant ${a} as ${label}`);
  }
  for (const m of sequence.messages) {
    const label = safe(m.count > 1 ? `${m.label} ×${m.count}` : m.label) || 'message';
    if (m.note) lines.push(`  Note over ${alias.get(m.from)}: ${label}`);
    else lines.push(`  ${alias.get(m.from)}->>${alias.get(m.to)}: ${label}`);
  }
  if (sequence.omitted > 0) {
    lines.push(
      `  Note over ${alias.get(sequence.participants[0]?.id ?? '') ?? 'P1'}: ${sequence.omitted} more`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The most characters a filter value may have (a key is 64 hex digits; a request id far less). */
const MAX_FILTER_CHARS = 300;

/**
 * What `GET …/sequence?request=&key=&actor=` answers: the sequence, its Mermaid text and the
 * recording's actors (for the page's actor filter). A value over `MAX_FILTER_CHARS` is ignored.
 */
export function sequenceJson(recording: Recording, query: URLSearchParams): string {
  const pick = (name: string) => {
    const v = query.get(name)?.trim();
    return v && v.length <= MAX_FILTER_CHARS ? v : undefined;
  };
  const filter = { request: pick('request'), key: pick('key'), actor: pick('actor') };
  const sequence = sequenceOf(recording, filter);
  const actors = recording.header.actors.map((a) => ({ actor: a.actor, name: a.name }));
  return JSON.stringify({ ...sequence, mermaid: toMermaid(sequence), actors });
}
