/**
 * Two runs of `npm run bench -- all` side by side: the judgement issue #17 asks for is that two
 * runs at different machine loads agree within 20 % on every CPU ratio. This module is pure
 * (no I/O): `bench/all.ts` picks the ratios out of a run's figures, keeps the last runs in
 * `docs/bench-runs.json`, and writes the comparison of the two newest into
 * `docs/performance.md`.
 *
 * Agreement is judged on the medians: `max(a, b) ÷ min(a, b) − 1 ≤ tolerance`, which is stricter
 * than a difference over the mean. A ratio missing from either run is reported as not compared,
 * never as agreeing. The load a ratio's benchmark saw (1-minute average, start and end) is kept
 * beside it, because "different loads" is part of the claim and the reader should see it.
 */

/** One CPU ratio of one run: the median over rounds, with the spread when the bench gives it. */
export interface RatioFigure {
  readonly label: string;
  readonly median: number;
  readonly min?: number;
  readonly max?: number;
  /** The 1-minute load average at the benchmark's start and end. */
  readonly load?: readonly [number, number];
}

/** What `bench/all.ts` keeps of one run. */
export interface RunRecord {
  /** `YYYY-MM-DD HH:MM` UTC. */
  readonly stamp: string;
  readonly machine: string;
  readonly settings: string;
  /** Extra busy processes the run started to load the machine (`--load N`), 0 if none. */
  readonly extraLoad: number;
  readonly ratios: Readonly<Record<string, RatioFigure>>;
}

export interface Agreement {
  readonly id: string;
  readonly label: string;
  readonly a?: RatioFigure;
  readonly b?: RatioFigure;
  /** `max ÷ min − 1` of the medians; undefined when either side is missing or not positive. */
  readonly difference?: number;
  readonly agrees: boolean;
}

/** The issue's bound on how far two runs' medians may be apart. */
export const AGREEMENT_TOLERANCE = 0.2;

export function agreement(
  a: RunRecord,
  b: RunRecord,
  tolerance = AGREEMENT_TOLERANCE,
): Agreement[] {
  const ids = [...new Set([...Object.keys(a.ratios), ...Object.keys(b.ratios)])];
  return ids.map((id) => {
    const ra = a.ratios[id];
    const rb = b.ratios[id];
    const label = ra?.label ?? rb?.label ?? id;
    if (!ra || !rb || !(ra.median > 0) || !(rb.median > 0))
      return { id, label, a: ra, b: rb, agrees: false };
    const difference = Math.max(ra.median, rb.median) / Math.min(ra.median, rb.median) - 1;
    return { id, label, a: ra, b: rb, difference, agrees: difference <= tolerance };
  });
}

/** Keeps the newest `keep` runs, the new one last. */
export function appendRun(runs: readonly RunRecord[], run: RunRecord, keep = 6): RunRecord[] {
  return [...runs, run].slice(-keep);
}

function cell(r: RatioFigure | undefined): string {
  if (!r) return 'not measured';
  const f = (v: number) => (Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3));
  const range = r.min !== undefined && r.max !== undefined ? ` (${f(r.min)}–${f(r.max)})` : '';
  const load = r.load ? `; load ${r.load[0].toFixed(1)}→${r.load[1].toFixed(1)}` : '';
  return `**${f(r.median)}**${range}${load}`;
}

function runTitle(r: RunRecord): string {
  const extra = r.extraLoad > 0 ? `, +${r.extraLoad} busy loops` : '';
  return `${r.stamp} UTC (${r.settings}${extra})`;
}

/** The markdown section: one row per ratio, both runs, their difference and the verdict. */
export function comparisonMarkdown(a: RunRecord, b: RunRecord, tolerance = AGREEMENT_TOLERANCE) {
  const rows = agreement(a, b, tolerance);
  const agreeing = rows.filter((r) => r.agrees).length;
  const lines = [
    `Run A: ${runTitle(a)}. Run B: ${runTitle(b)}. Machine: ${b.machine}.`,
    '',
    `${agreeing} of ${rows.length} CPU ratios agree within ${Math.round(tolerance * 100)} % (max ÷ min − 1 of the medians).`,
    '',
    `| CPU ratio | run A: median (min–max); load | run B: median (min–max); load | apart | within ${Math.round(tolerance * 100)} % |`,
    '|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.label} | ${cell(r.a)} | ${cell(r.b)} | ${
          r.difference === undefined ? '–' : `${(r.difference * 100).toFixed(1)} %`
        } | ${r.difference === undefined ? 'not compared' : r.agrees ? 'yes' : '**no**'} |`,
    ),
  ];
  return lines.join('\n');
}
