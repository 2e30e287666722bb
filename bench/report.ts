/**
 * Machine-readable results for `bench/all.ts`: a benchmark calls `report(name, figures)` once at
 * the end; when `AP_BENCH_JSON` names a file, one JSON line is appended to it. Run on its own, a
 * benchmark only prints its usual table.
 */
import { appendFileSync } from 'node:fs';

export type Figures = Record<string, number | string>;

export function report(bench: string, figures: Figures): void {
  const file = process.env.AP_BENCH_JSON;
  if (!file) return;
  appendFileSync(file, `${JSON.stringify({ bench, figures })}\n`);
}
