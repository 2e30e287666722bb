// Model-based property tests: random interleavings of request (via `acquire` with a class and
// a timeout), release, `gone` and the passage of time (which fires timeouts) run against the
// real semaphore actor and against a small model, and must agree after every command on every
// acquire outcome (granted / queued-then-granted / displaced / timeout / queue_full with its
// Retry-After), on who holds and the queue order. Traffic naming no class is checked against a
// plain FIFO model; mixed classes against a class-aware one. Telemetry proves capacity and the
// queue bound are never exceeded, even inside a step; witnesses prove the queue was exercised.
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type Actor, createActor } from 'xstate';
import {
  ADMISSION_CLASSES,
  type AdmissionClass,
  DEFAULT_HOLD_MS,
  HOLD_SAMPLES,
  type SemaphoreTelemetry,
  semaphoreMachine,
} from '../../../src/machines/semaphore.js';
import { type AcquireOutcome, acquire, release } from '../../../src/services/semaphoreClient.js';

const CAPACITY = 2;
const QUEUE = 3;
const PARTICIPANTS = 7;
const RENDER_TIMEOUT_S = 300;

// --- the models -------------------------------------------------------------------------------

type Outcome = { id: string; type: string; retryAfterS?: number };
type Who = { k: number; id: string; rank: number; seq: number; deadline: number; since: number };

/**
 * What both models share: participants, time, hold samples, timeouts. The two differ only in
 * how the queue is ordered (`next`) and who may be displaced (`victim`).
 */
abstract class Model {
  clock = 0;
  seq = 0;
  holds: number[] = [];
  generation = Array.from({ length: PARTICIPANTS }, () => 0);
  holders: Who[] = [];
  queue: Who[] = [];
  /** Waiters that went away while their `acquire` still runs: they time out on their own. */
  ghosts: Who[] = [];
  settled: Outcome[] = [];
  maxDepth = 0;
  displacements = 0;

  abstract next(): Who | undefined;
  abstract victim(rank: number): Who | undefined;

  id(k: number) {
    return `p${k}.${this.generation[k]}`;
  }
  state(k: number): 'idle' | 'holding' | 'waiting' {
    const id = this.id(k);
    if (this.holders.some((w) => w.id === id)) return 'holding';
    if (this.queue.some((w) => w.id === id)) return 'waiting';
    return 'idle';
  }
  retryAfter(): number {
    const recent = this.holds.slice(-HOLD_SAMPLES);
    const mean = recent.length
      ? recent.reduce((a, b) => a + b, 0) / recent.length
      : DEFAULT_HOLD_MS;
    const s = Math.ceil((mean * (this.queue.length + 1)) / CAPACITY / 1_000);
    return Math.min(Math.max(s, 1), RENDER_TIMEOUT_S);
  }
  private settle(id: string, type: string, retryAfterS?: number) {
    this.settled.push(retryAfterS === undefined ? { id, type } : { id, type, retryAfterS });
  }
  private grantWhileFree() {
    while (this.holders.length < CAPACITY) {
      const w = this.next();
      if (!w) return;
      this.queue.splice(this.queue.indexOf(w), 1);
      this.holders.push({ ...w, since: this.clock });
      this.settle(w.id, 'granted');
    }
  }
  request(k: number, rank: number, timeout: number) {
    const id = this.id(k);
    if (this.state(k) !== 'idle') return this.settle(id, 'already_held');
    const who = { k, id, rank, seq: this.seq++, deadline: this.clock + timeout, since: this.clock };
    if (this.holders.length < CAPACITY) {
      this.holders.push(who);
      return this.settle(id, 'granted');
    }
    if (this.queue.length < QUEUE) {
      this.queue.push(who);
    } else {
      const victim = this.victim(rank);
      if (!victim) return this.settle(id, 'queue_full', this.retryAfter());
      this.queue.splice(this.queue.indexOf(victim), 1);
      this.displacements++;
      this.settle(victim.id, 'displaced', this.retryAfter());
      this.queue.push(who);
    }
    this.maxDepth = Math.max(this.maxDepth, this.queue.length);
  }
  release(k: number) {
    const id = this.id(k);
    const at = this.holders.findIndex((w) => w.id === id);
    this.holds.push(this.clock - this.holders[at]!.since);
    this.holders.splice(at, 1);
    this.grantWhileFree();
  }
  gone(k: number) {
    const id = this.id(k);
    const waiting = this.queue.find((w) => w.id === id);
    if (waiting) {
      this.queue.splice(this.queue.indexOf(waiting), 1);
      this.ghosts.push(waiting);
    } else {
      this.release(k);
    }
    this.generation[k]!++;
  }
  tick(ms: number) {
    this.clock += ms;
    const due = (w: Who) => w.deadline <= this.clock;
    for (const w of [...this.queue.filter(due), ...this.ghosts.filter(due)]) {
      this.settle(w.id, 'timeout');
    }
    this.queue = this.queue.filter((w) => !due(w));
    this.ghosts = this.ghosts.filter((w) => !due(w));
  }
}

/** No classes: one array, served from the front, nobody displaced. */
class FifoModel extends Model {
  next() {
    return this.queue[0];
  }
  victim() {
    return undefined;
  }
}

/** Classes: the oldest of the best rank is served; the newest of the worst evictable rank below the arrival is displaced. */
class ClassModel extends Model {
  next() {
    let best: Who | undefined;
    for (const w of this.queue) if (!best || w.rank < best.rank) best = w;
    return best;
  }
  victim(rank: number) {
    const below = this.queue.filter((w) => w.rank > rank && w.rank > 0);
    const worst = Math.max(...below.map((w) => w.rank));
    return below.filter((w) => w.rank === worst).at(-1);
  }
}

// --- the real system --------------------------------------------------------------------------

interface Real {
  sem: Actor<typeof semaphoreMachine>;
  settled: Outcome[];
  telemetry: SemaphoreTelemetry[];
}

async function flush() {
  for (let i = 0; i < 30; i++) await Promise.resolve();
}

function record(real: Real, id: string, outcome: AcquireOutcome) {
  real.settled.push(
    'retryAfterS' in outcome
      ? { id, type: outcome.type, retryAfterS: outcome.retryAfterS }
      : { id, type: outcome.type },
  );
}

const byId = (xs: Outcome[]) =>
  [...xs].sort((a, b) => (a.id + a.type).localeCompare(b.id + b.type));

/** After every command: same outcomes, same holders, same queue order, bounds respected. */
function agree(model: Model, real: Real) {
  expect(byId(real.settled)).toEqual(byId(model.settled));
  real.settled.length = 0;
  model.settled.length = 0;
  const table = real.sem.getSnapshot().context.table;
  expect([...table.holders.keys()].sort()).toEqual(model.holders.map((w) => w.id).sort());
  expect(table.queueOrder()).toEqual(
    [...model.queue].sort((a, b) => a.rank - b.rank || a.seq - b.seq).map((w) => w.id),
  );
  for (const t of real.telemetry) {
    expect(t.measurements.held).toBeLessThanOrEqual(CAPACITY);
    expect(t.measurements.queued).toBeLessThanOrEqual(QUEUE);
  }
  real.telemetry.length = 0;
}

class RequestCmd implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly k: number,
    readonly cls: AdmissionClass | undefined,
    readonly timeout: number,
  ) {}
  check() {
    return true;
  }
  async run(model: Model, real: Real) {
    const id = model.id(this.k);
    const options =
      this.cls === undefined
        ? { timeout: this.timeout }
        : { timeout: this.timeout, class: this.cls };
    void acquire(real.sem, id, options).then((outcome) => record(real, id, outcome));
    model.request(
      this.k,
      this.cls === undefined ? 0 : ADMISSION_CLASSES.indexOf(this.cls),
      this.timeout,
    );
    await flush();
    agree(model, real);
  }
  toString() {
    return `request(p${this.k}, ${this.cls ?? '-'}, ${this.timeout})`;
  }
}

class ReleaseCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check(model: Readonly<Model>) {
    return (model as Model).state(this.k) === 'holding';
  }
  async run(model: Model, real: Real) {
    await release(real.sem, model.id(this.k));
    model.release(this.k);
    await flush();
    agree(model, real);
  }
  toString() {
    return `release(p${this.k})`;
  }
}

class GoneCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check(model: Readonly<Model>) {
    return (model as Model).state(this.k) !== 'idle';
  }
  async run(model: Model, real: Real) {
    real.sem.send({ type: 'gone', id: model.id(this.k), reason: 'test' });
    model.gone(this.k);
    await flush();
    agree(model, real);
  }
  toString() {
    return `gone(p${this.k})`;
  }
}

class TickCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check() {
    return true;
  }
  async run(model: Model, real: Real) {
    await vi.advanceTimersByTimeAsync(this.ms);
    model.tick(this.ms);
    await flush();
    agree(model, real);
  }
  toString() {
    return `tick(${this.ms})`;
  }
}

function commands(classes: fc.Arbitrary<AdmissionClass | undefined>) {
  const k = fc.integer({ min: 0, max: PARTICIPANTS - 1 });
  const timeout = fc.constantFrom(30, 250, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
  return fc.commands(
    [
      fc.tuple(k, classes, timeout).map(([p, c, t]) => new RequestCmd(p, c, t)),
      fc.tuple(k, classes, timeout).map(([p, c, t]) => new RequestCmd(p, c, t)),
      fc.tuple(k, classes, timeout).map(([p, c, t]) => new RequestCmd(p, c, t)),
      k.map((p) => new ReleaseCmd(p)),
      k.map((p) => new GoneCmd(p)),
      fc.constantFrom(10, 40, 120).map((ms) => new TickCmd(ms)),
    ],
    { maxCommands: 60, size: 'max' },
  );
}

async function runAgainst(makeModel: () => Model, cmds: Iterable<fc.AsyncCommand<Model, Real>>) {
  vi.setSystemTime(0);
  const sem = createActor(semaphoreMachine, {
    input: {
      capacity: CAPACITY,
      queueSize: QUEUE,
      renderTimeoutS: RENDER_TIMEOUT_S,
      now: () => Date.now(),
    },
  }).start();
  const real: Real = { sem, settled: [], telemetry: [] };
  sem.on('telemetry', (t) => real.telemetry.push(t as SemaphoreTelemetry));
  const model = makeModel();
  try {
    await fc.asyncModelRun(() => ({ model, real }), cmds);
  } finally {
    sem.stop();
  }
  return model;
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('semaphore against a model', () => {
  it('with no class named, it is exactly a plain FIFO', async () => {
    const witness = { runs: 0, queued: 0, full: 0 };
    await fc.assert(
      fc.asyncProperty(commands(fc.constant(undefined)), async (cmds) => {
        const model = await runAgainst(() => new FifoModel(), cmds);
        witness.runs++;
        if (model.maxDepth >= 1) witness.queued++;
        if (model.maxDepth >= QUEUE) witness.full++;
      }),
      { numRuns: 120 },
    );
    // Not vacuous: most runs queued someone, and some filled the queue.
    expect(witness.queued / witness.runs).toBeGreaterThan(0.5);
    expect(witness.full).toBeGreaterThan(0);
  });

  it('with mixed classes, it matches the class-aware model, displacements included', async () => {
    const witness = { runs: 0, queued: 0, displaced: 0 };
    const classes = fc.constantFrom<AdmissionClass | undefined>(undefined, ...ADMISSION_CLASSES);
    await fc.assert(
      fc.asyncProperty(commands(classes), async (cmds) => {
        const model = await runAgainst(() => new ClassModel(), cmds);
        witness.runs++;
        if (model.maxDepth >= 1) witness.queued++;
        if (model.displacements > 0) witness.displaced++;
      }),
      { numRuns: 120 },
    );
    expect(witness.queued / witness.runs).toBeGreaterThan(0.5);
    expect(witness.displaced / witness.runs).toBeGreaterThan(0.1);
  });
});
