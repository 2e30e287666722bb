/**
 * call() throughput against a trivial callee (one flat state that replies from an action).
 *
 * Prints calls/s, median of interleaved rounds, for:
 * - `send only`: `actor.send` of the same event, the reply emitted to a no-op listener. This
 *   is XState's own cost per event, the ceiling for anything built on it;
 * - `hand-rolled`: a `Map<id, resolve>` plus `new Promise` per call, the idiom `stack.md`
 *   measured at ~1.7 µs;
 * - `call() sequential`: one caller awaiting each call in turn;
 * - `call() x4 concurrent`: 4 callers, each awaiting its own calls, interleaved on one callee.
 *
 * Run: `npx tsx bench/call.ts [callsPerRound=200000] [rounds=5]`. Rounds are interleaved so
 * background load hits every variant alike; rates are given per wall second and per CPU second
 * (the steadier one on a shared box). Compare the ratios more than the absolutes.
 */
import { performance } from 'node:perf_hooks';
import { createActor, setup } from 'xstate';
import { call } from '../src/actors/call.js';
import { type CallEnvelope, type ReplyEvent, reply } from '../src/core/protocol.js';

const CALLS_PER_ROUND = Number(process.argv[2] ?? 200_000);
const ROUNDS = Number(process.argv[3] ?? 5);
/** Callers in the concurrent variant; the semaphore bench uses 4 competing callers. */
const CONCURRENT_CALLERS = 4;

const callee = setup({
  types: {} as {
    events: { type: 'ping' } & CallEnvelope;
    context: { n: number };
    emitted: ReplyEvent;
  },
  actions: { pong: reply(({ context }: { context: { n: number } }) => context.n) },
}).createMachine({ context: { n: 1 }, on: { ping: { actions: 'pong' } } });

function sendOnly(n: number): number {
  const actor = createActor(callee).start();
  actor.on('reply', () => {});
  const t0 = performance.now();
  for (let i = 0; i < n; i++) actor.send({ type: 'ping', callId: i + 1 });
  return performance.now() - t0;
}

async function handRolled(n: number): Promise<number> {
  const actor = createActor(callee).start();
  const pending = new Map<number, (payload: unknown) => void>();
  actor.on('reply', (event: ReplyEvent) => {
    const resolve = pending.get(event.callId);
    pending.delete(event.callId);
    resolve?.(event.payload);
  });
  let id = 0;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    await new Promise((resolve) => {
      const callId = ++id;
      pending.set(callId, resolve);
      actor.send({ type: 'ping', callId });
    });
  }
  return performance.now() - t0;
}

async function sequential(n: number): Promise<number> {
  const actor = createActor(callee).start();
  await call(actor, { type: 'ping' });
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await call(actor, { type: 'ping' });
  return performance.now() - t0;
}

async function concurrent(n: number): Promise<number> {
  const actor = createActor(callee).start();
  const perCaller = Math.floor(n / CONCURRENT_CALLERS);
  const caller = async () => {
    for (let i = 0; i < perCaller; i++) await call(actor, { type: 'ping' });
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENT_CALLERS }, caller));
  return performance.now() - t0;
}

/** Wall and CPU milliseconds of `run`; CPU time is what a shared, loaded box distorts least. */
async function measure(run: (n: number) => number | Promise<number>, n: number) {
  const cpu0 = process.cpuUsage();
  const wallMs = await run(n);
  const cpu = process.cpuUsage(cpu0);
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

const variants: Array<[string, (n: number) => number | Promise<number>]> = [
  ['send only', sendOnly],
  ['hand-rolled', handRolled],
  ['call() sequential', sequential],
  [`call() x${CONCURRENT_CALLERS} concurrent`, concurrent],
];

const wall = new Map<string, number[]>(variants.map(([name]) => [name, []]));
const cpu = new Map<string, number[]>(variants.map(([name]) => [name, []]));
for (const [, run] of variants) await run(20_000); // warm up the JIT for every variant
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, run] of variants) {
    const { wallMs, cpuMs } = await measure(run, CALLS_PER_ROUND);
    wall.get(name)!.push((CALLS_PER_ROUND / wallMs) * 1000);
    cpu.get(name)!.push((CALLS_PER_ROUND / cpuMs) * 1000);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (rate: number) => Math.round(rate).toLocaleString('en-US').padStart(10);
const base = median(cpu.get('send only')!);
console.log(`node ${process.version}, ${CALLS_PER_ROUND} calls x ${ROUNDS} rounds (medians)`);
console.log(`${''.padEnd(24)} ${'calls/wall s'.padStart(12)} ${'calls/CPU s'.padStart(12)}`);
for (const [name] of variants) {
  const rate = median(cpu.get(name)!);
  console.log(
    `${name.padEnd(24)} ${fmt(median(wall.get(name)!))}   ${fmt(rate)}` +
      `  ${(1e6 / rate).toFixed(2)} µs/call  ${(rate / base).toFixed(2)}x send-only`,
  );
}
