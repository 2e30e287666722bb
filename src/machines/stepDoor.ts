/**
 * A chart's door: the one place its steps meet the world. A chart whose guards and actions need
 * the time or a limit that changes at run time reads them from the event (a `step` stamped on
 * it), never from a clock or a provider; the door stamps an event that arrives without one,
 * reading the world once, before the chart sees it. So the chart is a function of
 * (snapshot, stamped event), and every guard and action of one step sees the same reading.
 *
 * ## Invariants
 * - **One reading per step**: `stamp` runs once per event that enters the machine, never for an
 *   event the chart raises to itself (that one already carries its step).
 * - **A stamped event passes untouched**: a caller (or a test) that stamps its own step decides
 *   what the step reads, and `transition()` then reads nothing else.
 * - **XState's own events** (`xstate.*`) and events sent to a machine that is not running pass
 *   unstamped: there is nothing to read for them.
 * - **`provide()` keeps the door**: a machine provided from a doored one is doored too.
 *
 * ## Races
 * - None: the door runs inside the step, on the actor's turn, like the chart it guards.
 */
import type { AnyEventObject, AnyStateMachine, ContextFrom, EventFromLogic } from 'xstate';

/**
 * Puts a door on `machine` (in place, and returned): `transition`, `microstep` and
 * `getTransitionData` (what `snapshot.can()` asks) hand the chart `stamp(context, event)`
 * instead of `event`. `stamp` returns the event itself when it already carries a step.
 */
export function stampAtTheDoor<M extends AnyStateMachine>(
  machine: M,
  stamp: (context: ContextFrom<M>, event: EventFromLogic<M>) => EventFromLogic<M>,
): M {
  install(machine, stamp);
  return machine;
}

/** Loose on purpose: the generic signature above is what callers are held to. */
type Stamp = (context: any, event: any) => AnyEventObject;

function install(door: AnyStateMachine, stamp: Stamp): AnyStateMachine {
  // XState binds these to the machine in its constructor; the door keeps the originals.
  const transition = door.transition;
  const microstep = door.microstep.bind(door);
  const getTransitionData = door.getTransitionData.bind(door);
  const provide = door.provide.bind(door);
  const stamped = (snapshot: { status: string; context: unknown }, event: AnyEventObject) =>
    snapshot.status !== 'active' || event.type.startsWith('xstate.')
      ? event
      : stamp(snapshot.context, event);
  door.transition = (snapshot, event, scope) =>
    transition(snapshot, stamped(snapshot, event), scope);
  door.microstep = (snapshot, event, scope) => microstep(snapshot, stamped(snapshot, event), scope);
  door.getTransitionData = (snapshot, event) =>
    getTransitionData(snapshot, stamped(snapshot, event));
  door.provide = (implementations) => install(provide(implementations), stamp);
  return door;
}
