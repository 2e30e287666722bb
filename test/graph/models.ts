/**
 * The graph models of the eleven charts: for each, the input it is explored with, the sample
 * events (at least one per event type the chart handles), the abstract state the planner and the
 * walks compare, the fake I/O actors it is `provide()`d with, and the charts' unreachable
 * transitions (none may be listed without a reason, and a listed one that a walk reaches fails).
 *
 * Samples are filtered by what the current state handles, so a chart that gains an event type
 * without a sample here fails the planner ("no sample event") instead of going untested.
 */
import {
  type AnyActorRef,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type AnyStateNode,
  createActor,
  type EventObject,
  fromCallback,
  setup,
} from 'xstate';
import {
  type DeliveryContext,
  type DeliveryRange,
  deliveryMachine,
} from '../../src/machines/delivery.js';
import { probeCoordinatorMachine } from '../../src/machines/probeCoordinator.js';
import {
  cloneProbeLimiterSnapshot,
  type ProbeLimiterContext,
  probeLimiterMachine,
} from '../../src/machines/probeLimiter.js';
import {
  type Process,
  type ProcessSupervisorContext,
  processSupervisorMachine,
} from '../../src/machines/processSupervisor.js';
import { readinessMachine } from '../../src/machines/readiness.js';
import {
  type RegistryLinkContext,
  type RegistryLinkEvent,
  registryLinkMachine,
} from '../../src/machines/registryLink.js';
import { type RenderContext, renderMachine } from '../../src/machines/render.js';
import {
  createBacklogBudget,
  type RenderCoordinatorContext,
  renderCoordinatorMachine,
} from '../../src/machines/renderCoordinator.js';
import {
  cloneSemaphoreSnapshot,
  limitsOf,
  type SemaphoreContext,
  semaphoreMachine,
} from '../../src/machines/semaphore.js';
import { type TeeContext, teeMachine } from '../../src/machines/tee.js';
import { waitingRoomMachine } from '../../src/machines/waitingRoom.js';
import type { RoomSlot } from '../../src/machines/waitingRoomSlots.js';
import type { WorkerPool } from '../../src/workers/pool.js';
import type { GraphModel } from './walk.js';

type Snapshot = AnyMachineSnapshot;

/** Event types some active state node has a transition for (delays included). */
function handledTypes(snapshot: Snapshot): string[] {
  const types = new Set<string>();
  for (const node of snapshot._nodes as AnyStateNode[]) {
    for (const type of node.transitions.keys()) types.add(type);
  }
  return [...types];
}

/**
 * The samples for what `snapshot` handles: `after` events as they are, everything else from
 * `table`. An empty entry marks an event the chart raises to itself and nobody sends.
 */
function samples(snapshot: Snapshot, table: Readonly<Record<string, readonly object[]>>) {
  const out: EventObject[] = [];
  for (const type of handledTypes(snapshot)) {
    if (type.startsWith('xstate.after.')) out.push({ type });
    else {
      const listed = table[type];
      if (listed === undefined) throw new Error(`no sample event for '${type}'`);
      out.push(...(listed as EventObject[]));
    }
  }
  return out;
}

const json = (value: unknown) => JSON.stringify(value);
const capped = (n: number) => Math.min(n, 2); // "none, one, several": all a chart distinguishes

// ---------------------------------------------------------------------------------------------
// readiness: no context; the event carries the depth and the threshold.

const readiness: GraphModel<null> = {
  name: 'readiness',
  variant: 'threshold 4 (and 0)',
  machine: readinessMachine,
  provide: () => readinessMachine,
  env: () => null,
  input: () => undefined,
  simplePaths: true,
  events: (s) =>
    samples(s, {
      check: [
        { type: 'check', queued: 0, threshold: 0, callId: 1 },
        { type: 'check', queued: 4, threshold: 4, callId: 2 },
        { type: 'check', queued: 3, threshold: 4, callId: 3 },
        { type: 'check', queued: 2, threshold: 4 },
      ],
    }),
  serialize: (s) => json(s.value),
};

// ---------------------------------------------------------------------------------------------
// probeLimiter: one slot, two callers.

const probeLimiter: GraphModel<null> = {
  name: 'probeLimiter',
  variant: 'capacity 1, callers a and b',
  machine: probeLimiterMachine,
  provide: () => probeLimiterMachine,
  env: () => null,
  input: () => ({ capacity: 1, now: () => 0 }),
  simplePaths: true,
  events: (s) =>
    samples(s, {
      acquire: [
        { type: 'acquire', id: 'a', callId: 1 },
        { type: 'acquire', id: 'b', callId: 2 },
      ],
      release: [
        { type: 'release', id: 'a', callId: 3 },
        { type: 'release', id: 'b' },
      ],
      gone: [
        { type: 'gone', id: 'a' },
        { type: 'gone', id: 'b' },
      ],
      stats: [{ type: 'stats', callId: 4 }],
    }),
  serialize: (s) => json([s.value, [...(s.context as ProbeLimiterContext).holders.keys()].sort()]),
  clone: (s) => cloneProbeLimiterSnapshot(s as Snapshot & { context: ProbeLimiterContext }),
};

// ---------------------------------------------------------------------------------------------
// semaphore: one queue place, three callers of three classes, and a capacity that can change.

const SEMAPHORE_QUEUE = 1;
const semaphoreLimits = (capacity: number) => () => ({
  capacity,
  queueSize: SEMAPHORE_QUEUE,
  renderTimeoutS: 300,
});

const semaphore: GraphModel<{ capacity: number }> = {
  name: 'semaphore',
  variant:
    'capacity 1 or 2 (changed while running), queue 1, callers a (interactive), b (low or interactive), c (high)',
  machine: semaphoreMachine,
  provide: () => semaphoreMachine,
  env: () => ({ capacity: 1 }),
  input: (env) => ({
    limits: () => ({ capacity: env.capacity, queueSize: SEMAPHORE_QUEUE, renderTimeoutS: 300 }),
    now: () => 0,
  }),
  events: (s) => {
    const capacity = limitsOf((s.context as SemaphoreContext).config).capacity;
    return [
      ...samples(s, {
        request: [
          { type: 'request', id: 'a', callId: 1 },
          { type: 'request', id: 'b', class: 'low', callId: 2 },
          // b again as a listener: only a listener's arrival makes an orphan yield.
          { type: 'request', id: 'b', callId: 2 },
          { type: 'request', id: 'c', class: 'high', callId: 3 },
        ],
        release: [
          { type: 'release', id: 'a', callId: 4 },
          { type: 'release', id: 'b', callId: 5 },
          { type: 'release', id: 'c' },
        ],
        gone: [
          { type: 'gone', id: 'a' },
          { type: 'gone', id: 'b' },
          { type: 'gone', id: 'c' },
        ],
        retryAfter: [{ type: 'retryAfter', callId: 6 }],
        stats: [{ type: 'stats', callId: 7 }],
        transfer: [
          { type: 'transfer', from: 'a', to: 'room-a', callId: 8 },
          { type: 'transfer', from: 'nobody', to: 'room-x', callId: 9 },
        ],
        // a's render may lose its last listener (and win one back); b and c always listen.
        orphaned: [
          { type: 'orphaned', id: 'a', callId: 10 },
          { type: 'orphaned', id: 'nobody' },
        ],
        adopted: [
          { type: 'adopted', id: 'a', callId: 11 },
          { type: 'adopted', id: 'nobody' },
        ],
        // a listener joins b's queued render (up), c is never moved down, nobody is unknown.
        promote: [
          { type: 'promote', id: 'b', class: 'interactive', callId: 12 },
          { type: 'promote', id: 'c', class: 'low' },
          { type: 'promote', id: 'nobody', class: 'interactive' },
        ],
      }),
      { type: 'world.capacity', capacity: capacity === 1 ? 2 : 1 } as EventObject,
    ];
  },
  serialize: (s) => {
    const { table, config } = s.context as SemaphoreContext;
    const held = [...table.holders.values()]
      .map((h) => `${h.id}${h.yieldable ? '*' : ''}${h.preempted ? '!' : ''}`)
      .sort();
    return json([s.value, limitsOf(config).capacity, held, table.queueOrder()]);
  },
  clone: (s) => cloneSemaphoreSnapshot(s as Snapshot & { context: SemaphoreContext }),
  world: {
    // The operator changes AP_MAX_CONCURRENCY; the provider is read on every operation.
    'world.capacity': {
      pure: (s, e) => {
        const copy = cloneSemaphoreSnapshot(s as Snapshot & { context: SemaphoreContext });
        const { capacity } = e as unknown as { capacity: number };
        const config = { ...copy.context.config, limits: semaphoreLimits(capacity) };
        return { ...copy, context: { ...copy.context, config } } as Snapshot;
      },
      live: (env, e) => {
        env.capacity = (e as unknown as { capacity: number }).capacity;
      },
    },
  },
};

// ---------------------------------------------------------------------------------------------
// probeCoordinator: a real probe limiter receives its release; the probe is a fake promise.

const PROBE_INVOKE = probeCoordinatorMachine.root.states.probing!.invoke[0]!.id;

function probeCoordinatorContext(s: Snapshot) {
  return s.context as { waiters: Set<string>; result: unknown };
}

const probeCoordinator: GraphModel<{ limiter: AnyActorRef }> = {
  name: 'probeCoordinator',
  variant: 'first waiter w1, joiner w2',
  machine: probeCoordinatorMachine,
  provide: (io) => probeCoordinatorMachine.provide({ actors: { probe: io.promise() } }),
  env: () => ({ limiter: createActor(probeLimiterMachine, { input: { capacity: 1 } }).start() }),
  input: (env) => ({
    key: 'local://music.flac',
    slotId: 'probe-1',
    limiter: env.limiter,
    firstWaiter: 'w1',
    probeInput: {},
  }),
  events: (s) =>
    samples(s, {
      join: [
        { type: 'join', id: 'w1', callId: 1 },
        { type: 'join', id: 'w2', callId: 2 },
      ],
      leave: [{ type: 'leave', id: 'w1' }],
      gone: [{ type: 'gone', id: 'w2' }],
      [`xstate.done.actor.${PROBE_INVOKE}`]: [
        { type: `xstate.done.actor.${PROBE_INVOKE}`, output: { ok: true } },
      ],
      [`xstate.error.actor.${PROBE_INVOKE}`]: [
        { type: `xstate.error.actor.${PROBE_INVOKE}`, error: { class: 'not_found' } },
      ],
    }),
  serialize: (s) => {
    const c = probeCoordinatorContext(s);
    return json([s.value, [...c.waiters].sort(), c.result !== undefined]);
  },
  clone: (s) => {
    const c = probeCoordinatorContext(s);
    return { ...s, context: { ...c, waiters: new Set(c.waiters) } } as Snapshot;
  },
};

// ---------------------------------------------------------------------------------------------
// renderCoordinator: admitted at once or queued; subscribers s1 and s2 listen, t is the store's
// tee (`store: true`); a real semaphore receives its release and the orphan marks; the
// Render child is a fake promise that can only fail (the chart has no `onDone` for it).

const MAX_VARIANT_BYTES = 8;
const CHUNK = Buffer.from('12345'); // two of them cross the cap
const BACKLOG_BUDGET_BYTES = 5; // one CHUNK fills it: a small chunk after it drops the backlog
const SMALL_CHUNK = Buffer.from('1');

function renderCoordinator(
  admission: 'granted' | 'queued',
  warm = false,
): GraphModel<{ semaphore: AnyActorRef }> {
  return {
    name: 'renderCoordinator',
    variant: `admission ${admission}${warm ? ' at class low, s1 a store subscriber (warm work)' : ''}, subscribers s1 and s2, cap ${MAX_VARIANT_BYTES} bytes, backlog budget ${BACKLOG_BUDGET_BYTES} bytes`,
    machine: renderCoordinatorMachine,
    provide: (io) => renderCoordinatorMachine.provide({ actors: { render: io.promise() } }),
    env: () => ({
      semaphore: createActor(semaphoreMachine, { input: { capacity: 1, queueSize: 1 } }).start(),
    }),
    input: (env) => ({
      key: 'f:opus/local://music.flac',
      admission,
      slotId: 'render-1',
      semaphore: env.semaphore,
      firstSubscriber: 's1',
      ...(warm ? { firstSubscriberStore: true, admissionClass: 'low' as const } : {}),
      maxVariantBytes: () => MAX_VARIANT_BYTES,
      backlogBudget: createBacklogBudget(() => BACKLOG_BUDGET_BYTES),
      renderInput: {},
    }),
    events: (s) =>
      samples(s, {
        join: [
          { type: 'join', id: 's1', callId: 1 },
          { type: 'join', id: 's2', callId: 2 },
          { type: 'join', id: 't', store: true, callId: 6 },
        ],
        unsubscribe: [
          { type: 'unsubscribe', id: 's1', callId: 3 },
          { type: 'unsubscribe', id: 's2', callId: 4 },
        ],
        gone: [
          { type: 'gone', id: 's1' },
          { type: 'gone', id: 's2' },
          { type: 'gone', id: 't' },
        ],
        'slot.granted': [{ type: 'slot.granted' }],
        'slot.displaced': [{ type: 'slot.displaced', retryAfterS: 3 }],
        'slot.preempted': [{ type: 'slot.preempted' }],
        'render.pid': [{ type: 'render.pid', pid: 4242 }],
        'render.chunk': [
          { type: 'render.chunk', data: CHUNK },
          { type: 'render.chunk', data: SMALL_CHUNK },
        ],
        'render.done': [{ type: 'render.done', info: { bytes: 5 } }],
        'render.error': [{ type: 'render.error', failure: { class: 'render_failed' } }],
        'render.cancelled': [{ type: 'render.cancelled' }],
        shutdown: [{ type: 'shutdown', callId: 5 }],
        'xstate.error.actor.render': [
          { type: 'xstate.error.actor.render', error: 'the render actor threw' },
        ],
      }),
    serialize: (s) => {
      const c = s.context as RenderCoordinatorContext;
      return json([
        s.value,
        [...c.subscribers].sort(),
        [...c.storeSubscribers].sort(),
        c.bytes,
        c.keeping,
        capped(c.parked.length),
        c.info !== null,
        c.pid !== null,
        c.promoted,
      ]);
    },
    clone: (s) => {
      const c = s.context as RenderCoordinatorContext;
      const context = {
        ...c,
        subscribers: new Set(c.subscribers),
        storeSubscribers: new Set(c.storeSubscribers),
        backlog: [...c.backlog],
        // Each planned branch charges its own copy of the shared budget.
        backlogBudget: c.backlogBudget && { ...c.backlogBudget },
        parked: [...c.parked],
      };
      return { ...s, context } as Snapshot;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// render: the worker actor is a fake that takes commands; its events are sent by the walk.
// The Render talks to its parent with `sendParent`, so it runs as the child of a host.

const RENDER_SPEC = { executable: 'ffmpeg', argv: ['-version'], timeoutMs: 1_000 };

const render: GraphModel<null> = {
  name: 'render',
  variant: 'fake worker, 1 s ffmpeg timeout',
  machine: renderMachine,
  provide: () =>
    renderMachine.provide({
      actors: {
        renderWorker: fromCallback(({ receive }) => {
          receive(() => {}); // commands (ack, cancel, kill) are the worker's business
        }) as never,
      },
    }),
  env: () => null,
  input: () => ({ spec: RENDER_SPEC, pool: {} as WorkerPool }),
  host: (machine, input) =>
    setup({ actors: { machine } }).createMachine({
      invoke: { id: 'machine', src: 'machine', input: input as never },
    }) as AnyStateMachine,
  events: (s) =>
    samples(s, {
      'worker.pid': [{ type: 'worker.pid', pid: 4242 }],
      'worker.chunk': [{ type: 'worker.chunk', data: Buffer.from('abc') }],
      'worker.exited': [{ type: 'worker.exited', exitStatus: 0 }],
      'worker.settled': [
        {
          type: 'worker.settled',
          outcome: { type: 'done', exitStatus: 0, bytes: 3, stderrTail: '' },
        },
        {
          type: 'worker.settled',
          outcome: {
            type: 'error',
            class: 'render_failed',
            exitStatus: 1,
            stderrTail: 'Invalid data',
            bytes: 0,
          },
        },
      ],
      'worker.dead': [
        { type: 'worker.dead', report: { pid: 4242, by: 'worker', outcome: 'terminated' } },
      ],
      ack: [{ type: 'ack', bytes: 3 }],
      cancel: [{ type: 'cancel', callId: 1 }, { type: 'cancel' }],
    }),
  serialize: (s) => {
    const c = s.context as RenderContext;
    return json([
      s.value,
      c.pid !== null,
      c.bytes > 0,
      c.failure?.class ?? null,
      c.report !== null,
      capped(c.parked.length),
    ]);
  },
};

// ---------------------------------------------------------------------------------------------
// processSupervisor: start, stop and probe are fake promises; a recycle after every second task;
// the guards' clock stands still (a task's fault is what makes health stale).

const INERT_PROCESS: Process = {
  start: () => Promise.reject(new Error('the fake start/stop/probe actors stand in for this')),
  stop: () => Promise.resolve(),
  healthy: () => Promise.resolve(true),
};

const processSupervisor: GraphModel<null> = {
  name: 'processSupervisor',
  variant: 'recycle after 2 tasks, task ids 1 and 2',
  machine: processSupervisorMachine,
  provide: (io) =>
    processSupervisorMachine.provide({
      actors: { startProcess: io.promise(), stopProcess: io.promise(), probeProcess: io.promise() },
    } as never),
  env: () => null,
  input: () => ({
    process: INERT_PROCESS,
    maxTasks: () => 2,
    healthIntervalMs: 10_000,
    healthDeadlineMs: 2_000,
    drainTimeoutMs: 30_000,
    now: () => 0,
  }),
  events: (s) => {
    const c = s.context as ProcessSupervisorContext;
    const busy = new Set([...c.active, ...c.waiters.map((w) => w.callId)]);
    const failure = { error: new Error('fake failure') };
    return samples(s, {
      // A task id is the caller's fresh callId: never one still waiting or running.
      acquire: [
        { type: 'acquire' },
        ...[1, 2].filter((id) => !busy.has(id)).map((callId) => ({ type: 'acquire', callId })),
      ],
      taskDone: [
        { type: 'taskDone', taskId: 1 },
        { type: 'taskDone', taskId: 1, fault: true },
        { type: 'taskDone', taskId: 2, generation: 0 },
      ],
      withdraw: [
        { type: 'withdraw', taskId: 1 },
        { type: 'withdraw', taskId: 2 },
      ],
      restart: [{ type: 'restart', callId: 20 }],
      stop: [{ type: 'stop', callId: 21, drainTimeoutMs: 5_000 }],
      stats: [{ type: 'stats', callId: 22 }],
      'xstate.done.actor.start': [{ type: 'xstate.done.actor.start', output: undefined }],
      'xstate.error.actor.start': [{ type: 'xstate.error.actor.start', ...failure }],
      'xstate.done.actor.stopOld': [{ type: 'xstate.done.actor.stopOld', output: undefined }],
      'xstate.error.actor.stopOld': [{ type: 'xstate.error.actor.stopOld', ...failure }],
      'xstate.done.actor.kill': [{ type: 'xstate.done.actor.kill', output: undefined }],
      'xstate.error.actor.kill': [{ type: 'xstate.error.actor.kill', ...failure }],
      'xstate.done.actor.probe': [
        { type: 'xstate.done.actor.probe', output: true },
        { type: 'xstate.done.actor.probe', output: false },
      ],
      'xstate.error.actor.probe': [{ type: 'xstate.error.actor.probe', ...failure }],
    });
  },
  serialize: (s) => {
    const c = s.context as ProcessSupervisorContext;
    return json([
      s.value,
      c.waiters.map((w) => w.callId),
      c.active,
      c.tasksSinceStart,
      Number.isFinite(c.lastHealthyAt),
      c.forceStop,
      c.stopRequested,
      capped(c.stoppers.length),
      c.stopFailed,
      c.abandoned > 0,
      c.lastRestartReason,
      c.generation > 0,
    ]);
  },
};

// ---------------------------------------------------------------------------------------------
// waitingRoom: sessions a, b and c; time passes only when the walk says so.

/** Past both the 1 s reservation and the 1 s heartbeat: everything open becomes due. */
const ADVANCE_MS = 1_001;

interface RoomEnv {
  nowMs: number;
  ids: number;
}

function roomKey(s: Snapshot): string {
  const c = s.context as {
    settings: { now: () => number; heartbeatMs: number };
    tickets: ReadonlyMap<string, { ticketId: string; status: string; lastSeenAtMs: number }>;
    queue: readonly string[];
    slots: readonly RoomSlot[];
  };
  const now = c.settings.now();
  const slots = c.slots.map((slot) => {
    if (slot.phase === 'idle') return '-';
    const own = c.tickets.get(slot.session)?.ticketId === slot.ticketId ? '' : '~';
    const due = slot.phase === 'reserved' && now >= slot.expiresAtMs ? '!' : '';
    return `${slot.phase}:${slot.session}${own}${due}`;
  });
  const queue = c.queue.map(
    (session) =>
      session + (now - c.tickets.get(session)!.lastSeenAtMs > c.settings.heartbeatMs ? '!' : ''),
  );
  const tickets = [...c.tickets.entries()].map(([session, t]) => `${session}:${t.status}`).sort();
  return json([s.value, slots, queue, tickets]);
}

const SESSIONS = ['a', 'b', 'c'];

function waitingRoom(slots: number, maxLength: number, sweepMs: number): GraphModel<RoomEnv> {
  return {
    name: 'waitingRoom',
    variant: `${slots} slot(s), queue ${maxLength}, sweep ${sweepMs ? `every ${sweepMs} ms` : 'off'}`,
    machine: waitingRoomMachine,
    provide: () => waitingRoomMachine,
    env: () => ({ nowMs: 0, ids: 0 }),
    input: (env) => ({
      slots,
      maxLength,
      sweepMs,
      reservationSeconds: 1,
      heartbeatSeconds: 1,
      now: () => env.nowMs,
      newTicketId: () => `q_${++env.ids}`,
    }),
    events: (s) => [
      ...samples(s, {
        join: SESSIONS.map((session, i) => ({ type: 'join', session, callId: 10 + i })),
        status: SESSIONS.map((session, i) => ({ type: 'status', session, callId: 20 + i })),
        leave: SESSIONS.map((session, i) => ({ type: 'leave', session, callId: 30 + i })),
        claim: SESSIONS.map((session, i) => ({ type: 'claim', session, callId: 40 + i })),
        runEnded: SESSIONS.map((session, i) => ({ type: 'runEnded', session, callId: 50 + i })),
        tick: [{ type: 'tick' }],
        // Raised by the room to itself once the clock is read; never sent from outside.
        'settled.join': [],
        'settled.claim': [],
        'settled.holderClaim': [],
      }),
      { type: 'world.advance', ms: ADVANCE_MS } as EventObject,
    ],
    serialize: roomKey,
    world: {
      'world.advance': {
        pure: (s, e) => {
          const c = s.context as { settings: { now: () => number } };
          const t = c.settings.now() + (e as unknown as { ms: number }).ms;
          return { ...s, context: { ...c, settings: { ...c.settings, now: () => t } } } as Snapshot;
        },
        live: (env, e) => {
          env.nowMs += (e as unknown as { ms: number }).ms;
        },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// tee: the writer is a fake that takes write/end; its reports are sent by the walk. The silence
// deadline is resolved from the context on the simulated clock.

const TEE_DEADLINE_MS = 5_000;

const tee: GraphModel<null> = {
  name: 'tee',
  variant: `fake writer, ${TEE_DEADLINE_MS / 1000} s silence deadline`,
  machine: teeMachine,
  provide: () =>
    teeMachine.provide({
      actors: {
        writer: fromCallback(({ receive }) => {
          receive(() => {}); // write/end are the store's business
        }),
      },
    }),
  env: () => null,
  input: () => ({ key: 'f:opus/local://music.flac', deadlineMs: TEE_DEADLINE_MS }),
  events: (s) =>
    samples(s, {
      rendering: [{ type: 'rendering' }],
      chunk: [{ type: 'chunk', data: Buffer.from('abc') }],
      done: [{ type: 'done', info: { bytes: 3 } }],
      error: [{ type: 'error', failure: { class: 'render_failed' } }],
      'coordinator.gone': [{ type: 'coordinator.gone' }],
      'writer.committed': [{ type: 'writer.committed', size: 3 }],
      'writer.failed': [{ type: 'writer.failed', reason: 'disk full' }],
    }),
  serialize: (s) => {
    const c = s.context as TeeContext;
    return json([s.value, c.bytes > 0, c.outcome, c.reason !== null]);
  },
};

// registryLink: the cluster registry client's lifecycle; the events are what the client
// reports, so a reservation ends only from where one is.

function registryLinkEvents(snapshot: AnyMachineSnapshot): EventObject[] {
  const { reserved, committed } = snapshot.context as RegistryLinkContext;
  const out: RegistryLinkEvent[] = [
    { type: 'redis.ready' },
    { type: 'redis.down', message: 'connection closed' },
    { type: 'op.ok' },
    { type: 'op.failed', code: 'ERR_REGISTRY_UNREACHABLE', worker: null },
    { type: 'op.failed', code: 'ERR_REGISTRY_MALFORMED', worker: 'b' },
    { type: 'selection.refused' },
    { type: 'hold.reasserted' },
    { type: 'reservation.made' },
    { type: 'stats', callId: 1 },
    { type: 'close' },
  ];
  // Only what the client can send: a reservation ends from where one is.
  if (reserved > 0) {
    out.push({ type: 'reservation.committed' });
    out.push({ type: 'reservation.ended', from: 'reserved', lost: false });
    out.push({ type: 'reservation.ended', from: 'reserved', lost: true });
  }
  if (committed > 0) out.push({ type: 'reservation.ended', from: 'committed', lost: false });
  return out as EventObject[];
}

const registryLink: GraphModel<null> = {
  name: 'registryLink',
  variant: 'one client, counts capped at several',
  machine: registryLinkMachine,
  provide: () => registryLinkMachine,
  env: () => null,
  input: () => undefined,
  events: registryLinkEvents,
  serialize: (s) => {
    const { reserved, committed } = s.context as RegistryLinkContext;
    return JSON.stringify([s.value, capped(reserved), capped(committed)]);
  },
};

// ---------------------------------------------------------------------------------------------
// delivery: one request's answer; the subscribe call, the coordinator, the response and the
// adapter's answers are all events. Cluster mode (a full queue may be handed off) or not.

const DELIVERY_DEADLINE_MS = 5_000;

/** A range and, optionally, a total known before the render (an exact WAV). */
interface DeliveryRangeCase {
  readonly label: string;
  readonly range: DeliveryRange;
  readonly totalBytes?: number;
}

function delivery(canHandOff: boolean, rangeCase?: DeliveryRangeCase): GraphModel<null> {
  return {
    name: 'delivery',
    variant: `${canHandOff ? 'cluster mode' : 'one node'}, ${DELIVERY_DEADLINE_MS / 1000} s consumer deadline${rangeCase ? `, ${rangeCase.label}` : ''}`,
    machine: deliveryMachine,
    provide: () => deliveryMachine,
    env: () => null,
    input: () => ({
      key: 'f:mp3/local://music.flac',
      deadlineMs: DELIVERY_DEADLINE_MS,
      canHandOff,
      ...(rangeCase ? { range: rangeCase.range } : {}),
      ...(rangeCase?.totalBytes !== undefined ? { totalBytes: rangeCase.totalBytes } : {}),
    }),
    events: (s) =>
      samples(s, {
        subscribed: [
          { type: 'subscribed', cache: 'MISS', started: false, backlog: Buffer.alloc(0) },
          { type: 'subscribed', cache: 'MISS', started: true, backlog: Buffer.alloc(0) },
          { type: 'subscribed', cache: 'COALESCED', started: true, backlog: Buffer.from('ab') },
          ...(rangeCase
            ? [
                {
                  type: 'subscribed',
                  cache: 'COALESCED',
                  started: true,
                  backlog: Buffer.from('abcdef'),
                  complete: true,
                },
              ]
            : []),
        ],
        refused: [
          { type: 'refused', failure: { class: 'queue_full', retryAfterS: 3 } },
          { type: 'refused', failure: { class: 'render_failed' } },
        ],
        rendering: [{ type: 'rendering' }],
        chunk: [
          { type: 'chunk', data: Buffer.from('abc') },
          { type: 'chunk', data: Buffer.alloc(0) },
          // Stamped, as the adapter sends them: while streaming the deadline is re-armed lazily.
          ...(rangeCase
            ? []
            : [
                { type: 'chunk', data: Buffer.from('abc'), at: 1 },
                { type: 'chunk', data: Buffer.from('abc'), at: 2 },
              ]),
          ...(rangeCase
            ? [
                { type: 'chunk', data: Buffer.from('a') },
                { type: 'chunk', data: Buffer.from('abcdef') },
              ]
            : []),
        ],
        done: [{ type: 'done', info: { exitStatus: 0, bytes: 3 } }],
        error: [{ type: 'error', failure: { class: 'render_failed', exitStatus: 1 } }],
        shutdown: [{ type: 'shutdown', failure: { class: 'cancelled' } }],
        'client.gone': [{ type: 'client.gone' }],
        retryAfter: [{ type: 'retryAfter', retryAfterS: 4 }],
        'handOff.relayed': [{ type: 'handOff.relayed' }],
        'handOff.refused': [{ type: 'handOff.refused', retryAfterS: 5 }],
        fault: [{ type: 'fault' }],
      }),
    serialize: (s) => {
      const c = s.context as DeliveryContext;
      return json([
        s.value,
        c.cache,
        c.bytes > 0,
        c.failure?.class ?? null,
        c.outcome,
        // Ranges: how far the stream got, capped so the walk stays finite.
        rangeCase ? Math.min(c.position, 8) : null,
        // The deadline's timer: armed against a stamp, and whether a stamp came after it.
        c.deadlineAt === null
          ? null
          : c.heardAt !== null && c.heardAt + c.deadlineMs > c.deadlineAt,
      ]);
    },
  };
}

/** Ranges the walks take: unknown totals (closed, open, suffix, none) and a known one. */
const DELIVERY_RANGES: readonly DeliveryRangeCase[] = [
  { label: 'range 2-4, total unknown', range: { type: 'from', first: 2, last: 4 } },
  { label: 'range 4-, total unknown', range: { type: 'from', first: 4 } },
  { label: 'range -2, total unknown', range: { type: 'suffix', length: 2 } },
  { label: 'range -0', range: { type: 'none' } },
  { label: 'range 1-, 6 bytes known', range: { type: 'from', first: 1 }, totalBytes: 6 },
  { label: 'no range, 6 bytes known', range: { type: 'full' }, totalBytes: 6 },
  { label: 'no range, 1 byte known', range: { type: 'full' }, totalBytes: 1 },
];

// ---------------------------------------------------------------------------------------------

export const MODELS: Readonly<Record<string, readonly GraphModel<any>[]>> = {
  semaphore: [semaphore],
  probeLimiter: [probeLimiter],
  readiness: [readiness],
  renderCoordinator: [
    renderCoordinator('granted'),
    renderCoordinator('queued'),
    renderCoordinator('queued', true),
  ],
  render: [render],
  probeCoordinator: [probeCoordinator],
  processSupervisor: [processSupervisor],
  waitingRoom: [waitingRoom(2, 1, 0), waitingRoom(1, 1, 1_000)],
  tee: [tee],
  registryLink: [registryLink],
  delivery: [delivery(false), delivery(true), ...DELIVERY_RANGES.map((r) => delivery(false, r))],
};

/**
 * Transitions no walk can take, with the reason. Keys are `state | event | #index` as in
 * docs/chart-coverage.md. The machines are not changed to make these reachable.
 */
export const UNREACHABLE: Readonly<Record<string, Readonly<Record<string, string>>>> = {};
