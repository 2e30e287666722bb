/**
 * Ranges while rendering, on the delivery chart alone: for any stream (random bytes in random
 * chunks, a backlog first, a completed render or not), any `Range` (closed, open, suffix, `-0`,
 * none) and a total known before the render or not, what the chart answers is checked against
 * RFC 9110 over the stream's real bytes:
 * - a 200 carries every byte, and a known length;
 * - a 206's body is exactly the stream's slice `[start, end]` its head names, its length is the
 *   slice's, and the head names the total whenever it was known when the head went out (`*`
 *   otherwise); a closed range the stream ended short of is torn down, never ended clean;
 * - a 416 names the stream's length, and only when the range lies past it;
 * - a range whose last byte came before `done` ends and leaves the coordinator at once.
 * The HTTP side (real ffmpeg, real sockets) is test/integration/rangeWhileRendering.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import {
  type DeliveryEmitted,
  type DeliveryEvent,
  type DeliveryRange,
  deliveryMachine,
  windowAgainst,
} from '../../../src/machines/delivery.js';

interface Run {
  readonly emitted: DeliveryEmitted[];
  readonly value: unknown;
}

function run(
  range: DeliveryRange,
  stream: Buffer,
  cuts: number[],
  backlogCut: number,
  complete: boolean,
  totalKnown: boolean,
): Run {
  const emitted: DeliveryEmitted[] = [];
  const actor = createActor(deliveryMachine, {
    input: {
      key: 'k',
      deadlineMs: 5_000,
      range,
      ...(totalKnown ? { totalBytes: stream.length } : {}),
    },
  });
  actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
  actor.start();
  // The adapter drops what the coordinator says after a final state; so does this driver.
  const send = (e: DeliveryEvent) => {
    if (actor.getSnapshot().status === 'active') actor.send(e);
  };
  const backlogEnd = complete ? stream.length : Math.min(backlogCut, stream.length);
  send({
    type: 'subscribed',
    cache: 'COALESCED',
    started: true,
    backlog: stream.subarray(0, backlogEnd),
    complete,
  });
  let at = backlogEnd;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    if (cut <= at || cut > stream.length) continue;
    send({ type: 'chunk', data: stream.subarray(at, cut) });
    at = cut;
  }
  if (at < stream.length) send({ type: 'chunk', data: stream.subarray(at) });
  send({ type: 'done', info: { exitStatus: 0, bytes: stream.length } });
  const value = actor.getSnapshot().value;
  actor.stop();
  return { emitted, value };
}

const rangeArb: fc.Arbitrary<DeliveryRange> = fc.oneof(
  fc.constant({ type: 'full' } as const),
  fc.constant({ type: 'none' } as const),
  fc.record({ type: fc.constant('suffix' as const), length: fc.integer({ min: 1, max: 80 }) }),
  fc.record({ type: fc.constant('from' as const), first: fc.integer({ min: 0, max: 80 }) }),
  fc
    .tuple(fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 80 }))
    .map(([a, n]) => ({ type: 'from' as const, first: a, last: a + n })),
);

describe('delivery chart: ranges while rendering', () => {
  it('answers every range with exactly the stream bytes its head names', () => {
    fc.assert(
      fc.property(
        rangeArb,
        fc.uint8Array({ minLength: 0, maxLength: 64 }),
        fc.array(fc.integer({ min: 0, max: 64 }), { maxLength: 8 }),
        fc.integer({ min: 0, max: 64 }),
        fc.boolean(),
        fc.boolean(),
        (range, bytes, cuts, backlogCut, complete, totalKnown) => {
          const stream = Buffer.from(bytes);
          const total = stream.length;
          const known = totalKnown ? windowAgainst(range, total) : undefined;
          if (totalKnown && known === null) {
            // The adapter answers this 416 before subscribing; the chart refuses the input.
            const actor = createActor(deliveryMachine, {
              input: { key: 'k', deadlineMs: 5_000, range, totalBytes: total },
            });
            expect(actor.getSnapshot().status).toBe('error');
            return;
          }
          const { emitted, value } = run(range, stream, cuts, backlogCut, complete, totalKnown);
          const types = emitted.map((e) => e.type);
          const refused = emitted.find((e) => e.type === 'refuseRange');
          if (refused) {
            // 416 only when nothing of the range exists, and it names the stream's length.
            expect(refused).toEqual({ type: 'refuseRange', size: total });
            expect(windowAgainst(range, total)).toBeNull();
            expect(types).not.toContain('head');
            expect(value).toBe('failed');
            return;
          }
          const head = emitted.find((e) => e.type === 'head');
          expect(head, JSON.stringify(types)).toBeDefined();
          if (head?.type !== 'head') return;
          expect(types.indexOf('head')).toBe(0);
          const body = Buffer.concat(emitted.flatMap((e) => (e.type === 'write' ? [e.data] : [])));
          const torn = types.includes('tearDown');
          if (head.range === undefined) {
            // A 200: the whole stream (a range ignored: `full`, or `0-` without a total).
            expect(body.equals(stream)).toBe(true);
            if (head.length !== undefined) expect(head.length).toBe(total);
            if (totalKnown || complete) expect(head.length).toBe(total);
            expect(torn).toBe(false);
            return;
          }
          const { start, end } = head.range;
          expect(head.length).toBe(end - start + 1);
          if (head.range.total !== null) expect(head.range.total).toBe(total);
          if (totalKnown || complete) {
            expect(head.range.total).toBe(total);
            expect(windowAgainst(range, total)).toEqual({ start, end, partial: true });
          }
          if (end > total - 1) {
            // A closed range past an end the head could not know: torn, never a clean end.
            expect(head.range.total).toBeNull();
            expect(torn).toBe(true);
            expect(types).not.toContain('end');
            expect(body.equals(stream.subarray(start))).toBe(true);
            return;
          }
          expect(torn).toBe(false);
          expect(body.equals(stream.subarray(start, end + 1))).toBe(true);
          expect(types.at(-1) === 'leave' || types.at(-1) === 'end').toBe(true);
          expect(value).toBe('done');
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it('a closed range with no total waits for its first byte, then streams the rest live', () => {
    const emitted: DeliveryEmitted[] = [];
    const actor = createActor(deliveryMachine, {
      input: { key: 'k', deadlineMs: 5_000, range: { type: 'from', first: 4, last: 9 } },
    });
    actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
    actor.start();
    actor.send({ type: 'subscribed', cache: 'MISS', started: true, backlog: Buffer.from('abc') });
    expect(actor.getSnapshot().value).toBe('seeking');
    expect(emitted).toEqual([]);
    actor.send({ type: 'chunk', data: Buffer.from('defg') });
    expect(actor.getSnapshot().value).toBe('streaming');
    expect(emitted[0]).toEqual({
      type: 'head',
      cache: 'MISS',
      range: { start: 4, end: 9, total: null },
      length: 6,
    });
    actor.send({ type: 'chunk', data: Buffer.from('hijklmn') });
    const writes = emitted.flatMap((e) => (e.type === 'write' ? [e.data.toString()] : []));
    expect(writes.join('')).toBe('efghij');
    // The range is written: the response ends and the coordinator is left before its `done`.
    expect(emitted.slice(-2).map((e) => e.type)).toEqual(['end', 'leave']);
    expect(actor.getSnapshot().value).toBe('done');
  });

  it('an open range with no total answers what is rendered when its first byte exists', () => {
    const emitted: DeliveryEmitted[] = [];
    const actor = createActor(deliveryMachine, {
      input: { key: 'k', deadlineMs: 5_000, range: { type: 'from', first: 2 } },
    });
    actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
    actor.start();
    actor.send({ type: 'subscribed', cache: 'MISS', started: true, backlog: Buffer.alloc(0) });
    actor.send({ type: 'chunk', data: Buffer.from('abcdef') });
    expect(emitted[0]).toEqual({
      type: 'head',
      cache: 'MISS',
      range: { start: 2, end: 5, total: null },
      length: 4,
    });
    expect(actor.getSnapshot().value).toBe('done');
  });

  it('a short exact-length render before the head is a render failure, not a 200', () => {
    const emitted: DeliveryEmitted[] = [];
    const actor = createActor(deliveryMachine, {
      input: { key: 'k', deadlineMs: 5_000, totalBytes: 10, range: { type: 'from', first: 8 } },
    });
    actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
    actor.start();
    actor.send({ type: 'subscribed', cache: 'MISS', started: true, backlog: Buffer.from('abc') });
    actor.send({ type: 'done', info: { exitStatus: 0, bytes: 3 } });
    expect(emitted.map((e) => e.type)).toEqual(['refuse']);
    expect(actor.getSnapshot().value).toBe('failed');
  });

  it('a stream that runs past a total known before the render is never ended clean', () => {
    const drive = (range: DeliveryRange, chunks: number[]) => {
      const emitted: DeliveryEmitted[] = [];
      const actor = createActor(deliveryMachine, {
        input: { key: 'k', deadlineMs: 5_000, totalBytes: 10, range },
      });
      actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
      actor.start();
      actor.send({ type: 'subscribed', cache: 'MISS', started: true, backlog: Buffer.alloc(0) });
      for (const n of chunks) {
        if (actor.getSnapshot().status === 'active') {
          actor.send({ type: 'chunk', data: Buffer.alloc(n) });
        }
      }
      expect(actor.getSnapshot().value).toBe('failed');
      return emitted.map((e) => e.type);
    };
    // After the head: a torn stream, whether the overrun comes mid-way or after the last byte.
    for (const split of [2, 10]) {
      const types = drive({ type: 'full' }, [split, 12 - split]);
      expect(types).not.toContain('end');
      expect(types.slice(-2)).toEqual(['leave', 'tearDown']);
    }
    // Before the head (the window's first byte is in the overrunning chunk): an error answer.
    expect(drive({ type: 'from', first: 8 }, [12])).toEqual(['leave', 'refuse']);
  });
});
