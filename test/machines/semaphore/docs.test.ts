// The charts in docs/seeds/semaphore.md are drawn from the machine, not by hand: the decision
// flowcharts and the transition table come from `semaphoreMachine`'s own transition list (the
// order of its guards included), and the participant chart from exploring the machine with the
// graph model of test/graph/ (every place one caller can move between, and which transition
// moves it). The test fails when the page says anything else; UPDATE_DOCS=1 rewrites the blocks.
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { AnyMachineSnapshot } from 'xstate';
import {
  DEFAULT_HOLD_MS,
  HOLD_SAMPLES,
  type SemaphoreContext,
  semaphoreMachine,
} from '../../../src/machines/semaphore.js';
import { MODELS } from '../../graph/models.js';
import { plan, universe } from '../../graph/walk.js';

const DOC = new URL('../../../docs/seeds/semaphore.md', import.meta.url);

type Transition = { guard?: unknown; actions: readonly unknown[] };
const named = (x: unknown) =>
  typeof x === 'string' ? x : ((x as { type?: string } | undefined)?.type ?? 'inline');

const serving = semaphoreMachine.root.states.serving!;
const branches = (event: string) => (serving.transitions.get(event) ?? []) as Transition[];

/** One flowchart per event with a guard list: XState tries the guards in order; first wins. */
function decisions(): string {
  const out: string[] = [];
  for (const event of ['request', 'release', 'gone']) {
    const list = branches(event);
    const lines = ['```mermaid', 'flowchart TD', `  start(["${event}"])`];
    let from = 'start';
    let edge = '';
    list.forEach((t, i) => {
      const act = `a${i}["${t.actions.map(named).join(', ') || 'nothing'}"]`;
      if (t.guard === undefined) {
        lines.push(`  ${from} -->${edge} ${act}`);
        return;
      }
      const ask = `g${i}{"${named(t.guard)}?"}`;
      lines.push(`  ${from} -->${edge} ${ask}`);
      lines.push(`  g${i} -->|yes| ${act}`);
      from = `g${i}`;
      edge = '|no|';
    });
    const last = list[list.length - 1]!;
    if (last.guard !== undefined) lines.push(`  ${from} -->|no| ignored["nothing happens"]`);
    lines.push('```');
    out.push(lines.join('\n'));
  }
  return out.join('\n\n');
}

/** Every transition of the chart, in the order XState tries them. */
function transitionTable(): string {
  const rows = [['event', 'guard (tried in order)', 'actions']];
  for (const [event, list] of serving.transitions) {
    for (const t of list as Transition[]) {
      rows.push([
        `\`${event}\``,
        t.guard === undefined ? '(otherwise)' : `\`${named(t.guard)}\``,
        t.actions.map((a) => `\`${named(a)}\``).join(', '),
      ]);
    }
  }
  const widths = rows[0]!.map((_, c) => Math.max(3, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) => `| ${cells.map((x, c) => x.padEnd(widths[c]!)).join(' | ')} |`;
  return [line(rows[0]!), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join(
    '\n',
  );
}

/** Where caller `id` is in a snapshot. */
function placeOf(snapshot: AnyMachineSnapshot, id: string): string {
  const { table } = snapshot.context as SemaphoreContext;
  const held = table.holders.get(id);
  if (held?.preempted) return 'preempted';
  if (held?.yieldable) return 'orphaned';
  if (held) return 'holding';
  if (table.waiters.has(id)) return 'waiting';
  return 'unknown';
}

/**
 * One caller's life, from the explored graph: for every explored step and every caller, the
 * place before and after, labelled with the transition that fired. Steps by other callers that
 * leave this one where it was are left out; its own are kept, even when it stays put.
 */
function participantChart(): string {
  const model = MODELS.semaphore![0]!;
  const guards = new Map(universe(semaphoreMachine).transitions.map((t) => [t.key, t]));
  const edges = new Set<string>();
  for (const edge of plan(model).edges) {
    const event = edge.event as { type: string; id?: string; capacity?: number };
    for (const id of ['a', 'b', 'c']) {
      const from = placeOf(edge.source, id);
      const to = placeOf(edge.target, id);
      const own = event.id === id;
      if ((!own && from === to) || edge.fired.length === 0) continue;
      let label: string;
      if (event.type === 'world.capacity') {
        label = event.capacity === 2 ? 'capacity raised' : 'capacity lowered';
      } else {
        // The transition that decided (a raised re-request fires a second one: the first decides).
        const decided = guards.get(edge.fired[0]!)!;
        const guard = decided.guard === '' ? 'otherwise' : decided.guard;
        label = `${own ? '' : "another's "}${event.type} [${guard}]`;
      }
      edges.add(`  ${from} --> ${to}: ${label}`);
    }
  }
  return ['```mermaid', 'stateDiagram-v2', '  [*] --> unknown', ...[...edges].sort(), '```'].join(
    '\n',
  );
}

const BLOCKS: Record<string, () => string> = {
  decisions,
  'transition-table': transitionTable,
  'participant-chart': participantChart,
};

function withBlocks(doc: string): string {
  let out = doc;
  for (const [name, render] of Object.entries(BLOCKS)) {
    const open = `<!-- generated:${name} -->`;
    const close = `<!-- /generated:${name} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf(close);
    if (start < 0 || end < start) throw new Error(`docs: missing ${open} … ${close}`);
    out = `${out.slice(0, start + open.length)}\n${render()}\n${out.slice(end)}`;
  }
  return out;
}

describe('docs/seeds/semaphore.md', () => {
  it('shows the decisions, the table and the participant chart the machine actually has', () => {
    const doc = readFileSync(DOC, 'utf8');
    const expected = withBlocks(doc);
    if (process.env.UPDATE_DOCS) writeFileSync(DOC, expected);
    else expect(doc).toBe(expected);
  });

  it('draws every guarded branch, and every place a caller can be in', () => {
    const flow = decisions();
    for (const event of ['request', 'release', 'gone']) {
      for (const t of branches(event)) {
        if (t.guard !== undefined) expect(flow).toContain(`{"${named(t.guard)}?"}`);
      }
    }
    const life = participantChart();
    for (const edge of [
      'unknown --> holding: request [slotFree]',
      'unknown --> waiting: request [queueHasRoom]',
      'unknown --> unknown: request [otherwise]',
      "waiting --> holding: another's release [isHolder]",
      "waiting --> unknown: another's request [outranksAWaiter]",
      'waiting --> unknown: gone [isWaiter]',
      'holding --> unknown: release [isHolder]',
      'holding --> orphaned: orphaned [isHolder]',
      "orphaned --> preempted: another's request [queueHasRoom]",
      'orphaned --> holding: adopted [isHolder]',
      'preempted --> unknown: release [isHolder]',
    ]) {
      expect(life).toContain(edge);
    }
  });

  it('states the constants the code uses', () => {
    const doc = readFileSync(DOC, 'utf8');
    expect(doc).toContain(`\`HOLD_SAMPLES\` = ${HOLD_SAMPLES}`);
    expect(doc).toContain(
      `\`DEFAULT_HOLD_MS\` = ${DEFAULT_HOLD_MS.toLocaleString('en-US').replaceAll(',', '_')}`,
    );
  });
});
