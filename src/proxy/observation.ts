/**
 * Who watches the actors: the inspector (opt-in, `inspect` option), the flight recorder
 * (`AP_FLIGHT_RECORDER` > 0) and the live view (`/debug/actors`, always). The composition root
 * asks for one XState observer and one `track(actor, name)`, and this file decides who gets what.
 *
 * ## Invariants
 * - **Connected before the first actor exists**: `openObservation` runs before any actor is
 *   created, so none goes unseen by the inspector or the recorder.
 * - **Off costs nothing**: with neither the inspector nor the recorder there is no observer at
 *   all (`inspect` is `{}`), so XState builds no inspection event.
 * - **One name per actor everywhere**: `watchActors` names each singleton in the live view and
 *   in the recorder alike, and its `track` does both for every actor that comes later.
 */
import { tmpdir } from 'node:os';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import type { Config } from '../config/index.js';
import { createLiveView, type LiveView } from '../debug/liveView.js';
import { createFlightRecorder, type FlightRecorder } from '../debug/recorder.js';
import {
  type InspectObserver,
  type InspectOption,
  inspectRedactions,
  openInspection,
  scrubber,
} from '../inspect.js';

export interface Observation {
  readonly inspection: Awaited<ReturnType<typeof openInspection>>;
  readonly recorder: FlightRecorder | undefined;
  /** Spread into every `createActor` options: the one observer, or nothing. */
  readonly inspect: { inspect?: InspectObserver };
  /** Tells the recorder which actor is the semaphore (its invariant checks read it). */
  watchSemaphore(semaphore: AnyActorRef): void;
}

export async function openObservation(
  boot: Config,
  inspectOption: InspectOption | undefined,
  logger: {
    warn(fields: object, message: string): void;
    error(fields: object, message: string): void;
  },
): Promise<Observation> {
  const inspection = await openInspection(inspectOption, inspectRedactions(boot));
  let semaphore: AnyActorRef | undefined;
  const recorder =
    boot.flightRecorder > 0
      ? createFlightRecorder({
          capacity: boot.flightRecorder,
          dir: boot.flightRecorderDir ?? tmpdir(),
          scrub: scrubber(inspectRedactions(boot)),
          semaphore: () => semaphore,
          onSaved: (path, reason) => logger.warn({ path, reason }, 'flight recorder saved'),
          onSaveError: (err, reason) =>
            logger.error({ err, reason }, 'flight recorder could not save'),
        })
      : undefined;
  const observer = observeBoth(inspection.observer, recorder?.observer);
  return {
    inspection,
    recorder,
    inspect: observer ? { inspect: observer } : {},
    watchSemaphore: (ref) => {
      semaphore = ref;
    },
  };
}

/**
 * The live view over `actors`, and the `track` that names every later actor in it and in the
 * recorder (when one runs).
 */
export function watchActors(
  recorder: FlightRecorder | undefined,
  actors: ReadonlyArray<{ readonly name: string; readonly actor: AnyActorRef }>,
): { readonly liveView: LiveView; readonly track: (actor: AnyActorRef, name: string) => void } {
  const liveView = createLiveView({
    actors,
    ...(recorder ? { recording: () => recorder.recording('live') } : {}),
  });
  if (recorder === undefined) return { liveView, track: liveView.track };
  for (const { name, actor } of actors) recorder.name(actor, name);
  return {
    liveView,
    track: (actor, name) => {
      liveView.track(actor, name);
      recorder.name(actor, name);
    },
  };
}

/** One observer for XState from the inspector's and the recorder's, or none when neither is. */
function observeBoth(
  inspector: InspectObserver | undefined,
  recorder: ((event: InspectionEvent) => void) | undefined,
): InspectObserver | undefined {
  if (recorder === undefined) return inspector;
  if (inspector === undefined) return recorder;
  const forward =
    typeof inspector === 'function'
      ? inspector
      : (event: InspectionEvent) => inspector.next?.(event);
  return (event: InspectionEvent) => {
    recorder(event);
    forward(event);
  };
}
