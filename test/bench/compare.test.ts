/**
 * The two-run comparison `npm run bench -- all` writes (issue #17: two runs at different loads
 * agree within 20 % on every CPU ratio): the verdict per ratio, a missing ratio never counted as
 * agreeing, and the kept history bounded.
 */
import { describe, expect, it } from 'vitest';
import { agreement, appendRun, comparisonMarkdown, type RunRecord } from '../../bench/compare.js';

const run = (stamp: string, ratios: RunRecord['ratios'], extraLoad = 0): RunRecord => ({
  stamp,
  machine: 'test box',
  settings: '--quick',
  extraLoad,
  ratios,
});

describe('agreement of two runs', () => {
  it('judges max ÷ min − 1 of the medians against the tolerance', () => {
    const a = run('a', { x: { label: 'X', median: 1.0 }, y: { label: 'Y', median: 0.1 } });
    const b = run('b', { x: { label: 'X', median: 1.2 }, y: { label: 'Y', median: 0.121 } });
    const [x, y] = agreement(a, b);
    expect(x?.difference).toBeCloseTo(0.2, 10);
    expect(x?.agrees).toBe(true);
    expect(y?.difference).toBeCloseTo(0.21, 10);
    expect(y?.agrees).toBe(false);
  });

  it('is symmetric in the order of the runs', () => {
    const a = run('a', { x: { label: 'X', median: 3 } });
    const b = run('b', { x: { label: 'X', median: 2 } });
    expect(agreement(a, b)[0]?.difference).toBe(agreement(b, a)[0]?.difference);
  });

  it('never counts a ratio measured in one run only, or a zero, as agreeing', () => {
    const a = run('a', { x: { label: 'X', median: 1 }, z: { label: 'Z', median: 0 } });
    const b = run('b', { y: { label: 'Y', median: 1 }, z: { label: 'Z', median: 0 } });
    const rows = agreement(a, b);
    expect(rows.map((r) => r.id).sort()).toEqual(['x', 'y', 'z']);
    expect(rows.every((r) => !r.agrees && r.difference === undefined)).toBe(true);
    expect(comparisonMarkdown(a, b)).toContain('0 of 3 CPU ratios agree');
  });

  it('shows both runs, their loads and the verdict in the markdown', () => {
    const a = run('2026-12-03 19:00', { x: { label: 'X', median: 0.05, load: [0.5, 0.9] } });
    const b = run('2026-12-03 20:00', { x: { label: 'X', median: 0.07, load: [4, 5] } }, 2);
    const md = comparisonMarkdown(a, b);
    expect(md).toContain('+2 busy loops');
    expect(md).toContain('load 0.5→0.9');
    expect(md).toContain('load 4.0→5.0');
    expect(md).toContain('40.0 %');
    expect(md).toContain('**no**');
  });

  it('keeps only the newest runs, the new one last', () => {
    const runs = Array.from({ length: 6 }, (_, i) => run(String(i), {}));
    const kept = appendRun(runs, run('new', {}), 6);
    expect(kept.map((r) => r.stamp)).toEqual(['1', '2', '3', '4', '5', 'new']);
  });
});
