/**
 * The burst's client side, run as its own process (its own event loop and file table, so the
 * proxy's loop measures only itself): `node --import tsx burstClient.ts <base> <count> <template>`
 * opens `count` connections at once, one GET each (the template with `{i}` replaced by the index), reads every answer to the end
 * and prints one JSON summary line on stdout.
 *
 * **Invariants**
 * - Every request is started in one synchronous loop before any answer is read: the arrivals are
 *   as simultaneous as one process can make them.
 * - Each request has its own connection (`Connection: close`); nothing is pooled or retried.
 * - HTTP is spoken over raw sockets (`rawAnswer.ts`): Node's HTTP client cost this process
 *   ~3.6 s of CPU per 5,000 requests, taken from the two cores the proxy under test runs on.
 *
 * **Races**
 * - *A connection refused or reset under the accept backlog*: recorded by error code, never
 *   retried, so the parent sees it.
 *
 * **Events**: none; the summary line is the output.
 */
import { connect } from 'node:net';
import { type RawAnswer, readAnswer } from './rawAnswer.js';

/** Whole-run deadline: past it, what has not answered is reported as unanswered. */
const CLIENT_DEADLINE_MS = 180_000;

export interface BurstClientSummary {
  readonly sent: number;
  readonly statuses: Record<string, number>;
  readonly errors: Record<string, number>;
  /** 200s that ended without their terminating chunk. */
  readonly torn200: number;
  /** Other answers that ended before their body did. */
  readonly cutShort: number;
  /** 429s whose body is not the queue_full row or whose Retry-After is missing or < 1. */
  readonly bad429: number;
  readonly minRetryAfterS: number | null;
  readonly unanswered: number;
  /** From the first request started to the last answer read. */
  readonly elapsedMs: number;
  /** When every request had been started, from the first. */
  readonly startedAllMs: number;
}

async function main(): Promise<void> {
  const [base, countText, template] = process.argv.slice(2);
  const count = Number(countText);
  if (!base || !template?.includes('{i}') || !Number.isInteger(count) || count < 1) {
    throw new TypeError('usage: burstClient.ts <base-url> <count> <path-template-with-{i}>');
  }
  const url = new URL(base);
  const statuses: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let torn200 = 0;
  let bad429 = 0;
  let cutShort = 0;
  let minRetryAfterS: number | null = null;
  let pending = count;
  const t0 = performance.now();
  let lastAnswer = t0;
  let finish!: () => void;
  const allDone = new Promise<void>((r) => {
    finish = r;
  });
  const settle = () => {
    lastAnswer = performance.now();
    if (--pending === 0) finish();
  };
  const tally = (answer: RawAnswer) => {
    const { status } = answer;
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (!answer.complete) {
      if (status === 200) torn200++;
      else cutShort++;
      return;
    }
    if (status !== 429) return;
    const retryAfter = Number(answer.headers['retry-after']);
    let error: unknown;
    try {
      error = JSON.parse(answer.body.toString('utf8')).error;
    } catch {
      error = undefined;
    }
    if (!(retryAfter >= 1) || error !== 'queue_full') bad429++;
    if (retryAfter >= 1) minRetryAfterS = Math.min(minRetryAfterS ?? retryAfter, retryAfter);
  };
  const port = Number(url.port);
  for (let i = 0; i < count; i++) {
    const path = template.replace('{i}', String(i));
    const socket = connect({ host: url.hostname, port });
    const chunks: Buffer[] = [];
    let settled = false;
    socket.setNoDelay(true);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      const code = e.code ?? e.message;
      errors[code] = (errors[code] ?? 0) + 1;
      settle();
    });
    socket.on('close', () => {
      if (settled) return;
      settled = true;
      const answer = readAnswer(Buffer.concat(chunks));
      if (answer) tally(answer);
      else errors.no_answer = (errors.no_answer ?? 0) + 1;
      settle();
    });
  }
  const startedAllMs = performance.now() - t0;
  const deadline = setTimeout(finish, CLIENT_DEADLINE_MS);
  await allDone;
  clearTimeout(deadline);
  const summary: BurstClientSummary = {
    sent: count,
    statuses,
    errors,
    torn200,
    cutShort,
    bad429,
    minRetryAfterS,
    unanswered: pending,
    elapsedMs: Math.round(lastAnswer - t0),
    startedAllMs: Math.round(startedAllMs),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  process.exit(0);
}

await main();
