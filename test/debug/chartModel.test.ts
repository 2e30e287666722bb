/**
 * The chart model is the machine's own definition as data: for every machine in the catalogue,
 * each state node of the machine appears once in the model (checked against an independent
 * walk of `machine.root`), every transition's source and targets name nodes of that model, and
 * the model survives JSON. Labels of delayed and invoke-completion events read as words, and a
 * live `value` maps to the ids of the nodes it puts in force.
 */

import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import {
  activeStateIds,
  allCharts,
  CHART_MACHINES,
  chartModel,
  flattenStates,
} from '../../src/debug/chartModel.js';
import { processSupervisorMachine } from '../../src/machines/processSupervisor.js';
import { renderCoordinatorMachine } from '../../src/machines/renderCoordinator.js';
import { waitingRoomMachine } from '../../src/machines/waitingRoom.js';

/** State ids by an independent walk of the StateNode tree. */
function nodeIds(machine: AnyStateMachine): string[] {
  const ids: string[] = [];
  const visit = (n: AnyStateNode) => {
    ids.push(n.id);
    for (const c of Object.values(n.states as Record<string, AnyStateNode>)) visit(c);
  };
  visit(machine.root);
  return ids;
}

/** Transitions counted on the StateNode tree: one per candidate, `always` included. */
function transitionCount(machine: AnyStateMachine): number {
  let n = 0;
  const visit = (node: AnyStateNode) => {
    for (const list of node.transitions.values()) n += list.length;
    n += node.always?.length ?? 0;
    for (const c of Object.values(node.states as Record<string, AnyStateNode>)) visit(c);
  };
  visit(machine.root);
  return n;
}

describe('chartModel: every machine', () => {
  it('covers the eleven machines of src/machines', () => {
    expect(CHART_MACHINES.map((c) => c.machine.id).sort()).toEqual(
      [
        'waitingRoom',
        'registryLink',
        'delivery',
        'probeCoordinator',
        'probeLimiter',
        'processSupervisor',
        'readiness',
        'render',
        'renderCoordinator',
        'semaphore',
        'tee',
      ].sort(),
    );
  });

  for (const { machine } of CHART_MACHINES) {
    describe(machine.id, () => {
      const model = chartModel(machine);
      const states = flattenStates(model);
      const ids = new Set(states.map((s) => s.id));

      it('has every state of the machine exactly once', () => {
        const expected = nodeIds(machine);
        expect(states.map((s) => s.id).sort()).toEqual([...expected].sort());
        expect(ids.size).toBe(states.length);
        expect(expected.length).toBeGreaterThan(1);
      });

      it('has every transition, each from and to states that exist', () => {
        const transitions = states.flatMap((s) => s.transitions);
        expect(transitions.length).toBe(transitionCount(machine));
        expect(transitions.length).toBeGreaterThan(0);
        for (const s of states) {
          for (const t of s.transitions) {
            expect(t.source).toBe(s.id);
            for (const target of t.targets) expect(ids.has(target)).toBe(true);
            expect(t.label).not.toMatch(/^xstate\./);
          }
          for (const i of s.initial) expect(s.children.map((c) => c.id)).toContain(i);
          if (s.type === 'compound') expect(s.initial).toHaveLength(1);
        }
      });

      it('round-trips through JSON unchanged', () => {
        expect(JSON.parse(JSON.stringify(model))).toEqual(model);
      });
    });
  }
});

describe('chartModel: labels and live values', () => {
  const coordinator = chartModel(renderCoordinatorMachine);
  const byId = new Map(flattenStates(coordinator).map((s) => [s.id, s]));

  it('names a delay by its name and an invoke outcome by the invoked logic', () => {
    const completed = byId.get('renderCoordinator.completed')!;
    const linger = completed.transitions.find((t) => t.event.startsWith('xstate.after.'));
    expect(linger?.label).toBe('after linger');
    expect(linger?.targets).toEqual(['renderCoordinator.stopped']);
    const rendering = byId.get('renderCoordinator.rendering')!;
    expect(rendering.invokes).toEqual(['render']);
    expect(rendering.transitions.map((t) => t.label)).toContain('error(render)');
    const supervisor = chartModel(processSupervisorMachine);
    const starting = flattenStates(supervisor).find((s) => s.id === 'processSupervisor.starting')!;
    expect(starting.transitions.map((t) => t.label)).toContain('done(startProcess)');
  });

  it('keeps guards, actions and eventless transitions', () => {
    const admitting = byId.get('renderCoordinator.admitting')!;
    expect(admitting.transitions.map((t) => [t.event, t.guard, t.targets])).toEqual([
      ['always', 'admittedAtOnce', ['renderCoordinator.rendering']],
      ['always', null, ['renderCoordinator.queued']],
    ]);
    const streaming = byId.get('renderCoordinator.rendering.streaming')!;
    const done = streaming.transitions.find((t) => t.event === 'render.done')!;
    expect(done.actions).toContain('releaseSlot');
    expect(done.targets).toEqual(['renderCoordinator.completed']);
  });

  it('maps a nested value and a parallel value to the active node ids', () => {
    expect(activeStateIds(coordinator, { rendering: 'streaming' })).toEqual([
      'renderCoordinator',
      'renderCoordinator.rendering',
      'renderCoordinator.rendering.streaming',
    ]);
    const room = chartModel(waitingRoomMachine);
    expect(activeStateIds(room, { room: 'busy', sweeper: 'armed' })).toEqual([
      'waitingRoom',
      'waitingRoom.room',
      'waitingRoom.room.busy',
      'waitingRoom.sweeper',
      'waitingRoom.sweeper.armed',
    ]);
    expect(activeStateIds(coordinator, 'nonsense')).toEqual(['renderCoordinator']);
  });

  it('refuses something that is not a machine', () => {
    expect(() => chartModel({} as AnyStateMachine)).toThrow(TypeError);
  });

  it('builds the whole catalogue', () => {
    expect(allCharts().map((c) => c.id)).toEqual(CHART_MACHINES.map((c) => c.machine.id));
  });
});
