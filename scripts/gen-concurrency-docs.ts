/**
 * docs/concurrency-replay.md and the recordings its diagrams are drawn from.
 *
 *   npx tsx scripts/gen-concurrency-docs.ts            write the page from docs/recordings/
 *   npx tsx scripts/gen-concurrency-docs.ts --check    exit 1 if the page is stale (writes nothing)
 *   npx tsx scripts/gen-concurrency-docs.ts --record   re-record every scenario (real proxies,
 *                                                      real ffmpeg), then write the page
 *
 * The scenarios (`src/debug/replayDocs.ts`'s `REPLAY_SCENARIOS`) are recorded by the functions
 * below, exported for test/concurrencyDocs.test.ts, which re-records one to prove the committed
 * recording still matches what the code does.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createActor } from 'xstate';
import { inbox } from '../src/actors/call.js';
import { loadConfig } from '../src/config/index.js';
import { formatRecording, parseRecording, type Recording } from '../src/core/recording.js';
import { createFlightRecorder } from '../src/debug/recorder.js';
import { REPLAY_SCENARIOS, renderReplayDocs } from '../src/debug/replayDocs.js';
import { semaphoreMachine } from '../src/machines/semaphore.js';
import { createAudioProxy } from '../src/proxy.js';
import { release, request } from '../src/services/semaphoreClient.js';
import { publishTelemetry, SEMAPHORE_PREFIX } from '../src/telemetry/channels.js';
import { resolveFfmpeg } from '../src/workers/ffmpegPath.js';

const DOCS = fileURLToPath(new URL('../docs/', import.meta.url));
export const RECORDINGS_DIR = join(DOCS, 'recordings');
const PAGE = join(DOCS, 'concurrency-replay.md');

interface Answer {
  readonly status: number;
  readonly cookie: string | undefined;
  readonly body: string;
}

/** One request on a fresh socket: status, the `name=value` of its cookie, the body as text. */
function fetchAnswer(url: string, method = 'GET', cookie?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = cookie === undefined ? {} : { cookie };
    const req = httpRequest(url, { agent: false, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          cookie: res.headers['set-cookie']?.[0]?.split(';')[0],
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

function fetchStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

async function withProxy(
  env: Record<string, string>,
  run: (url: string) => Promise<void>,
  reason: string,
): Promise<Recording> {
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const root = mkdtempSync(join(tmpdir(), 'ap-docs-rec-'));
  execFileSync(ffmpeg, [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440:duration=2',
    '-ac',
    '1',
    join(root, 'tone.wav'),
  ]);
  const config = loadConfig({
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_MAX_CONCURRENCY: '1',
    AP_LOG_LEVEL: 'error',
    AP_FLIGHT_RECORDER: '50000',
    ...env,
  });
  const proxy = await createAudioProxy({ config, logger: pino({ level: 'silent' }) });
  try {
    const { url } = await proxy.listen({ host: '127.0.0.1', port: 0, metricsPort: 0 });
    await run(url);
    await new Promise((r) => setTimeout(r, 1_500)); // the coordinators' linger ends
    return proxy.recorder!.recording(reason);
  } finally {
    await proxy.close();
  }
}

/** Three concurrent requests for one variant. */
export function recordCoalescedCrowd(): Promise<Recording> {
  return withProxy(
    {},
    async (url) => {
      const path = `${url}/insecure/f:mp3/t:0:2/plain/local://tone.wav`;
      const statuses = await Promise.all([fetchStatus(path), fetchStatus(path), fetchStatus(path)]);
      if (statuses.some((s) => s !== 200)) throw new Error(`crowd answered ${statuses.join(',')}`);
    },
    'docs: coalesced-crowd',
  );
}

/** Two renders one after the other, with a pool retired after each task. */
export function recordRecycledPool(): Promise<Recording> {
  return withProxy(
    { AP_MAX_RENDERS_PER_WORKER_POOL: '1' },
    async (url) => {
      for (const t of ['t:0:1', 't:1:1']) {
        const status = await fetchStatus(`${url}/insecure/f:mp3/${t}/plain/local://tone.wav`);
        if (status !== 200) throw new Error(`render answered ${status}`);
      }
    },
    'docs: recycled-pool',
  );
}

/** A real semaphore (one slot, a queue of one): a low waiter displaced by an interactive one. */
export async function recordDisplacedWaiter(): Promise<Recording> {
  const recorder = createFlightRecorder({ capacity: 1_000, dir: tmpdir() });
  const sem = createActor(semaphoreMachine, {
    input: { capacity: 1, queueSize: 1 },
    inspect: recorder.observer,
  });
  recorder.name(sem, 'semaphore');
  sem.start();
  const detach = publishTelemetry(sem, SEMAPHORE_PREFIX); // the recorder is on the channels
  try {
    const told: string[] = [];
    const offLow = inbox(sem, 'low-1', (m: { type: string }) => told.push(`low-1 ${m.type}`));
    const offHigh = inbox(sem, 'interactive-1', (m: { type: string }) =>
      told.push(`interactive-1 ${m.type}`),
    );
    await request(sem, 'holder-1');
    await request(sem, 'low-1', { class: 'low' });
    await request(sem, 'interactive-1', { class: 'interactive' });
    await release(sem, 'holder-1');
    await release(sem, 'interactive-1');
    offLow();
    offHigh();
    if (told.join(',') !== 'low-1 displaced,interactive-1 granted') {
      throw new Error(`unexpected messages: ${told.join(',')}`);
    }
    return recorder.recording('docs: displaced-waiter');
  } finally {
    detach();
    sem.stop();
    recorder.close();
  }
}

/**
 * Two sessions, one waiting-room slot (`AP_MAX_CONCURRENCY=2`, so the room may hold one): the
 * first ticket is ready at once, the second queued behind it; the first session renders with its
 * cookie (an implicit claim of its reserved slot), its run ends, and the second ticket is promoted
 * to the slot and rendered.
 */
export function recordWaitingRoomPromotion(): Promise<Recording> {
  return withProxy(
    { AP_MAX_CONCURRENCY: '2', AP_WAITING_ROOM: '1' },
    async (url) => {
      const render = '/insecure/f:mp3/t:0:1/plain/local://tone.wav';
      const join = `${url}/api/v1/queue/join?path=${encodeURIComponent(render)}`;
      const first = await fetchAnswer(join, 'POST');
      const second = await fetchAnswer(join, 'POST');
      const statusOf = async (cookie: string | undefined) =>
        JSON.parse((await fetchAnswer(`${url}/api/v1/queue/status`, 'GET', cookie)).body) as {
          status?: string;
        };
      if ((await statusOf(first.cookie)).status !== 'ready') throw new Error('first not ready');
      if ((await statusOf(second.cookie)).status !== 'queued') throw new Error('second not queued');
      const ran = await fetchAnswer(`${url}${render}`, 'GET', first.cookie);
      if (ran.status !== 200) throw new Error(`first render answered ${ran.status}`);
      for (let i = 0; (await statusOf(second.cookie)).status !== 'ready'; i++) {
        if (i > 100) throw new Error('second ticket never promoted');
        await new Promise((r) => setTimeout(r, 50));
      }
      const promoted = await fetchAnswer(
        `${url}${render.replace('t:0:1', 't:1:1')}`,
        'GET',
        second.cookie,
      );
      if (promoted.status !== 200) throw new Error(`promoted render answered ${promoted.status}`);
    },
    'docs: waiting-room-promotion',
  );
}

export const RECORDERS: Record<string, () => Promise<Recording>> = {
  'coalesced-crowd': recordCoalescedCrowd,
  'displaced-waiter': recordDisplacedWaiter,
  'recycled-pool': recordRecycledPool,
  'waiting-room-promotion': recordWaitingRoomPromotion,
};

/** The committed recordings, by scenario id. */
export function committedRecordings(): Map<string, Recording> {
  const out = new Map<string, Recording>();
  for (const s of REPLAY_SCENARIOS) {
    try {
      out.set(s.id, parseRecording(readFileSync(join(RECORDINGS_DIR, `${s.id}.ndjson`), 'utf8')));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return out;
}

export function pagePath(): string {
  return PAGE;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--record')) {
    mkdirSync(RECORDINGS_DIR, { recursive: true });
    for (const [id, record] of Object.entries(RECORDERS)) {
      const recording = await record();
      writeFileSync(join(RECORDINGS_DIR, `${id}.ndjson`), formatRecording(recording));
      process.stdout.write(`recorded ${id}: ${recording.entries.length} entries\n`);
    }
  }
  const generated = renderReplayDocs(committedRecordings());
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(PAGE, 'utf8');
    } catch {
      // missing counts as stale
    }
    if (current !== generated) {
      process.stderr.write(`${PAGE} is stale; run: npx tsx scripts/gen-concurrency-docs.ts\n`);
      process.exit(1);
    }
  } else {
    writeFileSync(PAGE, generated);
    process.stdout.write(`wrote ${PAGE}\n`);
  }
}
