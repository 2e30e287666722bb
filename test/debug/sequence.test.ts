// Sequence diagrams from a recording (debug/sequence.ts): a request's diagram has its own
// delivery only, a key's has the whole crowd, an actor's has it and its children; hostile names
// and labels cannot break out of Mermaid's text; the arrows are bounded. A few ms.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRecording, RECORDING_FORMAT, type Recording } from '../../src/core/recording.js';
import { MAX_MESSAGES, sequenceOf, toMermaid } from '../../src/debug/sequence.js';

const crowd = parseRecording(
  readFileSync(join(process.cwd(), 'docs/recordings/coalesced-crowd.ndjson'), 'utf8'),
);
const key = crowd.header.actors
  .find((a) => a.chart === 'renderCoordinator')!
  .name.slice('renderCoordinator:'.length);

describe('sequence diagrams', () => {
  it('shows one request with its own delivery, a key with the whole crowd', () => {
    const one = sequenceOf(crowd, { request: 'sub-2' });
    const labels = one.participants.map((p) => p.label);
    expect(labels.filter((l) => l.startsWith('delivery'))).toEqual(['delivery sub-2']);
    expect(one.messages.some((m) => m.label === 'join sub-3')).toBe(false);
    const all = sequenceOf(crowd, { key });
    expect(all.participants.filter((p) => p.label.startsWith('delivery'))).toHaveLength(3);
    expect(all.participants.map((p) => p.label)).toEqual(
      expect.arrayContaining(['HTTP', 'coordinator', 'semaphore', 'render', 'worker']),
    );
    const seqs = all.messages.map((m) => m.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  it('keeps hostile names and labels inside Mermaid text, and bounds the arrows', () => {
    const many = Array.from({ length: MAX_MESSAGES + 50 }, (_, i) => ({
      seq: i + 2,
      t: i,
      kind: 'event' as const,
      actor: 'a1',
      source: null,
      event: { type: i % 2 ? 'x\n  P9->>P1: injected' : 'y;%%{init}%%' },
    }));
    const hostile: Recording = {
      header: {
        format: RECORDING_FORMAT,
        version: 1,
        reason: 't',
        timeOrigin: 0,
        capacity: 1000,
        dropped: 0,
        actors: [
          { actor: 'a1', chart: null, name: 'evil\nparticipant X as <script>', parent: null },
        ],
        initial: [],
      },
      entries: [{ seq: 1, t: 0, kind: 'actor', actor: 'a1' }, ...many],
    };
    const s = sequenceOf(hostile, { actor: 'a1' });
    expect(s.messages).toHaveLength(MAX_MESSAGES);
    expect(s.omitted).toBe(50);
    const text = toMermaid(s);
    for (const line of text.trimEnd().split('\n').slice(1)) {
      expect(line).toMatch(
        /^ {2}(participant P\d+ as [\w .:()×+/-]+|P\d+->>P\d+: [\w .:()×+/-]+|Note over P\d+: [\w .:()×+/-]+)$/,
      );
    }
  });
});
