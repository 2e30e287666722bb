/**
 * The waiting room on its own, as a single-runner gate in front of an expensive job (here a
 * key derivation; it could be an encode, a report, a model call). Run it with
 *
 *     npx tsx examples/waiting-room.ts
 *
 * Four listeners want the runner at once, so they queue in join order and each polls its ticket
 * (the poll is its heartbeat). A fifth finds the room full and is told when to come back. One
 * listener gives up while it waits, and its place goes to the next ticket. The fifth, now
 * admitted, never polls, so its ticket is dropped as stale. Each waiter's ETA comes from the
 * runs timed so far. The script ends when the last job is done.
 */
import { pbkdf2 } from 'node:crypto';
import { promisify } from 'node:util';
import type { TicketView, WaitingRoomTelemetry } from 'audio-proxy';
import { join, startWaitingRoom, withAdmission } from 'audio-proxy/services/waitingRoomClient';

const derive = promisify(pbkdf2);
const started = Date.now();
const stamp = () => `${String(Date.now() - started).padStart(5)} ms`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long one job keeps deriving keys: long enough that the queue below really forms. */
const JOB_MS = 600;

/** The expensive job: key derivations, chained for at least `JOB_MS` of CPU. */
async function expensiveJob(name: string): Promise<string> {
  const until = Date.now() + JOB_MS;
  let key = Buffer.from(name);
  do key = await derive(key, 'waiting-room-salt', 50_000, 32, 'sha512');
  while (Date.now() < until);
  return key.toString('hex').slice(0, 12);
}

const room = startWaitingRoom({
  slots: 1, // one runner: the job is never run twice at once
  reservationSeconds: 2, // a ready listener has 2 s to claim its turn
  heartbeatSeconds: 1, // a queued listener that stops polling for 1 s loses its place
  maxLength: 3, // at most three queued listeners; the fourth is told to retry
  now: () => Date.now(),
  sweepMs: 100,
});

// What the room does, as the proxy would see it: slots reserved, claimed, released, finished.
const describe = (e: WaitingRoomTelemetry): string => {
  switch (e.type) {
    case 'joined':
      return `${e.session} joined (${e.status}), ${e.queued} queued`;
    case 'rejected':
      return `${e.session} turned away: full, retry after ${e.retryAfterS} s`;
    case 'reserved':
      return `slot ${e.slot} reserved for ${e.session} for ${e.expiresInS} s`;
    case 'claimed':
      return `${e.session} runs in slot ${e.slot}`;
    case 'released':
      return `${e.session} gave slot ${e.slot} back (${e.reason})`;
    case 'finished':
      return `${e.session} finished in ${e.durationS.toFixed(2)} s`;
    case 'dropped':
      return `${e.session}'s ticket dropped (${e.reason})`;
  }
};
for (const type of [
  'joined',
  'rejected',
  'reserved',
  'claimed',
  'released',
  'finished',
  'dropped',
] as const) {
  room.on(type, (e) => console.log(`${stamp()}  room: ${describe(e as WaitingRoomTelemetry)}`));
}

const lastSeen = new Map<string, string>();
const progress = (name: string) => (t: TicketView) => {
  const line = `${t.status} #${t.position}, eta ${t.eta_seconds ?? '?'} s`;
  if (lastSeen.get(name) === line) return;
  lastSeen.set(name, line);
  console.log(`${stamp()}  ${name}: ${line}`);
};

const devGivesUp = new AbortController();
const listeners = ['ana', 'ben', 'cleo', 'dev'].map((name) =>
  withAdmission(room, name, () => expensiveJob(name), {
    pollMs: 250,
    onTicket: progress(name),
    ...(name === 'dev' ? { signal: devGivesUp.signal } : {}),
  }).then(
    (result) => [name, result] as const,
    (error: Error) => [name, { type: 'gave up', reason: error.message }] as const,
  ),
);

// eve arrives while three listeners queue behind the runner.
const refused = await join(room, 'eve');
console.log(`${stamp()}  eve: ${JSON.stringify(refused)}`);

await sleep(300);
devGivesUp.abort(new Error('closed the tab'));
await sleep(50);
const admitted = await join(room, 'eve'); // dev's place is free now
if (admitted.type === 'ticket') {
  console.log(`${stamp()}  eve: queued #${admitted.ticket.position}, and then never polls`);
}

for (const [name, result] of await Promise.all(listeners)) {
  console.log(`${name.padEnd(5)} ${JSON.stringify(result)}`);
}
const { meanS, durationsS } = room.getSnapshot().context;
console.log(`runs timed: ${durationsS.length}, smoothed run time ${meanS?.toFixed(2)} s`);
room.stop();
