// docs/concurrency-replay.md cannot drift: the page is exactly what the committed recordings
// (docs/recordings/*.ndjson) give, and the recordings still match the code. Every scenario runs
// real proxies and real ffmpeg, so chunk and poll counts vary run to run: each is re-recorded
// and compared by its participants and kinds of message, plus the steps that make its story
// (the displaced waiter's notes in order, the waiting room's two claims, the cluster's
// rejection on node A and render on node B). Regenerate with:
// npx tsx scripts/gen-concurrency-docs.ts --record
// About 30 s (five real proxies, one redis-server; the paced renders are most of it).
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

  it('re-records the displaced waiter: warm work displaced, then preempted, by a live request', async () => {
    const fresh = await recordDisplacedWaiter();
    expect(skeleton('displaced-waiter', fresh)).toEqual(
      skeleton('displaced-waiter', committed.get('displaced-waiter')!),
    );
    const mermaid = toMermaid(diagram('displaced-waiter', fresh));
    const at = (re: RegExp) => mermaid.search(re);
    expect(at(/queued \(low\): held 1 queued 1/)).toBeGreaterThan(-1);
    expect(at(/displaced \(low\)/)).toBeGreaterThan(at(/queued \(low\)/));
    expect(at(/preempted \(low\)/)).toBeGreaterThan(at(/displaced \(low\)/));
    expect(at(/acquired \(interactive\)/)).toBeGreaterThan(at(/preempted \(low\)/));
  }, 60_000);

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
