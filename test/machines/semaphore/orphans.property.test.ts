// Orphans yield, model-based: random interleavings of request, release, gone, `orphaned`,
// `adopted` and "a preempted holder obeys" (releases, as its coordinator does) run against the
// real semaphore actor and against a small model written from the rule, and must agree after
// every command on who holds (with their marks), the queue order, and every `granted` and
// `preempted` message sent. Independently of the model, the rule itself is checked on the real
// table after every step: while more callers wait than free slots and outstanding preemptions
// will serve, no orphan is left unasked. Witnesses prove preemption and `adopted` were exercised.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Actor, createActor } from 'xstate';
import { semaphoreMachine } from '../../../src/machines/semaphore.js';

const CAPACITY = 2;
const QUEUE = 3;
const PARTICIPANTS = 6;

interface Holder {
  id: string;
  seq: number;
  yieldable: boolean;
  preempted: boolean;
}

/** The rule, stated plainly: FIFO grants; orphans asked youngest first, one per unserved waiter. */
class Model {
  seq = 0;
  generation = Array.from({ length: PARTICIPANTS }, () => 0);
  holders: Holder[] = [];
  queue: string[] = [];
  sent: string[] = [];
  preemptions = 0;
  adoptionsAfterPreemption = 0;

  id(k: number) {
    return `p${k}.${this.generation[k]}`;
  }
  holder(k: number) {
    return this.holders.find((h) => h.id === this.id(k));
  }
  private grant() {
    while (this.holders.length < CAPACITY && this.queue.length > 0) {
      const id = this.queue.shift()!;
      this.holders.push({ id, seq: this.seq++, yieldable: false, preempted: false });
      this.sent.push(`granted:${id}`);
    }
  }
  private preempt() {
    for (;;) {
      const free = Math.max(0, CAPACITY - this.holders.length);
      const asked = this.holders.filter((h) => h.preempted).length;
      if (this.queue.length <= free + asked) return;
      const candidates = this.holders.filter((h) => h.yieldable && !h.preempted);
      if (candidates.length === 0) return;
      const victim = candidates.reduce((a, b) => (b.seq > a.seq ? b : a));
      victim.preempted = true;
      this.preemptions++;
      this.sent.push(`preempted:${victim.id}`);
    }
  }
  request(k: number) {
    const id = this.id(k);
    if (this.holder(k) || this.queue.includes(id)) return;
    if (this.holders.length < CAPACITY && this.queue.length === 0) {
      this.holders.push({ id, seq: this.seq++, yieldable: false, preempted: false });
    } else if (this.queue.length < QUEUE) {
      this.queue.push(id);
      this.preempt();
    }
  }
  leave(k: number) {
    const id = this.id(k);
    const at = this.holders.findIndex((h) => h.id === id);
    if (at >= 0) {
      this.holders.splice(at, 1);
      this.grant();
    } else if (this.queue.includes(id)) {
      this.queue.splice(this.queue.indexOf(id), 1);
    }
    this.generation[k]!++;
  }
  orphaned(k: number) {
    const h = this.holder(k);
    if (!h) return;
    h.yieldable = true;
    this.preempt();
  }
  adopted(k: number) {
    const h = this.holder(k);
    if (!h) return;
    if (h.preempted) this.adoptionsAfterPreemption++;
    h.yieldable = false;
    h.preempted = false;
    this.preempt();
  }
}

interface Real {
  sem: Actor<typeof semaphoreMachine>;
  sent: string[];
}

function agree(model: Model, real: Real) {
  const { table } = real.sem.getSnapshot().context;
  const holders = [...table.holders.values()].map((s) => [s.id, s.yieldable, s.preempted]);
  const expected = model.holders.map((h) => [h.id, h.yieldable, h.preempted]);
  const byId = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]));
  expect(holders.sort(byId)).toEqual(expected.sort(byId));
  expect(table.queueOrder()).toEqual(model.queue);
  expect(real.sent).toEqual(model.sent);
  // The counters the O(1) check relies on are the marks, counted.
  const slots = [...table.holders.values()];
  expect(table.yieldable).toBe(slots.filter((s) => s.yieldable).length);
  expect(table.preempted).toBe(slots.filter((s) => s.preempted).length);
  // The rule, on the real table alone.
  const free = Math.max(0, CAPACITY - table.holders.size);
  if (table.depths[0]! > free + table.preempted) {
    expect(slots.filter((s) => s.yieldable && !s.preempted)).toEqual([]);
  }
}

type Cmd = fc.Command<Model, Real>;

function cmd(
  name: string,
  k: number,
  check: (m: Model) => boolean,
  send: (m: Model, r: Real) => void,
  apply: (m: Model) => void,
): Cmd {
  return {
    check: (m) => check(m as Model),
    run: (m, r) => {
      send(m, r);
      apply(m);
      agree(m, r);
    },
    toString: () => `${name}(p${k})`,
  };
}

const k = fc.integer({ min: 0, max: PARTICIPANTS - 1 });

/** A command that sends one `{ type, id }` event to the semaphore and applies it to the model. */
function plain(
  type: 'request' | 'release' | 'gone' | 'orphaned' | 'adopted',
  apply: (m: Model, p: number) => void,
) {
  return k.map((p) =>
    cmd(
      type,
      p,
      () => true,
      (m, r) => r.sem.send({ type, id: m.id(p) }),
      (m) => apply(m, p),
    ),
  );
}

const commands = fc.commands(
  [
    // `request` and `orphaned` are listed twice: drawn twice as often, so slots fill and
    // orphans exist in most runs (the witness below checks that preemption is reached).
    plain('request', (m, p) => m.request(p)),
    plain('request', (m, p) => m.request(p)),
    plain('release', (m, p) => m.leave(p)),
    plain('gone', (m, p) => m.leave(p)),
    plain('orphaned', (m, p) => m.orphaned(p)),
    plain('orphaned', (m, p) => m.orphaned(p)),
    plain('adopted', (m, p) => m.adopted(p)),
    // The coordinator's answer to `preempted`: cancel, then release.
    k.map((p) =>
      cmd(
        'obey',
        p,
        (m) => m.holder(p)?.preempted === true,
        (m, r) => r.sem.send({ type: 'release', id: m.id(p) }),
        (m) => m.leave(p),
      ),
    ),
  ],
  { maxCommands: 80, size: 'max' },
);

describe('orphans yield, against a model', () => {
  it('agrees on holders, marks, queue and every message; the rule holds after every step', () => {
    const witness = { runs: 0, preempted: 0, adoptedAfter: 0 };
    fc.assert(
      fc.property(commands, (cmds) => {
        let clock = 0;
        const sem = createActor(semaphoreMachine, {
          // Every reading of the clock is later than the last: grant order is time order.
          input: { capacity: CAPACITY, queueSize: QUEUE, now: () => clock++ },
        }).start();
        const real: Real = { sem, sent: [] };
        sem.on('notify', (e) => real.sent.push(`${e.message.type}:${e.to}`));
        const model = new Model();
        try {
          fc.modelRun(() => ({ model, real }), cmds);
        } finally {
          sem.stop();
        }
        witness.runs++;
        if (model.preemptions > 0) witness.preempted++;
        if (model.adoptionsAfterPreemption > 0) witness.adoptedAfter++;
      }),
      { numRuns: 300 },
    );
    expect(witness.preempted / witness.runs).toBeGreaterThan(0.3);
    expect(witness.adoptedAfter).toBeGreaterThan(0);
  });
});
