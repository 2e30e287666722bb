/**
 * Fuzzing at volume: `npx tsx bench/fuzz.ts --cases 100000 [--concurrency 8] [--seed N]`.
 *
 * The same generators and oracle as `test/reliability/fuzz.test.ts` (hostile URLs and headers
 * against a real proxy on loopback, a canary beside the local root), without shrinking, with a
 * few requests in flight at once. Prints counts by status and by error code, the violations
 * (the first few in full), an option matrix (edge values of every option per format, rendered
 * for real, listing any 5xx or empty 200), and the leak check at the end: no render slot held,
 * no waiter, no ffmpeg alive, the proxy still answering /health. Exits 1 on any violation.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import fc from 'fast-check';
import pLimit from 'p-limit';
import { pino } from 'pino';
import { stats } from '../src/actors/semaphoreClient.js';
import { loadConfig } from '../src/config.js';
import { createAudioProxy } from '../src/proxy.js';
import {
  anyRequestArb,
  type FuzzRequest,
  type FuzzResponse,
  judge,
  makeFuzzWorld,
  signedRequest,
} from '../test/reliability/fuzzCases.js';

const DEFAULT_CASES = 100_000;
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
const seed = arg('seed', Date.now() % 2 ** 31);

/** Live (non-zombie) ffmpeg/ffprobe children of this process, asked of /proc. */
function liveMediaChildren(): number {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === process.pid && state !== 'Z' && /^ff(mpeg|probe)/.test(comm)) n += 1;
    } catch {
      // the process ended while we looked
    }
  }
  return n;
}

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

async function main() {
  let unhandled = 0;
  process.on('unhandledRejection', () => {
    unhandled += 1;
  });
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
  const ok =
    violationCount === 0 &&
    matrixBad.length === 0 &&
    transportErrors === 0 &&
    unhandled === 0 &&
    s.held === 0 &&
    s.queued === 0 &&
    children === 0 &&
    health.status === 200;
  process.exit(ok ? 0 : 1);
}

await main();
