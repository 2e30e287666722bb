/**
 * A state chart as plain data: the machine's own definition (`machine.root`) walked into a tree
 * of states with their transitions, so the live view draws every chart from the code that runs
 * it and never from a copy that could drift.
 *
 * ## What it owns
 * - `chartModel(machine)`: the serialisable graph (states, nesting, initial child, transitions
 *   with event, guard, targets and actions, invoked actors, entry and exit actions).
 * - `CHARTS`: the catalogue of every machine in `src/machines/`, one model each.
 * - `activeStateIds(model, value)`: which nodes a snapshot's `value` puts in force.
 *
 * ## Invariants
 * - **Every state node of the machine appears once**, under its XState id; nesting is kept.
 * - **Every transition's source and targets are ids of nodes in the same model**: targets come
 *   from the resolved `StateNode`s, never from the config's strings.
 * - **Labels are derived, not stored**: `xstate.after.linger.<id>` reads `after linger`,
 *   `xstate.done.actor.render` reads `done(render)`; the raw event type is kept beside it.
 * - Building a model does no I/O and starts no actor.
 *
 * ## Races
 * - None: a model is computed once per machine object and never changes. A live value that
 *   names a state the model lacks (another machine's value) is ignored, not thrown on.
 *
 * ## Events
 * | Input | Output |
 * |---|---|
 * | a `StateMachine` | `ChartModel` (JSON-safe) |
 * | a snapshot `value` | the ids of the active nodes, root first |
 */
import type { AnyStateMachine, AnyStateNode, StateValue } from 'xstate';
import { deliveryMachine } from '../machines/delivery.js';
import { probeCoordinatorMachine } from '../machines/probeCoordinator.js';
import { probeLimiterMachine } from '../machines/probeLimiter.js';
import { processSupervisorMachine } from '../machines/processSupervisor.js';
import { readinessMachine } from '../machines/readiness.js';
import { registryLinkMachine } from '../machines/registryLink.js';
import { renderMachine } from '../machines/render.js';
import { renderCoordinatorMachine } from '../machines/renderCoordinator.js';
import { semaphoreMachine } from '../machines/semaphore.js';
import { teeMachine } from '../machines/tee.js';
import { waitingRoomMachine } from '../machines/waitingRoom.js';

export type ChartNodeType = 'atomic' | 'compound' | 'parallel' | 'final' | 'history';

export interface ChartTransition {
  /** Id of the node that declares it. */
  readonly source: string;
  /** The raw event type (`always` for eventless transitions). */
  readonly event: string;
  /** The event as a reader says it: `after linger`, `done(render)`, `slot.granted`. */
  readonly label: string;
  /** The guard's name, or null when unguarded. */
  readonly guard: string | null;
  /** Ids of target nodes; empty for a targetless transition (actions only). */
  readonly targets: readonly string[];
  readonly actions: readonly string[];
}

export interface ChartNode {
  readonly id: string;
  readonly key: string;
  readonly type: ChartNodeType;
  /** Ids of the initial children (compound: one; parallel and atomic: none). */
  readonly initial: readonly string[];
  readonly children: readonly ChartNode[];
  readonly transitions: readonly ChartTransition[];
  /** The logic names of invoked actors (`render`, `startProcess`). */
  readonly invokes: readonly string[];
  readonly entry: readonly string[];
  readonly exit: readonly string[];
}

export interface ChartModel {
  /** The machine id (`renderCoordinator`): live actors are matched to charts by it. */
  readonly id: string;
  readonly title: string;
  readonly root: ChartNode;
}

/** Every machine in `src/machines/`, in the order the page shows them. */
export const CHART_MACHINES: readonly {
  readonly machine: AnyStateMachine;
  readonly title: string;
}[] = [
  { machine: semaphoreMachine, title: 'Semaphore (render slots)' },
  { machine: renderCoordinatorMachine, title: 'Render coordinator (one per variant key)' },
  { machine: renderMachine, title: 'Render (one ffmpeg)' },
  { machine: deliveryMachine, title: 'Delivery (one per render request)' },
  { machine: processSupervisorMachine, title: 'Process supervisor (worker pools)' },
  { machine: waitingRoomMachine, title: 'Waiting room (admission queue)' },
  { machine: probeLimiterMachine, title: 'Probe limiter' },
  { machine: probeCoordinatorMachine, title: 'Probe coordinator (one per source)' },
  { machine: readinessMachine, title: 'Readiness latch' },
  { machine: teeMachine, title: 'Tee (variant-store write-back)' },
  { machine: registryLinkMachine, title: 'Cluster registry client (cluster mode)' },
];

/** What a guard, action or invoke source is called; inline functions by their own name. */
function nameOf(thing: unknown): string {
  if (typeof thing === 'string') return thing;
  if (thing !== null && (typeof thing === 'object' || typeof thing === 'function')) {
    const t = (thing as { type?: unknown }).type;
    if (typeof t === 'string') return t;
    const n = (thing as { name?: unknown }).name;
    if (typeof n === 'string' && n !== '') return n;
  }
  return 'inline';
}

const AFTER = 'xstate.after.';
const DONE_ACTOR = 'xstate.done.actor.';
const ERROR_ACTOR = 'xstate.error.actor.';
const DONE_STATE = 'xstate.done.state.';

/** A reader's label for an event type declared on `node`. */
export function eventLabel(event: string, node: AnyStateNode): string {
  const invokeName = (id: string) => {
    const found = node.invoke.find((i: { id: string }) => i.id === id);
    return found ? nameOf(found.src) : id;
  };
  if (event.startsWith(AFTER)) {
    const rest = event.slice(AFTER.length);
    const suffix = `.${node.id}`;
    const delay = rest.endsWith(suffix) ? rest.slice(0, -suffix.length) : rest;
    return /^\d+$/.test(delay) ? `after ${delay} ms` : `after ${delay}`;
  }
  if (event.startsWith(DONE_ACTOR)) return `done(${invokeName(event.slice(DONE_ACTOR.length))})`;
  if (event.startsWith(ERROR_ACTOR)) return `error(${invokeName(event.slice(ERROR_ACTOR.length))})`;
  if (event.startsWith(DONE_STATE)) return 'done(children)';
  return event;
}

interface RawTransition {
  readonly eventType: string;
  readonly guard?: unknown;
  readonly target?: readonly AnyStateNode[] | undefined;
  readonly actions?: readonly unknown[];
}

function transitionOf(node: AnyStateNode, t: RawTransition, event: string): ChartTransition {
  return {
    source: node.id,
    event,
    label: event === 'always' ? 'always' : eventLabel(event, node),
    guard: t.guard === undefined ? null : nameOf(t.guard),
    targets: (t.target ?? []).map((n) => n.id),
    actions: (t.actions ?? []).map(nameOf),
  };
}

function nodeOf(node: AnyStateNode): ChartNode {
  const transitions: ChartTransition[] = [];
  for (const [event, list] of node.transitions as Map<string, RawTransition[]>) {
    for (const t of list) transitions.push(transitionOf(node, t, event));
  }
  for (const t of (node.always ?? []) as RawTransition[]) {
    transitions.push(transitionOf(node, t, 'always'));
  }
  const initialTargets = (node.initial?.target ?? []) as readonly AnyStateNode[];
  return {
    id: node.id,
    key: node.key,
    type: node.type as ChartNodeType,
    initial: node.type === 'compound' ? initialTargets.map((n) => n.id) : [],
    children: Object.values(node.states as Record<string, AnyStateNode>).map(nodeOf),
    transitions,
    invokes: node.invoke.map((i: { src: unknown }) => nameOf(i.src)),
    entry: (node.entry as unknown[]).map(nameOf),
    exit: (node.exit as unknown[]).map(nameOf),
  };
}

/** The chart of `machine`, as JSON-safe data. */
export function chartModel(machine: AnyStateMachine, title: string = machine.id): ChartModel {
  if (machine === null || typeof machine !== 'object' || !('root' in machine)) {
    throw new TypeError('chartModel needs an XState StateMachine');
  }
  return { id: machine.id, title, root: nodeOf(machine.root) };
}

/** Every chart in `CHART_MACHINES`. */
export function allCharts(): ChartModel[] {
  return CHART_MACHINES.map(({ machine, title }) => chartModel(machine, title));
}

/** Every node of `model`, depth first, root included. */
export function flattenStates(model: ChartModel): ChartNode[] {
  const out: ChartNode[] = [];
  const visit = (n: ChartNode) => {
    out.push(n);
    for (const c of n.children) visit(c);
  };
  visit(model.root);
  return out;
}

/** The ids of the nodes `value` puts in force, root first; unknown keys are skipped. */
export function activeStateIds(model: ChartModel, value: StateValue): string[] {
  const out: string[] = [model.root.id];
  const visit = (node: ChartNode, v: StateValue) => {
    if (typeof v === 'string') {
      const child = node.children.find((c) => c.key === v);
      if (child) out.push(child.id);
      return;
    }
    for (const [key, sub] of Object.entries(v)) {
      const child = node.children.find((c) => c.key === key);
      if (!child) continue;
      out.push(child.id);
      if (sub !== undefined) visit(child, sub as StateValue);
    }
  };
  visit(model.root, value);
  return out;
}
