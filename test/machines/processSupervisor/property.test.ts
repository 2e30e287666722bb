/**
 * Property: any interleaving of acquires, task ends (clean or faulting), aborts, start/stop/probe
 * outcomes (success, failure, `false`), clock ticks past every bound, budget changes, manual
 * restarts and shutdown keeps the supervisor's promises: never two incarnations alive, never a
 * task admitted on a process that is dead, starting or stopping, never a graceful stop under a
 * running task nor a forced one before a drain bound, no task waiting in `running.serving`,
 * health false only in `failed`, and every acquire eventually answered (ready or failed).
 */
import fc from 'fast-check';
import { expect, test } from 'vitest';
import { createActor, SimulatedClock } from 'xstate';
import {
  type ProcessSupervisorActor,
  processSupervisorMachine,
} from '../../../src/machines/processSupervisor.js';
import {
  runSupervised,
  stopSupervisor,
  supervisorStats,
} from '../../../src/services/supervisorClient.js';
import { type Deferred, deferred, FakeProcess, flush } from './fixtures.js';

const INTERVAL_MS = 1_000;
const DEADLINE_MS = 100;
const DRAIN_MS = 5_000;

interface Op {
  readonly gate: Deferred<void>;
  readonly abort: AbortController;
  started: boolean;
  finished: boolean;
  settled: boolean;
  outcome: string;
}

class World {
  readonly fake = new FakeProcess();
  readonly clock = new SimulatedClock();
  readonly ops: Op[] = [];
  readonly actor: ProcessSupervisorActor;
  limit = 2;
  shutdown: Promise<unknown> | null = null;

  constructor() {
    this.actor = createActor(processSupervisorMachine, {
      input: {
        process: this.fake,
        maxTasks: () => this.limit,
        now: () => this.clock.now(),
        healthIntervalMs: INTERVAL_MS,
        healthDeadlineMs: DEADLINE_MS,
        drainTimeoutMs: DRAIN_MS,
      },
      clock: this.clock,
    }).start();
  }

  acquire(): void {
    const op: Op = {
      gate: deferred(),
      abort: new AbortController(),
      started: false,
      finished: false,
      settled: false,
      outcome: 'pending',
    };
    this.ops.push(op);
    const body = async () => {
      op.started = true;
      const incarnation = this.fake.enter();
      try {
        await op.gate.promise;
      } finally {
        op.finished = true;
        this.fake.leave(incarnation);
      }
    };
    runSupervised(this.actor, body, { signal: op.abort.signal, acquireTimeoutMs: Infinity }).then(
      () => {
        op.settled = true;
        op.outcome = 'ok';
      },
      (error: { code?: string }) => {
        op.settled = true;
        op.outcome = error.code ?? 'task_error';
      },
    );
  }

  tick(ms: number): void {
    this.fake.inTick = true;
    try {
      this.clock.increment(ms);
    } finally {
      this.fake.inTick = false;
    }
  }

  check(): void {
    expect(this.fake.violations).toEqual([]);
    const snapshot = this.actor.getSnapshot();
    const stats = supervisorStats(this.actor);
    expect(stats.healthy).toBe(stats.state !== 'failed');
    if (snapshot.matches({ running: 'serving' })) expect(stats.waiting).toBe(0);
    const inFlight = this.ops.filter((op) => op.started && !op.finished).length;
    const unanswered = this.ops.filter((op) => !op.started && !op.settled).length;
    expect(stats.running).toBeLessThanOrEqual(inFlight);
    expect(stats.waiting).toBeLessThanOrEqual(unanswered);
  }
}

interface Model {
  acquires: number;
}

type Cmd = fc.AsyncCommand<Model, World>;

const cmd = (
  name: string,
  run: (w: World) => void,
  check: (w?: Model) => boolean = () => true,
): Cmd => ({
  check: (m) => check(m),
  async run(_m, w) {
    run(w);
    await flush();
    w.check();
  },
  toString: () => name,
});

const pick = <T>(items: T[], index: number): T | undefined =>
  items.length === 0 ? undefined : items[index % items.length];

const [
  acquireCmd,
  finishCmd,
  abortCmd,
  startCmd,
  stopCmd,
  probeCmd,
  tickCmd,
  limitCmd,
  restartCmd,
  shutdownCmd,
] = [
  fc.constant(null).map(() => ({
    check: () => true,
    async run(m: Model, w: World) {
      m.acquires += 1;
      w.acquire();
      await flush();
      w.check();
    },
    toString: () => 'acquire',
  })),
  fc.tuple(fc.nat(), fc.boolean()).map(([i, ok]) =>
    cmd(`finish(${i}, ${ok ? 'ok' : 'fault'})`, (w) => {
      const op = pick(
        w.ops.filter((o) => o.started && !o.finished),
        i,
      );
      if (ok) op?.gate.resolve();
      else op?.gate.reject(new Error('task broke'));
    }),
  ),
  fc.nat().map((i) =>
    cmd(`abort(${i})`, (w) => {
      pick(
        w.ops.filter((o) => !o.started && !o.settled),
        i,
      )?.abort.abort();
    }),
  ),
  fc.boolean().map((ok) =>
    cmd(`start ${ok ? 'ok' : 'fails'}`, (w) => {
      const d = w.fake.starts.shift();
      if (ok) d?.resolve();
      else d?.reject(new Error('start failed'));
    }),
  ),
  fc.boolean().map((ok) =>
    cmd(`stop ${ok ? 'ok' : 'fails'}`, (w) => {
      const d = w.fake.stops.shift();
      if (ok) d?.resolve();
      else d?.reject(new Error('stop failed'));
    }),
  ),
  fc.constantFrom('healthy', 'unhealthy', 'rejects').map((verdict) =>
    cmd(`probe ${verdict}`, (w) => {
      const d = w.fake.probes.shift();
      if (verdict === 'rejects') d?.reject(new Error('probe broke'));
      else d?.resolve(verdict === 'healthy');
    }),
  ),
  fc
    .constantFrom(DEADLINE_MS, INTERVAL_MS, DRAIN_MS)
    .map((ms) => cmd(`tick ${ms}`, (w) => w.tick(ms))),
  fc.integer({ min: 0, max: 4 }).map((n) =>
    cmd(`limit ${n}`, (w) => {
      w.limit = n;
    }),
  ),
  fc.constant(null).map(() => cmd('restart', (w) => w.actor.send({ type: 'restart' }))),
  fc.constant(null).map(() =>
    cmd('shutdown', (w) => {
      w.shutdown ??= stopSupervisor(w.actor, { timeoutMs: Number.POSITIVE_INFINITY });
    }),
  ),
];

// Weighted so that most runs live long enough to recycle, fail and recover before a shutdown.
const commands = [
  fc.oneof(
    { arbitrary: acquireCmd, weight: 30 },
    { arbitrary: finishCmd, weight: 20 },
    { arbitrary: abortCmd, weight: 4 },
    { arbitrary: startCmd, weight: 15 },
    { arbitrary: stopCmd, weight: 12 },
    { arbitrary: probeCmd, weight: 8 },
    { arbitrary: tickCmd, weight: 8 },
    { arbitrary: limitCmd, weight: 4 },
    { arbitrary: restartCmd, weight: 4 },
    { arbitrary: shutdownCmd, weight: 1 },
  ),
];

/** Lets everything finish: all I/O succeeds, every task ends, every bound expires. */
async function settle(w: World): Promise<void> {
  w.fake.auto = true;
  for (let round = 0; round < 30; round++) {
    w.fake.settleAll();
    for (const op of w.ops) if (op.started && !op.finished) op.gate.resolve();
    await flush();
    w.tick(DRAIN_MS);
    await flush();
    w.check();
    if (w.ops.every((op) => op.settled)) break;
  }
}

const witness = { restarts: 0, abandoned: 0, failedThenRecovered: 0, waitedThroughRestart: 0 };

test('random interleavings keep every supervisor invariant and answer every acquire', async () => {
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
      const w = new World();
      let sawFailed = false;
      let sawAbandon = false;
      const sub = w.actor.on('telemetry', (t) => {
        if (t.to === 'failed') sawFailed = true;
        if (t.abandoned > 0) sawAbandon = true;
        if (t.to === 'restarting.startingNew' && t.waiting > 0) witness.waitedThroughRestart += 1;
      });
      try {
        await fc.asyncModelRun(() => ({ model: { acquires: 0 }, real: w }), cmds);
        await settle(w);
        for (const op of w.ops) expect(op.settled, 'every acquire is answered').toBe(true);
        if (w.shutdown === null) {
          // Whatever happened, a later task is served (a failed supervisor retries its start).
          w.acquire();
          await settle(w);
          expect(w.ops.at(-1)?.outcome).toBe('ok');
        }
        const stats = supervisorStats(w.actor);
        if (stats.restarts > 0) witness.restarts += 1;
        if (sawAbandon) witness.abandoned += 1;
        if (sawFailed && stats.state === 'running') witness.failedThenRecovered += 1;
        const stopped = await (w.shutdown ?? stopSupervisor(w.actor));
        expect(stopped).toMatchObject({ type: 'stopped' });
        // A forced stop that rejects cannot prove the process gone; the supervisor must then
        // say so (`stopFailed`) rather than claim a clean shutdown.
        if (w.fake.alive) expect(stopped).toMatchObject({ stopFailed: true });
        expect(w.fake.violations).toEqual([]);
      } finally {
        sub.unsubscribe();
        w.actor.stop();
      }
    }),
    { numRuns: 120 },
  );
  // Non-vacuity: the generator reached the interesting corners.
  expect(witness.restarts).toBeGreaterThan(0);
  expect(witness.abandoned).toBeGreaterThan(0);
  expect(witness.failedThenRecovered).toBeGreaterThan(0);
  expect(witness.waitedThroughRestart).toBeGreaterThan(0);
});
