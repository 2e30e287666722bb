/**
 * The top self-time functions of a V8 `.cpuprofile` (nodes, samples, timeDeltas), as the
 * benchmarks print them with `--profile`: idle left out, and the inspector's own `dispatch`
 * (sampled last, while `Profiler.stop` builds the profile) too. A frame's file is shortened to
 * what follows `src/`, `dist/` or `node_modules/`.
 */
import { readFileSync } from 'node:fs';

export interface ProfileLine {
  readonly fn: string;
  readonly selfMs: number;
  /** Of the profile's samples that were not idle. */
  readonly share: number;
}

export function topOfProfile(file: string, n = 12): { totalMs: number; lines: ProfileLine[] } {
  const p = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: Array<{
      id: number;
      callFrame: { functionName: string; url: string; lineNumber: number };
    }>;
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(p.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const { functionName, url, lineNumber } = byId.get(p.samples[i]!)!.callFrame;
    if (functionName === '(idle)') continue;
    if (functionName === 'dispatch' && !url) continue;
    const where = url
      ? ` ${url.replace(/^.*\/(src|dist|node_modules)\//, '$1/')}:${lineNumber + 1}`
      : '';
    const key = `${functionName || '(anonymous)'}${where}`;
    const ms = (p.timeDeltas[i] ?? 0) / 1000;
    self.set(key, (self.get(key) ?? 0) + ms);
    total += ms;
  }
  const lines = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([fn, ms]) => ({ fn, selfMs: ms, share: ms / total }));
  return { totalMs: total, lines };
}
