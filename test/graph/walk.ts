/**
 * Path-generated chart tests: the machinery shared by `test/graph/*.test.ts` and
 * `scripts/chart-coverage.ts`.
 *
 * 1. **Plan** (pure). `getShortestPaths` from `xstate/graph` explores a machine with a model's
 *    sample events, one `machine.transition()` per (abstract state, event) pair. A spy on the
 *    actor scope records which transition definitions each of those steps fires.
 * 2. **Select.** One walk per distinct state configuration (its shortest path), then, greedily,
 *    one walk per edge that fires a transition no earlier walk fired (the shortest path to the
 *    edge's source, plus the edge's event).
 * 3. **Walk** (live). Each walk is replayed on a real actor of the machine as `provide()`d with
 *    fake I/O actors: delays run on a `SimulatedClock`, invoked promises are settled by the walk,
 *    other events are sent. The walk must end in the abstract state the plan predicted, and its
 *    last step must fire exactly the transitions the plan said it would.
 * 4. **Cover.** What the live actors did (seen through `inspect`) is compared with every state
 *    node and every transition of the chart: `on`, `always`, `after` and invoke `onDone`/`onError`.
 */
import {
  type AnyActorRef,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type AnyStateNode,
  createActor,
  createEmptyActor,
  type EventObject,
  fromPromise,
  SimulatedClock,
} from 'xstate';
import { getShortestPaths, getSimplePaths, getStateNodes } from 'xstate/graph';

type Snapshot = AnyMachineSnapshot;
type Transition = {
  readonly source: AnyStateNode;
  readonly eventType: string;
  readonly target?: readonly AnyStateNode[];
  readonly guard?: unknown;
  readonly delay?: unknown;
};

/** Invoked promise actors that a walk settles by hand, keyed by invoke id. */
export class FakeIo {
  readonly #pending = new Map<
    string,
    { resolve: (value: unknown) => void; reject: (error: unknown) => void }
  >();

  /** A promise actor that stays pending until `settle` is called for its invoke id. */
  promise() {
    return fromPromise<unknown, unknown>(
      ({ self }) =>
        new Promise((resolve, reject) => {
          this.#pending.set(self.id, { resolve, reject });
        }),
    );
  }

  settle(id: string, outcome: { output: unknown } | { error: unknown }): void {
    const pending = this.#pending.get(id);
    if (!pending) throw new Error(`no pending invocation '${id}' to settle`);
    this.#pending.delete(id);
    if ('error' in outcome) pending.reject(outcome.error);
    else pending.resolve(outcome.output);
  }
}

/** A change of the world that is not a machine event: time passing, a limit being changed. */
export interface WorldStep<Env> {
  /** The same change applied to a snapshot, for the planner (return a new snapshot). */
  pure(snapshot: Snapshot, event: EventObject): Snapshot;
  /** The change applied to a live run's environment. */
  live(env: Env, event: EventObject): void;
}

export interface GraphModel<Env = unknown> {
  /** The chart's name, as in `src/machines/<name>.ts`. */
  readonly name: string;
  /** What this variant's input is, in a few words (several variants may cover one chart). */
  readonly variant: string;
  /** The machine as the chart defines it. */
  readonly machine: AnyStateMachine;
  /** The machine walked: `machine.provide()`d with fake I/O bound to `io`. */
  provide(io: FakeIo): AnyStateMachine;
  /** A fresh environment (mutable, read by the input's providers) for one live run. */
  env(): Env;
  input(env: Env): unknown;
  /** Sample events available in `snapshot`: one or more per event type it handles. */
  events(snapshot: Snapshot): EventObject[];
  /** The abstract state: what distinguishes snapshots for the planner and the walk's check. */
  serialize(snapshot: Snapshot): string;
  /** Copies the parts of the context that the machine mutates in place. */
  clone?(snapshot: Snapshot): Snapshot;
  readonly world?: Readonly<Record<string, WorldStep<Env>>>;
  /** Run the machine as the child `id` of this host (for `sendParent`). */
  host?(machine: AnyStateMachine, input: unknown): AnyStateMachine;
  /** Also walk every simple path (small charts only). */
  readonly simplePaths?: boolean;
}

export interface Edge {
  readonly source: Snapshot;
  readonly from: string;
  readonly event: EventObject;
  readonly to: string;
  readonly target: Snapshot;
  /** Keys of the transitions this step fires, in order. */
  readonly fired: readonly string[];
}

export interface Walk {
  readonly kind: 'state' | 'transition' | 'simple';
  readonly description: string;
  readonly events: readonly EventObject[];
  /** The abstract state the walk must end in. */
  readonly expected: string;
  /** For a transition walk: the transitions its last step must fire. */
  readonly lastFires?: readonly string[];
}

export interface Plan {
  readonly model: GraphModel<any>;
  readonly states: number;
  readonly edges: readonly Edge[];
  readonly walks: readonly Walk[];
  /** Transitions fired while entering the initial state (eventless ones). */
  readonly initFires: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// The chart's universe: every state node and every transition definition, with stable keys.

export interface TransitionInfo {
  readonly key: string;
  readonly source: string;
  readonly event: string;
  readonly guard: string;
  readonly targets: string;
}

const pathOf = (node: AnyStateNode) => node.path.join('.') || '(root)';

/** `xstate.after.linger.x.y` → `after linger`; done/error of an invoke; '' → `always`. */
export function eventLabel(eventType: string): string {
  if (eventType === '') return 'always';
  const after = /^xstate\.after\.([^.]+)\./.exec(eventType);
  if (after) return `after ${after[1]}`;
  const done = /^xstate\.done\.actor\.(.+)$/.exec(eventType);
  if (done) return `${invokeLabel(done[1]!)} done`;
  const failed = /^xstate\.error\.actor\.(.+)$/.exec(eventType);
  if (failed) return `${invokeLabel(failed[1]!)} error`;
  return eventType;
}

/** Generated invoke ids (`0.machine.state`) read as the invoking state. */
function invokeLabel(id: string): string {
  const generated = /^\d+\.[^.]+\.(.+)$/.exec(id);
  return generated ? `invoke(${generated[1]})` : id;
}

function guardLabel(guard: unknown): string {
  if (guard === undefined) return '';
  if (typeof guard === 'string') return guard;
  return (guard as { type?: string }).type ?? 'inline';
}

function keyOf(t: Transition): string {
  const list =
    t.eventType === ''
      ? (t.source.always as readonly unknown[] | undefined)
      : (t.source.transitions.get(t.eventType) as readonly unknown[] | undefined);
  const index = list?.indexOf(t) ?? -1;
  if (index < 0) throw new Error(`transition ${t.source.id} ${t.eventType} is not in its source`);
  return `${pathOf(t.source)} | ${eventLabel(t.eventType)} | #${index}`;
}

function infoOf(t: Transition): TransitionInfo {
  return {
    key: keyOf(t),
    source: pathOf(t.source),
    event: eventLabel(t.eventType),
    guard: guardLabel(t.guard),
    targets: t.target?.length ? t.target.map(pathOf).join(', ') : '',
  };
}

export function universe(machine: AnyStateMachine): {
  states: string[];
  transitions: TransitionInfo[];
} {
  const nodes = [machine.root, ...getStateNodes(machine.root)] as AnyStateNode[];
  const transitions: TransitionInfo[] = [];
  for (const node of nodes) {
    for (const t of (node.always ?? []) as Transition[]) transitions.push(infoOf(t));
    for (const defs of node.transitions.values()) {
      for (const t of defs as Transition[]) transitions.push(infoOf(t));
    }
  }
  return { states: nodes.slice(1).map(pathOf), transitions };
}

// ---------------------------------------------------------------------------------------------
// Planning: the pure exploration.

/** A scope that reports the transitions each microstep takes to `sink`. */
function spyScope(scope: any, sink: string[]): any {
  const system = Object.create(scope.system, {
    _sendInspectionEvent: {
      value: (event: { type: string; _transitions?: Transition[] }) => {
        if (event.type === '@xstate.microstep') {
          for (const t of event._transitions ?? []) sink.push(keyOf(t));
        }
      },
    },
  });
  return {
    ...scope,
    system,
    // Built-in actions (`xstate.*`: sendTo, emit, raise, spawn…) are effects and stay planned,
    // not run. A chart's own function actions are run, as the actor would run them: some
    // mutate the context in place, and the plan must see that.
    actionExecutor: (action: { type: string; info: unknown; params: unknown; exec?: Function }) => {
      if (!action.type.startsWith('xstate.')) action.exec?.(action.info, action.params);
    },
  };
}

function eventKey(event: EventObject): string {
  return JSON.stringify(event);
}

/** The leaf configuration of a snapshot: its atomic and final state nodes. */
function configuration(snapshot: Snapshot): string {
  return (snapshot._nodes as AnyStateNode[])
    .filter((n) => n.type === 'atomic' || n.type === 'final')
    .map(pathOf)
    .sort()
    .join(' + ');
}

function describe(events: readonly EventObject[]): string {
  if (events.length === 0) return '(initial)';
  return events
    .map((e) => {
      const { type, ...rest } = e as EventObject & Record<string, unknown>;
      const label = eventLabel(type);
      const fields = Object.entries(rest)
        .filter(([k]) => k !== 'callId' && k !== 'output' && k !== 'error')
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
      return fields.length ? `${label}(${fields.join(', ')})` : label;
    })
    .join(' → ');
}

export function plan(model: GraphModel<any>): Plan {
  const machine = model.provide(new FakeIo());
  const env = model.env();
  const input = model.input(env);
  const edges = new Map<string, Edge>();
  const initFires: string[] = [];
  const serialize = (s: Snapshot) => model.serialize(s);
  let parent: AnyActorRef | undefined;

  const logic = Object.create(machine);
  logic.getInitialSnapshot = (scope: any, given: unknown) => {
    initFires.length = 0;
    return machine.getInitialSnapshot(spyScope(scope, initFires), given);
  };
  logic.transition = (snapshot: Snapshot, event: EventObject, scope: any) => {
    const world = model.world?.[event.type];
    const fired: string[] = [];
    let next: Snapshot;
    if (world) next = world.pure(snapshot, event);
    else {
      if (model.host && !scope.self._parent) {
        // `sendParent` needs a parent; the planner's scope has none, so give it a sink.
        parent ??= createEmptyActor();
        scope.self._parent = parent;
      }
      const from = model.clone ? model.clone(snapshot) : snapshot;
      next = machine.transition(from, event, spyScope(scope, fired));
    }
    if (next.status === 'error') {
      throw new Error(`${model.name}: ${eventKey(event)} threw: ${String(next.error)}`);
    }
    const from = serialize(snapshot);
    edges.set(`${from}|${eventKey(event)}`, {
      source: snapshot,
      from,
      event,
      to: serialize(next),
      target: next,
      fired,
    });
    return next;
  };

  const options = {
    input,
    events: (s: Snapshot) => (s.status === 'active' ? model.events(s) : []),
    serializeState: serialize,
    limit: 50_000,
  };
  const shortest = getShortestPaths(logic, options as never);
  const pathTo = new Map<string, EventObject[]>();
  for (const p of shortest) {
    pathTo.set(
      serialize(p.state as Snapshot),
      p.steps.slice(1).map((s) => s.event as EventObject),
    );
  }

  const walks: Walk[] = [];
  // One walk per state configuration: the shortest path to any abstract state showing it.
  const byConfiguration = new Map<string, { state: Snapshot; events: EventObject[] }>();
  for (const p of shortest) {
    const config = configuration(p.state as Snapshot);
    const events = pathTo.get(serialize(p.state as Snapshot))!;
    const known = byConfiguration.get(config);
    if (!known || events.length < known.events.length) {
      byConfiguration.set(config, { state: p.state as Snapshot, events });
    }
  }
  for (const [config, { state, events }] of byConfiguration) {
    walks.push({
      kind: 'state',
      description: `reaches ${config}: ${describe(events)}`,
      events,
      expected: serialize(state),
    });
  }
  // Greedy transition cover, nearest edges first.
  const covered = new Set(initFires);
  const ordered = [...edges.values()]
    .filter((e) => pathTo.has(e.from))
    .sort((a, b) => pathTo.get(a.from)!.length - pathTo.get(b.from)!.length);
  for (const edge of ordered) {
    if (edge.fired.every((k) => covered.has(k))) continue;
    for (const k of edge.fired) covered.add(k);
    const events = [...pathTo.get(edge.from)!, edge.event];
    walks.push({
      kind: 'transition',
      description: `takes ${[...new Set(edge.fired)].join(' ; ')}: ${describe(events)}`,
      events,
      expected: edge.to,
      lastFires: edge.fired,
    });
  }
  if (model.simplePaths) {
    for (const p of getSimplePaths(logic, options as never)) {
      const events = p.steps.slice(1).map((s) => s.event as EventObject);
      walks.push({
        kind: 'simple',
        description: `simple path to ${configuration(p.state as Snapshot)}: ${describe(events)}`,
        events,
        expected: serialize(p.state as Snapshot),
      });
    }
  }
  return { model, states: pathTo.size, edges: [...edges.values()], walks, initFires };
}

// ---------------------------------------------------------------------------------------------
// Walking: the live actor.

export interface WalkResult {
  readonly reached: string;
  readonly lastFired: readonly string[];
  readonly fired: ReadonlySet<string>;
  readonly states: ReadonlySet<string>;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The delay (ms) behind an `xstate.after.*` event, resolved as the running machine would. */
function delayOf(snapshot: Snapshot, eventType: string): number {
  for (const node of snapshot._nodes as AnyStateNode[]) {
    for (const t of node.after as Transition[]) {
      if (t.eventType !== eventType) continue;
      if (typeof t.delay === 'number') return t.delay;
      const impl = (snapshot.machine.implementations.delays as Record<string, unknown>)[
        t.delay as string
      ];
      return typeof impl === 'function'
        ? (impl as (a: unknown) => number)({ context: snapshot.context, event: { type: '' } })
        : (impl as number);
    }
  }
  throw new Error(`no active delayed transition for ${eventType}`);
}

export async function walk(model: GraphModel<any>, events: readonly EventObject[]) {
  const io = new FakeIo();
  const machine = model.provide(io);
  const env = model.env();
  const input = model.input(env);
  const clock = new SimulatedClock();
  const fired = new Set<string>();
  const states = new Set<string>();
  let step: string[] = [];
  const see = (snapshot: Snapshot) => {
    for (const node of snapshot._nodes as AnyStateNode[]) if (node.parent) states.add(pathOf(node));
  };
  const root = createActor(model.host ? model.host(machine, input) : machine, {
    input,
    clock,
    inspect: (ev) => {
      if (ev.type !== '@xstate.microstep' || (ev.actorRef as { logic?: unknown }).logic !== machine)
        return;
      for (const t of ev._transitions as Transition[]) {
        const key = keyOf(t);
        step.push(key);
        fired.add(key);
        for (let n: AnyStateNode | undefined = t.source; n?.parent; n = n.parent) {
          states.add(pathOf(n));
        }
      }
      see(ev.snapshot as Snapshot);
    },
  });
  root.start();
  const actor: AnyActorRef = model.host ? root.getSnapshot().children.machine : root;
  const snapshot = () => actor.getSnapshot() as Snapshot;
  await flush();
  see(snapshot());
  try {
    for (const event of events) {
      step = [];
      const world = model.world?.[event.type];
      const type = event.type;
      if (world) world.live(env, event);
      else if (type.startsWith('xstate.after.')) clock.increment(delayOf(snapshot(), type));
      else if (type.startsWith('xstate.done.actor.')) {
        io.settle(type.slice('xstate.done.actor.'.length), {
          output: (event as { output?: unknown }).output,
        });
      } else if (type.startsWith('xstate.error.actor.')) {
        io.settle(type.slice('xstate.error.actor.'.length), {
          error: (event as { error?: unknown }).error,
        });
      } else actor.send(event);
      await flush();
      see(snapshot());
      if (snapshot().status === 'error') {
        throw new Error(`the actor failed on ${type}: ${String(snapshot().error)}`);
      }
    }
    return { reached: model.serialize(snapshot()), lastFired: step, fired, states };
  } finally {
    root.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Coverage.

export interface Coverage {
  readonly name: string;
  readonly variants: readonly string[];
  readonly states: readonly { readonly state: string; readonly walks: number }[];
  readonly transitions: readonly (TransitionInfo & { readonly walks: number })[];
  readonly walks: number;
  readonly abstractStates: number;
  readonly edges: number;
}

/** Plans every variant of one chart, walks every selected path, and counts what was visited. */
export async function cover(
  models: readonly GraphModel<any>[],
  onWalk?: (model: GraphModel<any>, w: Walk, result: WalkResult) => void,
): Promise<Coverage> {
  const machine = models[0]!.machine;
  const { states, transitions } = universe(machine);
  const stateWalks = new Map(states.map((s) => [s, 0]));
  const transitionWalks = new Map(transitions.map((t) => [t.key, 0]));
  let walks = 0;
  let abstractStates = 0;
  let edgeCount = 0;
  for (const model of models) {
    const p = plan(model);
    abstractStates += p.states;
    edgeCount += p.edges.length;
    for (const w of p.walks) {
      const result = await walk(model, w.events);
      onWalk?.(model, w, result);
      walks++;
      for (const s of result.states) stateWalks.set(s, (stateWalks.get(s) ?? 0) + 1);
      for (const k of result.fired) transitionWalks.set(k, (transitionWalks.get(k) ?? 0) + 1);
    }
  }
  return {
    name: models[0]!.name,
    variants: models.map((m) => m.variant),
    states: states.map((state) => ({ state, walks: stateWalks.get(state)! })),
    transitions: transitions.map((t) => ({ ...t, walks: transitionWalks.get(t.key)! })),
    walks,
    abstractStates,
    edges: edgeCount,
  };
}
