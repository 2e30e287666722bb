/**
 * The actor runtime on its own: call, cast, notify/inbox and watch, around a tiny chart. Run it
 * with
 *
 *     npx tsx examples/actor-runtime.ts
 *
 * A counter answers `add` and `get` in the transition that handles them (a call waits for that
 * answer; a cast does not), and tells its subscribers each new total with a `notify` addressed to
 * them. A monitor reports when the counter stops, and calls to a stopped or silent actor fail
 * with a stable error code instead of hanging.
 */

import { CallError, call, cast, inbox, reply, watch } from 'audio-proxy';
import { createActor, enqueueActions, setup } from 'xstate';

type CounterEvent =
  | { type: 'add'; by: number; callId?: number }
  | { type: 'get'; callId?: number }
  | { type: 'subscribe'; id: string }
  | { type: 'ignored'; callId?: number };

const counterMachine = setup({
  types: {
    context: {} as { total: number; subscribers: readonly string[] },
    events: {} as CounterEvent,
    emitted: {} as
      | { type: 'reply'; callId: number; payload: unknown }
      | { type: 'notify'; to: string; message: { total: number } },
  },
  actions: {
    // One step: add, answer the caller (if it was a call), tell every subscriber.
    add: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'add') return;
      const total = context.total + event.by;
      enqueue.assign({ total });
      for (const to of context.subscribers) {
        enqueue.emit({ type: 'notify', to, message: { total } });
      }
    }),
    answerTotal: reply(({ context }: { context: { total: number } }) => context.total),
    subscribe: enqueueActions(({ context, event, enqueue }) => {
      if (event.type === 'subscribe') {
        enqueue.assign({ subscribers: [...context.subscribers, event.id] });
      }
    }),
  },
}).createMachine({
  context: { total: 0, subscribers: [] },
  on: {
    add: { actions: ['add', 'answerTotal'] },
    get: { actions: 'answerTotal' },
    subscribe: { actions: 'subscribe' },
    ignored: {}, // handled, never answered: a call to it can only time out
  },
});

const counter = createActor(counterMachine).start();
const unwatch = watch(counter, (reason) =>
  console.log(`monitor: the counter is gone (${reason.type})`),
);

// notify → inbox: messages addressed to one participant id.
const stopInbox = inbox<{ total: number }>(counter, 'dashboard', (m) =>
  console.log(`dashboard: total is now ${m.total}`),
);
cast(counter, { type: 'subscribe', id: 'dashboard' });

console.log('call add 2 →', await call<number>(counter, { type: 'add', by: 2 }));
cast(counter, { type: 'add', by: 3 }); // no answer is asked for, none is sent
console.log('call get →', await call<number>(counter, { type: 'get' }));

try {
  await call(counter, { type: 'ignored' }, { timeout: 50 });
} catch (error) {
  console.log('call ignored →', (error as CallError).code);
}

stopInbox();
counter.stop();
try {
  await call(counter, { type: 'get' });
} catch (error) {
  if (error instanceof CallError) console.log('call after stop →', error.code);
}
unwatch();
