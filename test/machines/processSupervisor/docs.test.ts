/**
 * The chart in docs/seeds/process-supervisor.md is generated from the machine's own definition:
 * this test walks every state node and transition of `processSupervisorMachine`, renders a
 * Mermaid stateDiagram, and fails if the page's diagram differs in any edge, guard or state,
 * so the document cannot drift from the code. It also checks the page names every constant.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import type { AnyStateMachine } from 'xstate';
import {
  DEFAULT_MAX_TASKS,
  DRAIN_TIMEOUT_MS,
  HEALTH_DEADLINE_MS,
  HEALTH_INTERVAL_MS,
  processSupervisorMachine,
} from '../../../src/machines/processSupervisor.js';

interface Node {
  readonly key: string;
  readonly path: readonly string[];
  readonly states: Record<string, Node>;
  readonly initial?: { readonly target: readonly Node[] };
  readonly transitions: Map<string, readonly Transition[]>;
  readonly always?: readonly Transition[];
}
interface Transition {
  readonly target?: readonly Node[];
  readonly guard?: string | { readonly type: string };
  readonly reenter?: boolean;
}

const idOf = (node: Node) => node.path.join('_');
const nameOf = (node: Node) => node.path.join('.');

/** Follows initial states down to the leaf a transition actually lands in. */
function leafOf(node: Node): Node {
  const first = node.initial?.target[0];
  return first ? leafOf(first) : node;
}

/** XState's internal event names, as a reader would say them. */
function eventLabel(eventType: string): string {
  const done = /^xstate\.done\.actor\.(\w+)$/.exec(eventType);
  if (done) return `${done[1]} done`;
  const failed = /^xstate\.error\.actor\.(\w+)$/.exec(eventType);
  if (failed) return `${failed[1]} failed`;
  const delayed = /^xstate\.after\.(\w+)\./.exec(eventType);
  if (delayed) return `after ${delayed[1]}`;
  return eventType;
}

function guardLabel(t: Transition): string {
  if (t.guard === undefined) return '';
  return ` [${typeof t.guard === 'string' ? t.guard : t.guard.type}]`;
}

/**
 * One node per leaf state; a transition declared on a compound state is drawn from each of its
 * leaves (that is when it can fire), and a target that is compound is drawn to the leaf it enters.
 * Targetless transitions (answers, bookkeeping) are left out: they never change state.
 */
function chartOf(machine: AnyStateMachine): string {
  const root = machine.root as unknown as Node;
  const leaves: Node[] = [];
  const collect = (node: Node, ancestors: Node[]) => {
    const children = Object.values(node.states);
    if (children.length === 0) leaves.push(node);
    for (const child of children) collect(child, [...ancestors, node]);
  };
  collect(root, []);
  const lines = ['stateDiagram-v2'];
  for (const leaf of leaves) lines.push(`  state "${nameOf(leaf)}" as ${idOf(leaf)}`);
  lines.push(`  [*] --> ${idOf(leafOf(root))}`);
  const chain = (leaf: Node): Node[] => {
    const nodes: Node[] = [];
    let node: Node | undefined = root;
    nodes.push(root);
    for (const key of leaf.path) {
      node = node.states[key];
      if (node) nodes.push(node);
    }
    return nodes.reverse(); // the leaf first: its own transitions take priority
  };
  for (const leaf of leaves) {
    for (const node of chain(leaf)) {
      for (const [eventType, transitions] of node.transitions) {
        for (const t of transitions) {
          const target = t.target?.[0];
          if (!target) continue;
          lines.push(
            `  ${idOf(leaf)} --> ${idOf(leafOf(target))}: ${eventLabel(eventType)}${guardLabel(t)}`,
          );
        }
      }
      for (const t of node.always ?? []) {
        const target = t.target?.[0];
        if (target)
          lines.push(`  ${idOf(leaf)} --> ${idOf(leafOf(target))}: always${guardLabel(t)}`);
      }
    }
  }
  return lines.join('\n');
}

const page = readFileSync(
  new URL('../../../docs/seeds/process-supervisor.md', import.meta.url),
  'utf8',
);

if (process.env.PRINT_SUPERVISOR_CHART) console.log(chartOf(processSupervisorMachine));

describe('docs/seeds/process-supervisor.md', () => {
  test('its Mermaid chart is the machine, edge for edge', () => {
    const block = /```mermaid\n([\s\S]*?)\n```/.exec(page)?.[1];
    expect(block, 'the page has a mermaid block').toBeDefined();
    expect(block).toBe(chartOf(processSupervisorMachine));
  });

  test('the chart has every state and no transition without a target', () => {
    const chart = chartOf(processSupervisorMachine);
    for (const state of [
      'notStarted',
      'starting',
      'running.serving',
      'running.probing',
      'draining',
      'restarting.stoppingOld',
      'restarting.startingNew',
      'failed',
      'stopping.draining',
      'stopping.killing',
      'stopped',
    ]) {
      expect(chart).toContain(`state "${state}"`);
    }
  });

  test('it states the defaults the code uses', () => {
    for (const [name, value] of Object.entries({
      HEALTH_INTERVAL_MS,
      HEALTH_DEADLINE_MS,
      DRAIN_TIMEOUT_MS,
      DEFAULT_MAX_TASKS,
    })) {
      expect(page).toContain(`\`${name}\` = ${value.toLocaleString('en-US').replaceAll(',', '_')}`);
    }
  });
});
