// The charts in docs/seeds/waiting-room.md are drawn from the machine, not by hand: this test
// renders the room chart and the call table from `waitingRoomMachine`'s state nodes and the
// slot chart from `SLOT_LIFECYCLE`, and fails when the document says anything else. Run it with
// UPDATE_DOCS=1 to rewrite the generated blocks after changing the machine.
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { AnyStateNode } from 'xstate';
import { waitingRoomMachine } from '../../../src/machines/waitingRoom.js';
import { SLOT_LIFECYCLE } from '../../../src/machines/waitingRoomSlots.js';

const DOC = new URL('../../../docs/seeds/waiting-room.md', import.meta.url);

type Transition = {
  target?: readonly AnyStateNode[];
  guard?: unknown;
  actions: readonly unknown[];
  eventType?: string;
  delay?: unknown;
};

const named = (x: unknown) =>
  typeof x === 'string' ? x : ((x as { type?: string } | undefined)?.type ?? 'inline');

function label(t: Transition, event: string | null): string {
  const parts: string[] = [];
  if (event) parts.push(event);
  if (t.guard !== undefined) parts.push(`[${named(t.guard)}]`);
  if (t.actions.length > 0) parts.push(`/ ${t.actions.map(named).join(', ')}`);
  return parts.join(' ');
}

function region(node: AnyStateNode, indent: string): string[] {
  const lines = [`${indent}state ${node.key} {`];
  const inner = `${indent}  `;
  const initial = (node.initial as unknown as { target: AnyStateNode[] } | undefined)?.target[0];
  if (initial) lines.push(`${inner}[*] --> ${initial.key}`);
  for (const child of Object.values(node.states) as AnyStateNode[]) {
    const edge = (t: Transition, event: string | null) => {
      const to = t.target?.[0]?.key ?? child.key;
      const text = label(t, event);
      lines.push(`${inner}${child.key} --> ${to}${text ? ` : ${text}` : ''}`);
    };
    for (const t of (child.always ?? []) as Transition[]) edge(t, null);
    for (const t of child.after as Transition[]) edge(t, `after ${named(t.delay)}`);
    for (const [event, defs] of child.transitions as Map<string, Transition[]>) {
      if (event.startsWith('xstate.after')) continue;
      for (const t of defs) edge(t, event);
    }
  }
  lines.push(`${indent}}`);
  return lines;
}

/** The room chart: the parallel root with its regions, every transition of every state. */
function roomChart(): string {
  const root = waitingRoomMachine.root;
  const lines = ['```mermaid', 'stateDiagram-v2'];
  lines.push(`  state ${root.key} {`);
  const regions = Object.values(root.states) as AnyStateNode[];
  regions.forEach((node, i) => {
    if (i > 0) lines.push('    --');
    lines.push(...region(node, '    '));
  });
  lines.push('  }', '```');
  return lines.join('\n');
}

/** What every call does before the room state is consulted: the root's handlers, in order. */
function callTable(): string {
  const rows: string[][] = [['event', 'guard', 'actions, in order']];
  for (const [event, defs] of waitingRoomMachine.root.transitions as Map<string, Transition[]>) {
    for (const t of defs) {
      const guard = t.guard === undefined ? '' : `\`${named(t.guard)}\``;
      rows.push([`\`${event}\``, guard, t.actions.map((a) => `\`${named(a)}\``).join(' → ')]);
    }
  }
  // Columns padded the way the formatter (biome) lays out a markdown table, so formatting the
  // docs does not make them disagree with this test.
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) => `| ${cells.map((x, c) => x.padEnd(widths[c]!)).join(' | ')} |`;
  return [line(rows[0]!), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join(
    '\n',
  );
}

/** One runner slot's life, from the table every slot change is checked against. */
function slotChart(): string {
  const lines = ['```mermaid', 'stateDiagram-v2', '  direction LR', '  [*] --> idle'];
  for (const [from, edges] of Object.entries(SLOT_LIFECYCLE)) {
    for (const [edge, to] of Object.entries(edges)) lines.push(`  ${from} --> ${to} : ${edge}`);
  }
  lines.push('```');
  return lines.join('\n');
}

const BLOCKS: Record<string, () => string> = {
  'room-chart': roomChart,
  'call-table': callTable,
  'slot-chart': slotChart,
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

describe('docs/seeds/waiting-room.md', () => {
  it('shows the charts and the call table the machine actually has', () => {
    const doc = readFileSync(DOC, 'utf8');
    const expected = withBlocks(doc);
    if (process.env.UPDATE_DOCS) writeFileSync(DOC, expected);
    else expect(doc).toBe(expected);
  });

  it('draws every state and every slot edge', () => {
    const chart = roomChart();
    for (const state of ['open', 'busy', 'full', 'choosing', 'armed']) {
      expect(chart).toContain(`${state} -->`);
    }
    expect(chart).toContain('--> off');
    expect(slotChart().match(/-->/g)).toHaveLength(
      1 + Object.values(SLOT_LIFECYCLE).reduce((n, edges) => n + Object.keys(edges).length, 0),
    );
  });
});
