/**
 * The flight recorder over real actors (a real semaphore, a small coordinator-shaped machine):
 * the ring is bounded and ordered and its overwritten snapshots become the starting state; each
 * invariant check trips on the step that breaks it (and only then) and saves a file that reads
 * back; nothing from a payload can reach the prototype; an actor that ended leaves with its
 * last entry. About 0.3 s.
 */
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, createMachine, type InspectionEvent } from 'xstate';
import { parseRecording } from '../../src/core/recording.js';
import { createFlightRecorder, type FlightRecorder } from '../../src/debug/recorder.js';
import { semaphoreMachine } from '../../src/machines/semaphore.js';

let recorder: FlightRecorder | undefined;
afterEach(() => recorder?.close());

const dirOf = () => mkdtemp(join(tmpdir(), 'ap-recorder-'));

function semaphore(
  observer: (e: InspectionEvent) => void,
  limits: () => { capacity: number; queueSize: number; renderTimeoutS: number },
) {
  return createActor(semaphoreMachine, { input: { limits }, inspect: observer }).start();
}

describe('the flight recorder', () => {
  it('keeps the newest entries in order, and the state before them', async () => {
    recorder = createFlightRecorder({ capacity: 12, dir: await dirOf() });
    const sem = semaphore(recorder.observer, () => ({
      capacity: 1,
      queueSize: 1,
      renderTimeoutS: 30,
    }));
    recorder.name(sem, 'semaphore');
    for (let i = 0; i < 10; i++) {
      sem.send({ type: 'request', id: `r${i}` } as never);
      sem.send({ type: 'release', id: `r${i}` } as never);
    }
    const rec = recorder.recording('test');
    expect(rec.entries).toHaveLength(12);
    expect(rec.header.dropped).toBe(recorder.seen - 12);
    const seqs = rec.entries.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs.at(-1)).toBe(recorder.seen);
    expect(rec.header.actors).toEqual([
      { actor: 'a1', chart: 'semaphore', name: 'semaphore', parent: null },
    ]);
    // the semaphore's last overwritten snapshot is where a replay starts
    expect(rec.header.initial).toHaveLength(1);
    expect(rec.header.initial[0]!.seq).toBeLessThan(seqs[0]!);
    const last = rec.entries.filter((e) => e.kind === 'snapshot').at(-1);
    expect(last).toMatchObject({
      kind: 'snapshot',
      status: 'active',
      details: { held: 0, capacity: 1 },
    });
    const requests = rec.entries.filter((e) => e.kind === 'event' && e.event.type === 'request');
    expect(requests.at(-1)).toMatchObject({ actor: 'a1', source: null, event: { id: 'r9' } });
    sem.stop();
  });

  it('trips actor_error on the step a machine throws, and saves what led to it', async () => {
    const dir = await dirOf();
    const saved: string[] = [];
    recorder = createFlightRecorder({ capacity: 64, dir, onSaved: (p) => saved.push(p) });
    let broken = false;
    const sem = semaphore(recorder.observer, () => {
      if (broken) throw new Error('config reload produced no limits');
      return { capacity: 1, queueSize: 1, renderTimeoutS: 30 };
    });
    // the proxy's wiring: the system's fatal path tells the recorder
    sem.subscribe({ error: (e) => recorder?.fault('semaphore', e) });
    recorder.name(sem, 'semaphore');
    sem.send({ type: 'request', id: 'ok' } as never);
    expect(recorder.trips.size).toBe(0);
    broken = true;
    sem.send({ type: 'request', id: 'boom' } as never);
    expect(recorder.trips.get('actor_error')).toBe(1);
    expect(saved).toHaveLength(1);
    expect(await readdir(dir)).toEqual([
      expect.stringMatching(/^audio-proxy-recording-.*-invariant-actor_error\.ndjson$/),
    ]);
    const rec = parseRecording(await readFile(saved[0]!, 'utf8'));
    expect(rec.header.reason).toBe('invariant:actor_error');
    const trip = rec.entries.at(-1)!;
    expect(trip).toMatchObject({ kind: 'invariant', check: 'actor_error', actor: 'a1' });
    expect(trip.kind === 'invariant' && trip.message).toContain('config reload produced no limits');
    expect(rec.entries.at(-2)).toMatchObject({ kind: 'snapshot', status: 'error' });
    expect(rec.entries.at(-3)).toMatchObject({
      kind: 'event',
      event: { type: 'request', id: 'boom' },
    });
  });

  it('trips slot_after_render when a finished coordinator still holds its slot, not when it let go', async () => {
    const r2 = createFlightRecorder({
      capacity: 256,
      dir: await dirOf(),
      slotGraceMs: 30,
      semaphore: () => sem2,
    });
    recorder = r2;
    const sem2 = semaphore(r2.observer, () => ({ capacity: 4, queueSize: 4, renderTimeoutS: 30 }));
    // the coordinator's shape: a key, a slot id, and a final state (this one forgets to release)
    const coordinator = (slotId: string) =>
      createActor(
        createMachine({
          id: 'renderCoordinator',
          context: { key: `key-${slotId}`, slotId },
          initial: 'rendering',
          states: { rendering: { on: { finish: 'completed' } }, completed: { type: 'final' } },
        }),
        { inspect: r2.observer },
      ).start();
    const leaky = coordinator('render-1');
    const tidy = coordinator('render-2');
    sem2.send({ type: 'request', id: 'render-1' } as never);
    sem2.send({ type: 'request', id: 'render-2' } as never);
    leaky.send({ type: 'finish' });
    tidy.send({ type: 'finish' });
    sem2.send({ type: 'release', id: 'render-2' } as never);
    await new Promise((r) => setTimeout(r, 700));
    expect(r2.trips.get('slot_after_render')).toBe(1);
    const trip = r2.recording('t').entries.find((e) => e.kind === 'invariant');
    expect(trip).toMatchObject({ check: 'slot_after_render' });
    expect(trip?.kind === 'invariant' && trip.message).toContain('render-1');
    sem2.stop();
  });

  it('trips queue_bound when queued rises past the bound, not when the bound is lowered', async () => {
    recorder = createFlightRecorder({ capacity: 64, dir: await dirOf() });
    let queueSize = 2;
    const sem = semaphore(recorder.observer, () => ({
      capacity: 1,
      queueSize,
      renderTimeoutS: 30,
    }));
    for (const id of ['h', 'w1', 'w2']) sem.send({ type: 'request', id } as never);
    queueSize = 1; // an operator lowered the bound: two waiters stay, none is admitted
    sem.send({ type: 'request', id: 'w3' } as never);
    expect(recorder.trips.size).toBe(0);
    // A semaphore that admits past its bound (the bug the check is for), as the inspection API
    // would report it: the real actor, a snapshot whose table holds one waiter too many.
    const real = sem.getSnapshot();
    // A copy of its table with a third waiter, admitted under a bound the table was not given.
    const table = real.context.table.clone();
    table.enqueue('w3', 0, 0, { capacity: 1, queueSize: 99 });
    recorder.observer({
      type: '@xstate.snapshot',
      actorRef: sem,
      rootId: sem.sessionId,
      event: { type: 'request' },
      snapshot: {
        ...real,
        context: { ...real.context, table },
      },
    } as unknown as InspectionEvent);
    expect(recorder.trips.get('queue_bound')).toBe(1);
    sem.stop();
  });

  it('copies plain, bounded payloads and never lets one reach the prototype', async () => {
    recorder = createFlightRecorder({
      capacity: 16,
      dir: await dirOf(),
      scrub: (s) => s.replace('/srv/secret', '<root>'),
    });
    const m = createActor(createMachine({ id: 'x', on: { '*': {} } }), {
      inspect: recorder.observer,
    }).start();
    m.send(
      JSON.parse(
        '{"type":"hi","__proto__":{"polluted":1},"path":"/srv/secret/a.wav","buf":{"deep":{"deeper":1}},"long":"' +
          'y'.repeat(5000) +
          '"}',
      ),
    );
    const e = recorder
      .recording('t')
      .entries.find((x) => x.kind === 'event' && x.event.type === 'hi');
    expect(e?.kind === 'event' && e.event.path).toBe('<root>/a.wav');
    expect(e?.kind === 'event' && String(e.event.long).length).toBeLessThanOrEqual(200);
    expect(e?.kind === 'event' && 'buf.deep.deeper' in e.event).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    m.stop();
  });

  it('forgets an ended actor once no entry names it', async () => {
    recorder = createFlightRecorder({ capacity: 8, dir: await dirOf() });
    const short = createActor(
      createMachine({
        id: 'renderCoordinator',
        initial: 'a',
        states: { a: { on: { go: 'b' } }, b: { type: 'final' } },
      }),
      { inspect: recorder.observer },
    ).start();
    short.send({ type: 'go' });
    const sem = semaphore(recorder.observer, () => ({
      capacity: 1,
      queueSize: 1,
      renderTimeoutS: 30,
    }));
    for (let i = 0; i < 10; i++) sem.send({ type: 'stats', id: 'x' } as never);
    const rec = recorder.recording('t');
    expect(rec.header.actors.map((a) => a.chart)).toEqual(['semaphore']);
    sem.stop();
  });
});
