/**
 * Fuzzing at volume:
 * `npx tsx bench/fuzz.ts [--cases 100000] [--concurrency 8] [--content 1000]
 *  [--content-concurrency 4] [--seed N]`.
 *
 * Two phases. URLs (`--cases`, 0 skips it): below. Content (`--content`, 0 skips it): the
 * generators and oracle of `test/reliability/fuzzContent.test.ts` (hostile files through
 * `local://` and a loopback `https://` server) at volume, printing statuses by family,
 * violations by kind (500s for content, canary file reads, canary host contacts, stray reads
 * of the allowed host, amplification), and afterwards slots, queue, coordinators, children,
 * staging files, heap and RSS against the baseline. With more than one case in flight, a canary
 * read is counted, not attributed.
 *
 * The same generators and oracle as `test/reliability/fuzz.test.ts` (hostile URLs and headers
 * against a real proxy on loopback, a canary beside the local root), without shrinking, with a
 * few requests in flight at once. Prints counts by status and by error code, the violations
 * (the first few in full), an option matrix (edge values of every option per format, rendered
 * for real, listing any 5xx or empty 200), and the leak check at the end: no render slot held,
 * no waiter, no ffmpeg alive, the proxy still answering /health. Exits 1 on any violation.
 */
import { request } from 'node:http';
import fc from 'fast-check';
import pLimit from 'p-limit';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.js';
import type { AudioProxy } from '../src/proxy.js';
import { createAudioProxy } from '../src/proxy.js';
import { stats } from '../src/services/semaphoreClient.js';
import {
  anyRequestArb,
  type FuzzRequest,
  type FuzzResponse,
  judge,
  makeFuzzWorld,
  signedRequest,
} from '../test/reliability/fuzzCases.js';
import {
  CASE_TIMEOUT_MS,
  type ContentResponse,
  contentCaseArb,
  describeCase,
  fetchCapped,
  fullGc,
  HEAP_SLACK_BYTES,
  judgeContent,
  liveMediaChildren,
  makeContentWorld,
} from '../test/reliability/fuzzContent.js';

const DEFAULT_CASES = 100_000;
const DEFAULT_CONTENT_CASES = 1_000;
const DEFAULT_CONTENT_CONCURRENCY = 4; // hostile files are mostly probes: cheap, but ffmpeg-bound
const DEFAULT_CONCURRENCY = 8; // enough to keep both cores busy; the proxy caps renders anyway
const SAMPLE_BATCH = 1_000; // generated per fc.sample call: bounded memory at 100k
const SHOWN_VIOLATIONS = 10;
const SETTLE_TIMEOUT_MS = 15_000;

/**
 * Valid option values at the edges of their ranges, per format, rendered for real: the random
 * cases keep renders rare, so this sweep is where the encoders meet the grammar's extremes.
 */
const MATRIX_FORMATS = ['mp3', 'opus', 'ogg', 'aac', 'm4a', 'flac', 'wav', 'peaks'];
const MATRIX_EXTRAS = [
  '',
  'sr:1',
  'sr:8000',
  'sr:22050',
  'sr:384000',
  'br:1',
  'br:10000',
  'q:0',
  'q:-1',
  'q:9',
  'q:10',
  'q:12',
  'ch:1',
  'bd:24',
  'bd:32f',
  'gain:100',
  'norm:ebu:-70:-9:50',
  'enhance:voice',
  'fade:0.01:0.02',
  'pts:100000',
  'pk_fmt:dat',
  't:5:1',
];

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const cases = arg('cases', DEFAULT_CASES);
const concurrency = arg('concurrency', DEFAULT_CONCURRENCY);
const contentCases = arg('content', DEFAULT_CONTENT_CASES);
const contentConcurrency = arg('content-concurrency', DEFAULT_CONTENT_CONCURRENCY);
const seed = arg('seed', Date.now() % 2 ** 31);

function send(base: string, req: FuzzRequest): Promise<FuzzResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: url.hostname,
        port: url.port,
        path: req.path,
        method: req.method,
        headers: req.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        const done = () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
          });
        res.on('end', done);
        res.on('aborted', done);
        res.on('error', done);
      },
    );
    r.on('error', reject);
    r.end();
  });
}

let unhandled = 0;
process.on('unhandledRejection', () => {
  unhandled += 1;
});

/** Slots and queue drained and every coordinator gone, or the deadline passed. */
async function settle(proxy: AudioProxy) {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let s = await stats(proxy.actors.semaphore);
  while ((s.held > 0 || s.queued > 0 || proxy.renders.live > 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    s = await stats(proxy.actors.semaphore);
  }
  return { held: s.held, queued: s.queued, live: proxy.renders.live };
}

const MIB = 1024 * 1024;
const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;

/** The content phase; true when every invariant held. */
async function contentPhase(): Promise<boolean> {
  const world = await makeContentWorld();
  const config = loadConfig({ ...world.env, AP_MAX_CONCURRENCY: '2' });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
  const detectors = await world.selfTest();
  await fullGc();
  const before = process.memoryUsage();
  const byFamily = new Map<string, Map<number, number>>();
  const byError = new Map<string, number>();
  const kinds = new Map<string, number>();
  const shown: string[] = [];
  let transportErrors = 0;
  let canaryReads = 0;
  let n = 0;
  const limit = pLimit(contentConcurrency);
  const started = performance.now();
  console.log(
    `\ncontent fuzz: ${contentCases} cases, concurrency ${contentConcurrency}, seed ${seed}` +
      ` (detectors: atime ${detectors.atime}, hosts ${detectors.hosts})`,
  );
  const note = (kind: string, detail: string) => {
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (shown.length < SHOWN_VIOLATIONS) shown.push(`${kind}: ${detail}`);
  };
  for (let done = 0, batch = 0; done < contentCases; batch += 1) {
    const size = Math.min(SAMPLE_BATCH, contentCases - done);
    const batchCases = fc.sample(contentCaseArb, {
      numRuns: size,
      seed: seed + 7_919 * (batch + 1),
    });
    await Promise.all(
      batchCases.map((c) =>
        limit(async () => {
          const placed = world.place(c, `c${n++}`);
          const hits = world.canaryHits();
          const stray = world.strayHits();
          let res: ContentResponse;
          try {
            res = await fetchCapped(url, placed.method, placed.path, CASE_TIMEOUT_MS);
          } catch (error) {
            transportErrors += 1;
            note('transport error', `${String(error)}: ${describeCase(c)}`);
            return;
          }
          const statuses = byFamily.get(c.family) ?? new Map<number, number>();
          byFamily.set(c.family, statuses);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const verdict = judgeContent(world, c, placed, res);
          if (verdict.error) byError.set(verdict.error, (byError.get(verdict.error) ?? 0) + 1);
          for (const p of verdict.problems) {
            const kind = p.startsWith('hostile content earned') ? p : p.replace(/\d+/g, 'N');
            note(kind, `${describeCase(c)} → ${res.status}`);
          }
          if (world.canaryRead()) {
            canaryReads += 1;
            note('canary file read', describeCase(c));
          }
          if (world.canaryHits() !== hits) note('canary host contacted', describeCase(c));
          if (world.strayHits() !== stray)
            note('allowed host asked for another path', describeCase(c));
        }),
      ),
    );
    done += size;
    process.stderr.write(`  ${done} content cases done\n`);
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await settle(proxy);
  const children = liveMediaChildren();
  const staging = world.staging();
  await fullGc();
  const end = process.memoryUsage();
  if (world.canaryRead()) canaryReads += 1;
  await proxy.close();
  await world.close();

  console.log(`\n${contentCases} content cases in ${seconds.toFixed(1)} s`);
  const allStatuses = [...new Set([...byFamily.values()].flatMap((m) => [...m.keys()]))].sort();
  console.log(`\nfamily     ${allStatuses.map((s) => String(s).padStart(6)).join('')}`);
  for (const [family, m] of [...byFamily].sort()) {
    console.log(
      `${family.padEnd(10)} ${allStatuses.map((s) => String(m.get(s) ?? 0).padStart(6)).join('')}`,
    );
  }
  console.log('\nerror code              count');
  for (const [code, k] of [...byError].sort((a, b) => b[1] - a[1])) {
    console.log(`${code.padEnd(23)} ${k}`);
  }
  console.log('\nviolations by kind');
  for (const [kind, k] of [...kinds].sort((a, b) => b[1] - a[1]))
    console.log(`  ${String(k).padStart(6)}  ${kind}`);
  for (const v of shown) console.log(`  e.g. ${v.slice(0, 300)}`);
  console.log(`\ncanary file reads              ${canaryReads}`);
  console.log(`canary host requests          ${world.canaryHits()}`);
  console.log(`allowed host stray requests   ${world.strayHits()}`);
  console.log(`transport errors              ${transportErrors}`);
  console.log(`slots held / queued after     ${after.held} / ${after.queued}`);
  console.log(`coordinators alive after      ${after.live}`);
  console.log(`ffmpeg/ffprobe alive after    ${children}`);
  console.log(`staging files after           ${staging}`);
  console.log(
    `heap before → after (GC'd)    ${mib(before.heapUsed)} → ${mib(end.heapUsed)}` +
      `   rss ${mib(before.rss)} → ${mib(end.rss)}   external ${mib(before.external)} → ${mib(end.external)}`,
  );
  const violations = [...kinds.values()].reduce((a, b) => a + b, 0);
  return (
    violations === 0 &&
    canaryReads === 0 &&
    after.held === 0 &&
    after.queued === 0 &&
    after.live === 0 &&
    children === 0 &&
    staging === 0 &&
    end.heapUsed - before.heapUsed < HEAP_SLACK_BYTES
  );
}

async function main() {
  const urlOk = cases > 0 ? await urlPhase() : true;
  const contentOk = contentCases > 0 ? await contentPhase() : true;
  process.exit(urlOk && contentOk && unhandled === 0 ? 0 : 1);
}

/** The URL phase; true when every invariant held. */
async function urlPhase(): Promise<boolean> {
  const world = makeFuzzWorld();
  const config = loadConfig({ ...world.env, AP_MAX_CONCURRENCY: '2' });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
  const byStatus = new Map<number, number>();
  const byError = new Map<string, number>();
  const violations: string[] = [];
  let violationCount = 0;
  let insideServed = 0;
  let transportErrors = 0;
  const limit = pLimit(concurrency);
  const started = performance.now();
  console.log(`fuzz: ${cases} cases, concurrency ${concurrency}, seed ${seed}`);
  for (let done = 0, batch = 0; done < cases; batch += 1) {
    const n = Math.min(SAMPLE_BATCH, cases - done);
    const reqs = fc.sample(anyRequestArb, { numRuns: n, seed: seed + batch });
    await Promise.all(
      reqs.map((req) =>
        limit(async () => {
          let res: FuzzResponse;
          try {
            res = await send(url, req);
          } catch (error) {
            transportErrors += 1;
            violations.push(`transport error ${String(error)}: ${req.method} ${req.path}`);
            return;
          }
          byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
          const verdict = judge(world, req, res);
          if (verdict.error) byError.set(verdict.error, (byError.get(verdict.error) ?? 0) + 1);
          if (res.body.includes(world.insideMarker)) insideServed += 1;
          if (verdict.problems.length > 0) {
            violationCount += 1;
            if (violations.length < SHOWN_VIOLATIONS) {
              violations.push(`${verdict.problems.join('; ')}: ${req.method} ${req.path}`);
            }
          }
        }),
      ),
    );
    done += n;
    if (batch % 10 === 9) process.stderr.write(`  ${done} done\n`);
  }
  const seconds = (performance.now() - started) / 1000;

  // The option matrix: every 200 must carry bytes, and no valid option may earn a 5xx.
  const matrixBad: string[] = [];
  let matrixRuns = 0;
  for (const f of MATRIX_FORMATS) {
    for (const x of MATRIX_EXTRAS) {
      const opts = [`f:${f}`, x, x.startsWith('t:') ? '' : 't:0:0.05'].filter(Boolean);
      const rest = `/${opts.join('/')}/plain/local://inside.wav`;
      const res = await send(url, signedRequest('GET', rest));
      matrixRuns += 1;
      byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
      if (res.status >= 500 || (res.status === 200 && res.body.length === 0)) {
        matrixBad.push(
          `${res.status} ${res.body.length} bytes  ${rest}  ${res.body.toString().slice(0, 60)}`,
        );
      }
    }
  }

  // Leak check: slots drain, nothing queued, every ffmpeg gone, still answering.
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let s = await stats(proxy.actors.semaphore);
  while ((s.held > 0 || s.queued > 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    s = await stats(proxy.actors.semaphore);
  }
  const health = await send(url, {
    method: 'GET',
    path: '/health',
    headers: {},
    signature: 'junk',
    rest: '',
  });
  await proxy.close();
  const children = liveMediaChildren();
  world.cleanup();

  console.log(`\n${cases} cases in ${seconds.toFixed(1)} s (${(cases / seconds).toFixed(0)}/s)`);
  console.log('\nstatus  count');
  for (const [status, n] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    console.log(`${String(status).padEnd(7)} ${n}`);
  }
  console.log('\nerror code              count');
  for (const [code, n] of [...byError].sort((a, b) => b[1] - a[1])) {
    console.log(`${code.padEnd(23)} ${n}`);
  }
  console.log(`\ninside file served (witness)  ${insideServed}`);
  console.log(
    `canary served                 ${violations.filter((v) => v.includes('canary')).length}`,
  );
  console.log(`transport errors              ${transportErrors}`);
  console.log(`unhandled rejections          ${unhandled}`);
  console.log(`slots held / queued after     ${s.held} / ${s.queued}`);
  console.log(`/health after                 ${health.status}`);
  console.log(`ffmpeg/ffprobe alive after    ${children}`);
  console.log(`violations                    ${violationCount}`);
  for (const v of violations) console.log(`  ${v.slice(0, 400)}`);
  console.log(
    `\noption matrix: ${matrixRuns} renders, ${matrixBad.length} answered 5xx or an empty 200`,
  );
  for (const b of matrixBad) console.log(`  ${b}`);
  return (
    violationCount === 0 &&
    matrixBad.length === 0 &&
    transportErrors === 0 &&
    s.held === 0 &&
    s.queued === 0 &&
    children === 0 &&
    health.status === 200
  );
}

await main();
