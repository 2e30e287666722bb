/**
 * docs/concurrency-replay.md, generated: how to record and replay, then one sequence diagram per
 * scenario, drawn by `sequence.ts` from a real recording kept beside the page
 * (`docs/recordings/<scenario>.ndjson`, written by `scripts/gen-concurrency-docs.ts --record`
 * from running proxies; the cluster hand-off from two node processes on a real Redis).
 * test/concurrencyDocs.test.ts checks that the page is exactly what these recordings give, so
 * a diagram cannot drift from its recording, and re-records every scenario to check the
 * recordings have not drifted from the code.
 *
 * ## Invariants
 * - **Pure**: the same recordings give the same page, byte for byte.
 * - **Every diagram names its filter and its file**, so a reader can open the same view with
 *   `audio-proxy replay docs/recordings/<scenario>.ndjson`.
 */
import type { Recording } from '../core/recording.js';
import { type SequenceFilter, sequenceOf, toMermaid } from './sequence.js';

export interface ReplayScenario {
  /** File name without `.ndjson`. */
  readonly id: string;
  readonly title: string;
  /** What to look for in the diagram (markdown). */
  readonly about: string;
  /** Which flow of the recording the diagram draws. */
  readonly filter: (recording: Recording) => SequenceFilter;
}

const coordinatorKey = (r: Recording): string | undefined =>
  r.header.actors
    .find((a) => a.chart === 'renderCoordinator')
    ?.name.slice('renderCoordinator:'.length);
const actorNamed = (name: string) => (r: Recording) => ({
  actor: r.header.actors.find((a) => a.name === name)?.actor,
});

/** The scenarios the page shows, in order. */
export const REPLAY_SCENARIOS: readonly ReplayScenario[] = [
  {
    id: 'coalesced-crowd',
    title: 'A coalesced crowd: three requests, one render',
    about:
      'Three clients ask for the same variant at once. The first request takes the render slot and starts the coordinator; the other two only `join` it (no slot, no second ffmpeg). Every chunk the worker produces goes up to the render, then to the coordinator, which hands it to each delivery: the fan-out is the coordinator, not ffmpeg. The slot is released once, after the render is `done`.',
    filter: (r) => ({ key: coordinatorKey(r) }),
  },
  {
    id: 'displaced-waiter',
    title: 'A displaced waiter: a live request takes a full queue from warm work',
    about:
      "One slot, a queue of one, through HTTP. A `POST /warm` of two `low` entries fills both: the first renders (a warm render is an _orphan_: no listener holds it, hence `orphaned`), the second waits. A live request (class `interactive`) then finds the queue full and takes the waiter's place: the queued warm entry is told `displaced` and leaves (`gone`), and since a live request is now waiting, the running warm render is `preempted` and releases its slot, which goes to the live request. The semaphore answers every request at once: nobody waits inside it. (The warm entries have one attempt each here, so none is retried.)",
    filter: actorNamed('semaphore'),
  },
  {
    id: 'recycled-pool',
    title: 'A recycled worker pool: replaced after its task budget',
    about:
      "With `AP_MAX_RENDERS_PER_WORKER_POOL=1` the supervisor retires the render pool after one task: the second render `acquire`s a pool that is being replaced, waits for the new one to `start`, and runs in it. The pool's supervisor is a state chart; its start is an invoked actor.",
    filter: actorNamed('pool:render'),
  },
  {
    id: 'waiting-room-promotion',
    title: 'A waiting-room promotion: a queued ticket gets the slot',
    about:
      'With `AP_WAITING_ROOM=1` and `AP_MAX_CONCURRENCY=2` the room may hold one render slot. Two sessions `join`: the first ticket is ready at once (the slot reserved for it), the second is queued and keeps polling its `status`. The first session renders with its cookie (an implicit `claim` of the reserved slot); when its run ends (`runEnded`) the room promotes the queued ticket to the freed slot, and its next `status` answers ready. Every call is answered at once: the room holds tickets, never a caller.',
    filter: actorNamed('waitingRoom'),
  },
  {
    id: 'cluster-handoff-node-a',
    title: 'A cluster hand-off, node A: full, so the request goes to a peer',
    about:
      "Two nodes, each in its own process, share one Redis; each has one render slot and no queue (`AP_MAX_CONCURRENCY=1`, `AP_QUEUE_SIZE=0`), and ffmpeg is paced so a render lasts six seconds. Node A's semaphore grants the first request its slot and answers the second, another variant, `rejected` at once: a full node does not answer 429 while a peer has room, it relays the request to that peer over HTTP (a hop header signed with the cluster's key). The relay is not an actor message, so node A's recording ends here for that request; node B's recording, below, picks it up. Each node records its own actors: the two recordings are separate files on separate clocks, one diagram per node.",
    filter: actorNamed('semaphore'),
  },
  {
    id: 'cluster-handoff-node-b',
    title: 'A cluster hand-off, node B: the relayed request rendered',
    about:
      "The same run as seen by node B: the relayed request arrives as an ordinary request (the hop header only tells B not to hand it on again), takes B's slot and renders. The flow is the same as on a single node; what the cluster adds happens before it, between the nodes and Redis.",
    filter: (r) => ({ key: coordinatorKey(r) }),
  },
];

const PROSE_HEAD = `# Concurrency you can replay

<!-- Generated by scripts/gen-concurrency-docs.ts from docs/recordings/*.ndjson; do not edit. -->

audio-proxy is a set of actors passing messages: an HTTP request becomes a _delivery_, a variant
key gets one _render coordinator_, a render takes one of the _semaphore_'s slots and runs one
_render_ whose _worker_ drives ffmpeg. The live view (\`/debug/actors\`) shows each actor's state
chart as it moves. This page is about the step after watching: keeping what happened, and
playing it again.

## Record

Set \`AP_FLIGHT_RECORDER\` to the number of entries to keep (e.g. \`20000\`; \`0\`, the default, is
off and attaches nothing to any actor). The recorder keeps, in a ring, every event an actor
received (who sent it, who got it), every snapshot after a step, and every telemetry message,
stamped with a monotonic clock (docs/performance.md has its cost). Get a recording:

- \`curl -o rec.ndjson http://127.0.0.1:9568/debug/recording\` on the metrics listener, at any time;
- \`kill -USR2 <pid>\` of \`audio-proxy serve\`: written to \`AP_FLIGHT_RECORDER_DIR\` (default the
  temp directory), the path in the log;
- by itself, when a check fails, with the last entries before it: \`actor_error\` (a state chart
  threw), \`queue_bound\` (the semaphore admitted a waiter past its bound),
  \`slot_after_render\` (a render is over and its slot is still held two seconds later),
  \`internal_error\` (a request stage failed unexpectedly). The file ends with an \`invariant\` entry
  naming the check, the actor and the step that broke it.

The format is NDJSON, versioned (\`src/core/recording.ts\`): a header line (\`format\`,
\`version\`, \`reason\`, \`timeOrigin\`, the actors and their state before the first entry), then
one entry per line (\`actor\`, \`event\`, \`snapshot\`, \`telemetry\`, \`invariant\`).

## Replay

\`audio-proxy replay rec.ndjson\` serves the live page over the file, offline, on
http://127.0.0.1:9569/debug/actors: a scrubber, play/pause, step by entry (or ← →), every chart
lit as it was at that entry, and filters (one request id, one cache key, one actor) that also
restrict stepping. A recording with a failed check opens with _go to the incident_ and _go to
the step that broke it_. \`#seq=N\` in the URL names an entry.

## Sequence diagrams

For a request, a key or an actor, the page draws the messages between the actors in the order
they were delivered, and gives them as Mermaid text (_Mermaid text_; with the recorder on, the
live page draws them too). \`HTTP\` is the world outside the actors (the request's handler and the
services acting for it); an arrow from the coordinator to a delivery is its broadcast;
consecutive identical arrows are one arrow \`×N\`. Each diagram below is generated from the
recording it names; open it with \`audio-proxy replay docs/recordings/<file>\` to step through it.
`;

/** The whole page for `recordings` (by scenario id). */
export function renderReplayDocs(recordings: ReadonlyMap<string, Recording>): string {
  const parts = [PROSE_HEAD];
  for (const scenario of REPLAY_SCENARIOS) {
    const recording = recordings.get(scenario.id);
    parts.push(`\n### ${scenario.title}\n\n${scenario.about}\n`);
    if (recording === undefined) {
      parts.push('\n*(no recording)*\n');
      continue;
    }
    const filter = scenario.filter(recording);
    const named = Object.entries(filter)
      .filter(([, v]) => v !== undefined)
      .map(
        ([k, v]) =>
          `${k} \`${k === 'actor' ? (recording.header.actors.find((a) => a.actor === v)?.name ?? v) : v}\``,
      )
      .join(', ');
    parts.push(
      `\nFrom \`docs/recordings/${scenario.id}.ndjson\` (${recording.entries.length} entries), filtered by ${named}:\n`,
    );
    parts.push(`\n\`\`\`mermaid\n${toMermaid(sequenceOf(recording, filter))}\`\`\`\n`);
  }
  return parts.join('');
}
