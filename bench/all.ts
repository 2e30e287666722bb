/**
 * `npm run bench -- all [--quick]`: runs every benchmark, each in its own process, collects the
 * figures they report (`bench/report.ts`), prints one table of P1–P7 with each result beside the
 * baseline measured in the same run, and rewrites the summary section of `docs/performance.md`
 * (between the `bench:all` markers) with the machine, the date and the load average.
 *
 * `--quick` uses fewer rounds (a few minutes in all); the default is the documented settings.
 * A benchmark that cannot run here (no nginx, say) leaves its rows as "not measured".
 *
 * Every run also keeps its CPU ratios (with each benchmark's load) in `docs/bench-runs.json`,
 * the newest 6, and writes the two newest side by side (`bench:compare` markers, `compare.ts`):
 * issue #17 asks that two runs at different loads agree within 20 % on each. `--load N` starts N
 * busy loops for the whole run (killed on the way out), so the second run's load is known;
 * `--compare` runs nothing and only rewrites the comparison from the kept runs.
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BATCH_BYTES, FLUSH_MS } from '../src/core/worker.js';
import { appendRun, comparisonMarkdown, type RatioFigure, type RunRecord } from './compare.js';
import { busyLoop } from './fixtures.js';
import type { Figures } from './report.js';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
/** `--compare`: only rewrite the comparison of the two newest kept runs; run nothing. */
const compareOnly = argv.includes('--compare');
/** `--load N`: start N busy loops for the whole run, to measure at a known higher load. */
const extraLoad = argv.includes('--load') ? Number(argv[argv.indexOf('--load') + 1]) : 0;
if (!Number.isInteger(extraLoad) || extraLoad < 0 || extraLoad > 16)
  throw new RangeError('--load needs an integer from 0 to 16');
const RUNS: Array<{ bench: string; file: string; flags?: string[]; args: string[] }> = [
  {
    bench: 'semaphore',
    file: 'semaphore.ts',
    flags: ['--expose-gc'],
    args: quick
      ? ['--cycles', '100000', '--rounds', '3', '--waiters', '100000']
      : ['--cycles', '200000', '--rounds', '7', '--waiters', '1000000'],
  },
  { bench: 'render', file: 'render.ts', args: [quick ? '3' : '5'] },
  {
    bench: 'workers',
    file: 'workers.ts',
    flags: ['--expose-gc'],
    args: ['--rounds', quick ? '7' : '11'],
  },
  {
    bench: 'hit',
    file: 'hit.ts',
    args: quick ? ['--rounds', '3', '--seconds', '4'] : ['--rounds', '7', '--seconds', '6'],
  },
  { bench: 'cpu', file: 'cpu.ts', args: ['--rounds', quick ? '3' : '5'] },
  { bench: 'burst', file: 'burst.ts', args: ['--rounds', quick ? '1' : '3'] },
];

const doc = fileURLToPath(new URL('../docs/performance.md', import.meta.url));
const runsFile = fileURLToPath(new URL('../docs/bench-runs.json', import.meta.url));
const readRuns = (): RunRecord[] =>
  existsSync(runsFile) ? (JSON.parse(readFileSync(runsFile, 'utf8')) as RunRecord[]) : [];

/** Replaces the text between `<!-- bench:NAME:begin … -->` and `<!-- bench:NAME:end -->`. */
function writeSection(name: string, body: string, heading: string): void {
  const begin = `<!-- bench:${name}:begin (written by \`npm run bench -- all\`; edits here are overwritten) -->`;
  const endMark = `<!-- bench:${name}:end -->`;
  const section = `${begin}\n${body}\n${endMark}`;
  const text = readFileSync(doc, 'utf8');
  const from = text.indexOf(`<!-- bench:${name}:begin`);
  const to = text.indexOf(endMark);
  // A new section goes after the summary table (or before the first heading if there is none).
  const summaryEnd = '<!-- bench:all:end -->';
  const at = text.indexOf(summaryEnd);
  const next =
    from !== -1 && to > from
      ? text.slice(0, from) + section + text.slice(to + endMark.length)
      : name !== 'all' && at !== -1
        ? `${text.slice(0, at + summaryEnd.length)}\n\n## ${heading}\n\n${section}${text.slice(at + summaryEnd.length)}`
        : text.replace(/\n## /, `\n## ${heading}\n\n${section}\n\n## `);
  writeFileSync(doc, next);
  // Tables are written unaligned; biome (the lint step) aligns them, so the doc stays lint-clean.
  spawnSync('npx', ['biome', 'format', '--write', doc], { stdio: 'ignore' });
}

function writeComparison(runs: readonly RunRecord[]): void {
  const [a, b] = runs.slice(-2);
  if (!a || !b) {
    console.log('\none run kept so far: run again (at another load) to compare two');
    return;
  }
  const body = comparisonMarkdown(a, b);
  console.log(`\n${body}`);
  writeSection('compare', body, 'Two runs compared: every CPU ratio');
}

if (compareOnly) {
  writeComparison(readRuns());
  process.exit(0);
}

/** Busy loops that load the machine for the whole run (`--load N`), killed on the way out. */
const loaders: ChildProcess[] = Array.from({ length: extraLoad }, busyLoop);
const stopLoaders = () => {
  for (const l of loaders) l.kill('SIGKILL');
};
process.on('exit', stopLoaders);
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    stopLoaders();
    process.exit(130);
  });

const out = join(mkdtempSync(join(tmpdir(), 'ap-bench-all-')), 'figures.jsonl');
const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
const loads: number[] = [];
const loadAtStart = loadavg()[0]!;
for (const run of RUNS) {
  process.stderr.write(`\n=== ${run.bench} ===\n`);
  const file = fileURLToPath(new URL(run.file, import.meta.url));
  const r = spawnSync(tsx, [...(run.flags ?? []), file, ...run.args], {
    stdio: 'inherit',
    env: { ...process.env, AP_BENCH_JSON: out },
  });
  loads.push(loadavg()[0]!);
  if (r.status !== 0) process.stderr.write(`${run.bench} exited ${r.status}: rows left empty\n`);
}

const results = new Map<string, Figures>();
if (existsSync(out)) {
  for (const line of readFileSync(out, 'utf8').split('\n').filter(Boolean)) {
    const { bench, figures } = JSON.parse(line) as { bench: string; figures: Figures };
    results.set(bench, figures);
  }
}

const num = (bench: string, key: string): number | undefined => {
  const v = results.get(bench)?.[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
};
const ms = (v: number | undefined) => (v === undefined ? '–' : `${Math.round(v)} ms`);
const x = (v: number | undefined, digits = 2) => (v === undefined ? '–' : `${v.toFixed(digits)}×`);
const n = (v: number | undefined) =>
  v === undefined ? '–' : Math.round(v).toLocaleString('en-US');
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? undefined : a / b;
/** A CPU figure reported with `spreadFigures`: "median (min–max)", scaled, with a unit. */
const sp = (bench: string, key: string, digits = 2, scale = 1, unit = '×') => {
  const m = num(bench, key);
  if (m === undefined) return '–';
  const lo = num(bench, `${key}:min`);
  const hi = num(bench, `${key}:max`);
  const f = (v: number) => (v * scale).toFixed(digits);
  return lo === undefined || hi === undefined
    ? `${f(m)}${unit}`
    : `**${f(m)}${unit}** (${f(lo)}–${f(hi)})`;
};
/** The 1-minute load average a benchmark saw at its start and end. */
const load = (bench: string) => {
  const a = num(bench, 'loadStart');
  const b = num(bench, 'loadEnd');
  return a === undefined || b === undefined ? '–' : `${a.toFixed(1)}→${b.toFixed(1)}`;
};
/** The worker variant's name in `bench/workers.ts`, spelt from the shipped batch settings. */
const W = `worker (${BATCH_BYTES / 1024}K/${FLUSH_MS}ms)`;

const rows: string[][] = [
  [
    'P1 MISS overhead: 8 distinct renders at C=2',
    ms(num('render', 'p1ProxyMs')),
    `bare ffmpeg, 2 at a time: ${ms(num('render', 'p1DirectMs'))}`,
    x(num('render', 'p1'), 3),
    '≤ 1.02×',
    `proxy ÷ ffmpeg CPU, 6 mp3 renders of 60 s: ${sp('cpu', 'missCpu', 2, 100, ' %')}; ${n(num('cpu', 'missProxyMsPerRender'))} vs ${n(num('cpu', 'missFfmpegMsPerRender'))} ms per render`,
    '≤ 3 %',
    load('cpu'),
  ],
  [
    'P2 coalescing: 64 identical requests',
    ms(num('render', 'p2AllMs')),
    `one request: ${ms(num('render', 'p2OneMs'))}`,
    x(num('render', 'p2'), 3),
    '≤ 1.05×',
    `proxy's extra CPU for 63 more ÷ ffmpeg CPU: ${sp('cpu', 'coalCpu', 2, 100, ' %')}; +${n(num('cpu', 'coalExtraMs'))} ms vs ${n(num('cpu', 'coalFfmpegMs'))} ms`,
    '≤ 10 %',
    load('cpu'),
  ],
  [
    "P2' the same, ffmpeg pinned to its own core (taskset)",
    ms(num('render', 'p2PinnedAllMs')),
    `one request: ${ms(num('render', 'p2PinnedOneMs'))}`,
    x(num('render', 'p2Pinned'), 3),
    '≤ 1.05×',
    '(as P2)',
    '',
    '',
  ],
  [
    'P3 semaphore cycles per CPU s',
    n(num('semaphore', 'cpu:audio-proxy')),
    `p-limit ${n(num('semaphore', 'cpu:p-limit'))}; naive XState ${n(num('semaphore', 'cpu:naive XState'))}; XState floor ${n(num('semaphore', 'cpu:XState floor'))}`,
    `${x(ratio(num('semaphore', 'cpu:audio-proxy'), num('semaphore', 'cpu:naive XState')))} naive, ${x(ratio(num('semaphore', 'cpu:audio-proxy'), num('semaphore', 'cpu:p-limit')), 3)} p-limit`,
    '≥ 150,000 and ≥ 1.6× naive',
    `cycles per CPU s ÷ the empty-chart floor, same round: ${sp('semaphore', 'cpuVsFloor')}`,
    '≥ 0.8×',
    load('semaphore'),
  ],
  [
    'P4 HIT, 1 MiB, 64 connections: whole proxy, hot variant',
    `${n(num('hit', 'rps:proxy (full)'))} req/s (serveHit + cache alone: ${n(num('hit', 'rps:node hot'))})`,
    `nginx sendfile: ${n(num('hit', 'nginxRps'))} req/s; Node floor (res.end of a Buffer): ${n(num('hit', 'rps:node memory'))}`,
    `${x(num('hit', 'sameRound:proxy (full)'))} (alone ${x(num('hit', 'sameRound:node hot'))}, floor ${x(num('hit', 'sameRound:node memory'))})`,
    '≥ 0.8×',
    `CPU s per GiB ÷ nginx's: hot ${sp('hit', 'cpuPerGiBVsNginx:proxy (full)')}, disk ${sp('hit', 'cpuPerGiBVsNginx:proxy (disk)')}; nginx ${num('hit', 'cpuSPerGiB:nginx')?.toFixed(2) ?? '–'} CPU s/GiB`,
    '≤ 1.5× (hot)',
    load('hit'),
  ],
  [
    'P5 memory per queued waiter',
    `${n(num('semaphore', 'bytesPerWaiter:audio-proxy'))} B`,
    `p-limit: ${n(num('semaphore', 'bytesPerWaiter:p-limit'))} B`,
    x(
      ratio(
        num('semaphore', 'bytesPerWaiter:audio-proxy'),
        num('semaphore', 'bytesPerWaiter:p-limit'),
      ),
    ),
    '≤ 1 KiB',
    '(memory)',
    '',
    load('semaphore'),
  ],
  [
    'P6 event-loop lag p99, 4 encodes',
    ms(num('workers', `lagP99Ms:${W}`)),
    `ffmpeg spawned on the main thread: ${ms(num('workers', 'lagP99Ms:main'))}; wall ${x(num('workers', `paired:${W}`), 3)} of it`,
    x(ratio(num('workers', `lagP99Ms:${W}`), num('workers', 'lagP99Ms:main'))),
    'wall ≤ 1.02× main',
    `node CPU per render ÷ ffmpeg's: workers ${sp('workers', `nodeVsFfmpeg:${W}`, 1, 100, ' %')}, main ${sp('workers', 'nodeVsFfmpeg:main', 1, 100, ' %')}; workers × main ${sp('workers', `nodeVsMain:${W}`)}; lag max ${sp('workers', `lagMaxMs:${W}`, 1, 1, ' ms')} vs ${sp('workers', 'lagMaxMs:main', 1, 1, ' ms')}`,
    '(measured)',
    load('workers'),
  ],
  [
    'P7 time to first byte',
    ms(num('render', 'p7ProxyMs')),
    `ffmpeg's first output: ${ms(num('render', 'p7DirectMs'))}`,
    (() => {
      const a = num('render', 'p7ProxyMs');
      const b = num('render', 'p7DirectMs');
      if (a === undefined || b === undefined) return '–';
      const d = Math.round(a - b);
      return `${d >= 0 ? '+' : '−'}${Math.abs(d)} ms`;
    })(),
    '(measured)',
    `ffmpeg's own process start (anullsrc, -t 0): ${ms(num('cpu', 'ffmpegStartWallMs'))} wall, ${ms(num('cpu', 'ffmpegStartCpuMs'))} CPU; proxy's MISS first byte ${ms(num('cpu', 'ttfbMs'))} wall = ${x(ratio(num('cpu', 'ttfbMs'), num('cpu', 'ffmpegStartWallMs')))} of the start (a wall ratio, not compared)`,
    '(floor)',
    load('cpu'),
  ],
  [
    'P8 burst: 5,000 requests, event loop',
    `/health max ${ms(num('burst', 'healthMaxMs'))} (p99 ${ms(num('burst', 'healthP99Ms'))}), separate prober`,
    '(idle /health in the same run: see the burst section)',
    '',
    '/health ≤ 50 ms',
    `longest task ${num('burst', 'taskMaxMs')?.toFixed(1) ?? '–'} ms wall, ${num('burst', 'taskMaxRunMs')?.toFixed(1) ?? '–'} ms less run-queue wait (per task); ≤ ${num('burst', 'longestTaskMs')?.toFixed(1) ?? '–'} ms (delay max); main thread ${num('burst', 'cpuUsPerRequest')?.toFixed(0) ?? '–'} µs CPU per request, utilisation ${((num('burst', 'elu') ?? Number.NaN) * 100).toFixed(0)} %`,
    '≤ 10 ms',
    load('burst'),
  ],
  [
    'P9 HIT ceiling: loopback copy',
    `proxy (hot) ${n(num('hit', 'mibPerS:proxy (full)'))} MiB/s at ${num('hit', 'cpuSPerGiB:proxy (full)')?.toFixed(2) ?? '–'} CPU s/GiB`,
    `Node's floor (res.end of the Buffer, same 64 connections and rounds): ${n(num('hit', 'mibPerS:node memory'))} MiB/s at ${num('hit', 'cpuSPerGiB:node memory')?.toFixed(2) ?? '–'} CPU s/GiB; one raw Node writer of 1 MiB Buffers, one connection: ${n((num('cpu', 'loopbackGiBps') ?? Number.NaN) * 1024)} MiB/s at ${num('cpu', 'loopbackWriterCpuSPerGiB')?.toFixed(2) ?? '–'} CPU s/GiB`,
    x(ratio(num('hit', 'mibPerS:proxy (full)'), num('hit', 'mibPerS:node memory'))),
    '(ceiling)',
    `÷ Node's floor, same round: hot ${sp('hit', 'cpuPerGiBVsFloor:proxy (full)')}, disk ${sp('hit', 'cpuPerGiBVsFloor:proxy (disk)')}`,
    '(ceiling)',
    load('hit'),
  ],
];

const header = [
  'metric',
  'result',
  'baseline (same run)',
  'wall ratio',
  'wall target',
  'CPU ratio: median (min–max over rounds)',
  'CPU target',
  'load 1 min (start→end)',
];
const table = [
  `| ${header.join(' | ')} |`,
  `|${header.map(() => '---').join('|')}|`,
  ...rows.map((r) => `| ${r.join(' | ')} |`),
].join('\n');
const cpu = cpus();
const machine = `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
const stamp = new Date().toISOString().slice(0, 16).replace('T', ' ');
const section = [
  `Last run: ${stamp} UTC on ${machine}; settings ${quick ? '`--quick`' : 'default'}${extraLoad ? `, ${extraLoad} extra busy loops` : ''}; load average (1 min) at the start ${loadAtStart.toFixed(1)}, after each benchmark: ${loads.map((l) => l.toFixed(1)).join(', ')}.`,
  '',
  table,
].join('\n');
console.log(`\n${section}`);
writeSection('all', section, 'Summary: every metric in one run');
console.log(`\nwrote the summary into ${doc}`);

/** Every CPU ratio of the table, by a stable id, with its bench's load: what two runs compare. */
const RATIOS: Array<[id: string, label: string, bench: string, key: string]> = [
  ['P1', 'P1 MISS: proxy ÷ ffmpeg CPU', 'cpu', 'missCpu'],
  ['P2', 'P2 coalescing: extra CPU for 63 more ÷ ffmpeg', 'cpu', 'coalCpu'],
  ['P3', 'P3 semaphore: cycles per CPU s ÷ the empty-chart floor', 'semaphore', 'cpuVsFloor'],
  ['P4hot', 'P4 HIT hot: CPU s/GiB ÷ nginx', 'hit', 'cpuPerGiBVsNginx:proxy (full)'],
  ['P4disk', 'P4 HIT disk: CPU s/GiB ÷ nginx', 'hit', 'cpuPerGiBVsNginx:proxy (disk)'],
  ['P6w', 'P6 workers: node ÷ ffmpeg CPU', 'workers', `nodeVsFfmpeg:${W}`],
  ['P6m', 'P6 main-thread spawn: node ÷ ffmpeg CPU', 'workers', 'nodeVsFfmpeg:main'],
  ['P6x', 'P6 workers × main: node CPU', 'workers', `nodeVsMain:${W}`],
  [
    'P9hot',
    "P9 HIT hot ÷ Node's floor (res.end of a Buffer), same round: CPU s/GiB",
    'hit',
    'cpuPerGiBVsFloor:proxy (full)',
  ],
  [
    'P9disk',
    "P9 HIT disk ÷ Node's floor, same round: CPU s/GiB",
    'hit',
    'cpuPerGiBVsFloor:proxy (disk)',
  ],
];
const ratios: Record<string, RatioFigure> = {};
for (const [id, label, bench, key] of RATIOS) {
  const median = num(bench, key);
  if (median === undefined) continue;
  const min = num(bench, `${key}:min`);
  const max = num(bench, `${key}:max`);
  const l0 = num(bench, 'loadStart');
  const l1 = num(bench, 'loadEnd');
  ratios[id] = {
    label,
    median,
    ...(min !== undefined && max !== undefined ? { min, max } : {}),
    ...(l0 !== undefined && l1 !== undefined ? { load: [l0, l1] as const } : {}),
  };
}
const runs = appendRun(readRuns(), {
  stamp,
  machine,
  settings: quick ? '--quick' : 'default',
  extraLoad,
  ratios,
});
writeFileSync(runsFile, `${JSON.stringify(runs, null, 2)}\n`);
spawnSync('npx', ['biome', 'format', '--write', runsFile], { stdio: 'ignore' });
writeComparison(runs);
stopLoaders();
