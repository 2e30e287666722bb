/**
 * `npm run sim`: runs the deterministic simulator (`sim/world.ts`) over a range of seeds.
 *
 *   npm run sim                          # seeds 1..1000
 *   npm run sim -- --seeds 5000 --from 1 # seeds 1..5000
 *   npm run sim -- --seed 42             # one seed, its trace hash, its recording written
 *   npm run sim -- --seed 42 --plant supervisor-stop-during-restart
 *   npm run sim -- --states              # also lists the chart states the seeds reached
 *
 * A failing seed prints the one command that replays it and writes its recording (the
 * audio-proxy recording format, `src/core/recording.ts`) to `--out` (default `sim-failures/`).
 * Exit status: 0 when every seed held every invariant, 1 otherwise.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { formatRecording } from '../src/core/recording.js';
import { PLANTS, type Plant, type SimResult, simulate } from './world.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    seeds: { type: 'string', default: '1000' },
    from: { type: 'string', default: '1' },
    plant: { type: 'string' },
    out: { type: 'string', default: 'sim-failures' },
    record: { type: 'boolean', default: false },
    states: { type: 'boolean', default: false },
  },
});

const plant = values.plant as Plant | undefined;
if (plant !== undefined && !PLANTS.includes(plant)) {
  console.error(`unknown --plant ${plant}; known: ${PLANTS.join(', ')}`);
  process.exit(2);
}

/** The one command that replays `result`. */
export function replayCommand(result: Pick<SimResult, 'seed' | 'plant'>): string {
  return `npm run sim -- --seed ${result.seed}${result.plant ? ` --plant ${result.plant}` : ''}`;
}

function write(result: SimResult): string | null {
  if (!result.recording) return null;
  mkdirSync(values.out, { recursive: true });
  const file = join(
    values.out,
    `seed-${result.seed}${result.plant ? `-${result.plant}` : ''}.ndjson`,
  );
  writeFileSync(file, formatRecording(result.recording));
  return file;
}

const seeds: number[] = [];
if (values.seed !== undefined) seeds.push(Number(values.seed));
else {
  const from = Number(values.from);
  for (let i = 0; i < Number(values.seeds); i++) seeds.push(from + i);
}
if (seeds.some((s) => !Number.isSafeInteger(s))) {
  console.error('seeds are integers');
  process.exit(2);
}

const started = performance.now();
let failed = 0;
let steps = 0;
const outcomes: Record<string, number> = {};
const faults: Record<string, number> = {};
const visited = new Map<string, number>();
for (const seed of seeds) {
  const result = await simulate({
    seed,
    ...(plant ? { plant } : {}),
    record: values.record || values.seed !== undefined,
  });
  steps += result.steps;
  for (const [k, v] of Object.entries(result.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + v;
  for (const [k, v] of Object.entries(result.faults)) faults[k] = (faults[k] ?? 0) + v;
  for (const state of result.visited) visited.set(state, (visited.get(state) ?? 0) + 1);
  if (values.seed !== undefined) {
    console.log(
      `seed ${seed}: ${result.steps} steps, ${result.virtualMs} simulated ms, trace ${result.hash}`,
    );
  }
  if (result.violations.length > 0) {
    failed++;
    const file = write(result);
    console.log(`FAIL seed ${seed}`);
    for (const v of result.violations) {
      console.log(`  [${v.check}] step ${v.step} t=${v.t}ms: ${v.message.split('\n')[0]}`);
    }
    if (file) console.log(`  recording: ${file}`);
    console.log(`  replay: ${replayCommand(result)}`);
  } else if (values.seed !== undefined) {
    const file = write(result);
    if (file) console.log(`recording: ${file}`);
  }
}
const ms = performance.now() - started;
console.log(
  `${seeds.length} seed(s), ${failed} failing, ${steps} steps in ${(ms / 1000).toFixed(1)} s (${(ms / seeds.length) | 0 || '<1'} ms/seed)`,
);
console.log(`outcomes: ${JSON.stringify(outcomes)}`);
console.log(`faults: ${JSON.stringify(faults)}`);
if (values.states) {
  // Which chart states the seeds reached, and in how many seeds.
  for (const [state, n] of [...visited].sort()) console.log(`  ${state}: ${n} seed(s)`);
} else {
  console.log(`${visited.size} chart states reached (--states lists them)`);
}
process.exitCode = failed > 0 ? 1 : 0;
