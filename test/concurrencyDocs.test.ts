// docs/concurrency-replay.md cannot drift: the page is exactly what the committed recordings
// (docs/recordings/*.ndjson) give, and the recordings still match the code: the displaced-waiter
// scenario (a real semaphore, deterministic) re-records to the same diagram, and the coalesced
// crowd (a real proxy and ffmpeg; chunk counts vary run to run) to the same participants and
// the same kinds of message, and so does the waiting-room promotion (a real proxy; how many
// status polls land before the first run ends varies), and the cluster hand-off (two node
// processes on a real Redis; one diagram per node). Regenerate with: npx tsx scripts/gen-concurrency-docs.ts --record
// About 20 s (four real proxies, one redis-server).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  committedRecordings,
  pagePath,
  recordClusterHandoff,
  recordCoalescedCrowd,
  recordDisplacedWaiter,
  recordWaitingRoomPromotion,
} from '../scripts/gen-concurrency-docs.js';
import type { Recording } from '../src/core/recording.js';
import { REPLAY_SCENARIOS, renderReplayDocs } from '../src/debug/replayDocs.js';
import { sequenceOf, toMermaid } from '../src/debug/sequence.js';

const committed = committedRecordings();
const diagram = (id: string, r: Recording) => {
  const scenario = REPLAY_SCENARIOS.find((s) => s.id === id)!;
  return sequenceOf(r, scenario.filter(r));
};
/** Who talks to whom, and with what kind of message (ids and counts left out). */
const skeleton = (id: string, r: Recording) => {
  const s = diagram(id, r);
  const label = new Map(s.participants.map((p) => [p.id, p.label.replace(/ sub-\d+$/, '')]));
  return [
    ...new Set(
      s.messages.map((m) => `${label.get(m.from)} -> ${label.get(m.to)}: ${m.label.split(' ')[0]}`),
    ),
  ].sort();
};

describe('docs/concurrency-replay.md', () => {
  it('is exactly what the committed recordings give', () => {
    expect(committed.size).toBe(REPLAY_SCENARIOS.length);
    expect(readFileSync(pagePath(), 'utf8')).toBe(renderReplayDocs(committed));
  });

  it('draws the flow the issue names for a coalesced crowd', () => {
    const mermaid = toMermaid(diagram('coalesced-crowd', committed.get('coalesced-crowd')!));
    for (const step of [
      /HTTP/,
      /->>P\d+: request render-\d+/, // HTTP → semaphore
      /->>P\d+: join sub-\d+/, // HTTP → coordinator
      /render\.chunk/, // render → coordinator
      /worker\.chunk/, // worker → render
      /->>P\d+: done\n/, // coordinator → subscribers
      /->>P\d+: release render-\d+/, // coordinator → semaphore
    ]) {
      expect(mermaid).toMatch(step);
    }
  });

  it('re-records the displaced waiter to the same diagram', async () => {
    const fresh = await recordDisplacedWaiter();
    const before = committed.get('displaced-waiter')!;
    expect(toMermaid(diagram('displaced-waiter', fresh))).toBe(
      toMermaid(diagram('displaced-waiter', before)),
    );
  });

  it('re-records the coalesced crowd to the same participants and kinds of message', async () => {
    const fresh = await recordCoalescedCrowd();
    expect(skeleton('coalesced-crowd', fresh)).toEqual(
      skeleton('coalesced-crowd', committed.get('coalesced-crowd')!),
    );
  }, 60_000);

  it('re-records the waiting-room promotion to the same participants and kinds of message', async () => {
    const fresh = await recordWaitingRoomPromotion();
    const kinds = skeleton('waiting-room-promotion', fresh);
    expect(kinds).toEqual(
      skeleton('waiting-room-promotion', committed.get('waiting-room-promotion')!),
    );
    // the promotion itself: two joins, two claims (the second only after the promotion), two ends
    const mermaid = toMermaid(diagram('waiting-room-promotion', fresh));
    expect(mermaid).toMatch(/join ×2/);
    expect(mermaid.match(/: claim\n/g)).toHaveLength(2);
    expect(mermaid.match(/: runEnded\n/g)).toHaveLength(2);
  }, 60_000);

  it('re-records the cluster hand-off to the same two diagrams, kinds of message', async () => {
    const { a, b } = await recordClusterHandoff();
    for (const [id, fresh] of [
      ['cluster-handoff-node-a', a],
      ['cluster-handoff-node-b', b],
    ] as const) {
      expect(skeleton(id, fresh)).toEqual(skeleton(id, committed.get(id)!));
    }
    // node A refused the second request a slot (so it went to node B), node B rendered it
    expect(toMermaid(diagram('cluster-handoff-node-a', a))).toMatch(/Note over P\d+: rejected/);
    expect(toMermaid(diagram('cluster-handoff-node-b', b))).toMatch(/render\.done/);
  }, 60_000);
});
