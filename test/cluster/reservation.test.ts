// A reservation on its own, over a fake ledger (no Redis): its status only moves forward, it
// leaves the books exactly once whichever way it ends, commit and release run one at a time in
// call order, a release stops renewal before its script runs, and after the client closed a
// release ends it without I/O. The Redis side is `capacityRegistry.test.ts`'s.
import { describe, expect, it } from 'vitest';
import { type ReservationLedger, SlotReservation } from '../../src/cluster/reservation.js';
import { RegistryError } from '../../src/cluster/types.js';

const WORKER = Object.freeze({
  id: 'w1',
  url: 'http://w1',
  capacity: 2,
  label: null,
  draining: false,
});

/** A ledger that records every call and answers scripts from queues (`ok` by default). */
function ledger() {
  const calls: string[] = [];
  const answers = { commit: [] as unknown[], release: [] as unknown[] };
  let closed = false;
  const gate: { open?: () => void } = {};
  const l: ReservationLedger = {
    isClosed: () => closed,
    commit: async (r) => {
      calls.push(`commit:${r.id}`);
      if (gate.open === undefined && answers.commit[0] === 'wait') {
        answers.commit.shift();
        await new Promise<void>((resolve) => {
          gate.open = resolve;
        });
      }
      const answer = answers.commit.shift() ?? 'ok';
      if (answer instanceof Error) throw answer;
      return answer;
    },
    release: async (r) => {
      calls.push(`release:${r.id}`);
      const answer = answers.release.shift() ?? 'ok';
      if (answer instanceof Error) throw answer;
      return answer;
    },
    committed: (r) => calls.push(`committed:${r.id}`),
    failed: (code, worker) => calls.push(`failed:${code}:${worker}`),
    forget: (r) => calls.push(`forget:${r.id}`),
    ended: (r, from, lost) => calls.push(`ended:${r.id}:${from}:${lost}`),
  };
  return { l, calls, answers, close: () => (closed = true), gate };
}

const reservation = (l: ReservationLedger) => new SlotReservation('r1', WORKER, l);

describe('a reservation', () => {
  it('commits once (idempotent), then releases once: the ledger hears each step once', async () => {
    const { l, calls } = ledger();
    const r = reservation(l);
    expect(r.status).toBe('reserved');
    await r.commit();
    await r.commit();
    expect(r.status).toBe('committed');
    await r.release();
    await r.release();
    expect(r.status).toBe('released');
    expect(calls).toEqual([
      'commit:r1',
      'committed:r1',
      'forget:r1',
      'release:r1',
      'ended:r1:committed:false',
    ]);
  });

  it.each([
    ['lost', 'lost', 'ERR_RESERVATION_LOST', ['failed:ERR_RESERVATION_LOST:w1']],
    ['foreign', 'handed_off', 'ERR_RESERVATION_FOREIGN', []],
    ['nonsense', 'lost', 'ERR_REGISTRY_MALFORMED', ['failed:ERR_REGISTRY_MALFORMED:w1']],
  ])(
    'a commit answered %s ends it as %s and rejects with %s',
    async (answer, status, code, failed) => {
      const { l, calls, answers } = ledger();
      answers.commit.push(answer);
      const r = reservation(l);
      const error = await r.commit().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RegistryError);
      expect(error).toMatchObject({ code, worker: 'w1' });
      expect(r.status).toBe(status);
      expect(calls).toEqual(['commit:r1', `ended:r1:reserved:${answer !== 'foreign'}`, ...failed]);
      // Ended means ended: no second commit, and a release does nothing.
      await expect(r.commit()).rejects.toMatchObject({
        code: status === 'lost' ? 'ERR_RESERVATION_LOST' : 'ERR_RESERVATION_FOREIGN',
      });
      await r.release();
      expect(calls).toHaveLength(2 + failed.length);
    },
  );

  it('a release waits for the commit in flight, and sees its outcome', async () => {
    const { l, calls, answers, gate } = ledger();
    answers.commit.push('wait');
    const r = reservation(l);
    const committing = r.commit();
    const releasing = r.release();
    await Promise.resolve();
    expect(calls).toEqual(['commit:r1']); // the release has not started
    gate.open!();
    await Promise.all([committing, releasing]);
    expect(calls).toEqual([
      'commit:r1',
      'committed:r1',
      'forget:r1',
      'release:r1',
      'ended:r1:committed:false',
    ]);
  });

  it('a release answered gone ends it as lost; foreign as handed off', async () => {
    for (const [answer, status, lost] of [
      ['gone', 'released', true],
      ['foreign', 'handed_off', false],
    ] as const) {
      const { l, calls, answers } = ledger();
      answers.release.push(answer);
      const r = reservation(l);
      await r.release();
      expect(r.status).toBe(status);
      expect(calls.at(-1)).toBe(`ended:r1:reserved:${lost}`);
    }
  });

  it('a failed release still ends it (nobody renews it now) and rejects', async () => {
    const { l, calls, answers } = ledger();
    const failure = new RegistryError('ERR_REGISTRY_UNREACHABLE', 'down', { worker: 'w1' });
    answers.release.push(failure);
    const r = reservation(l);
    await expect(r.release()).rejects.toBe(failure);
    expect(r.status).toBe('released');
    expect(calls).toEqual(['forget:r1', 'release:r1', 'ended:r1:reserved:false']);
  });

  it('after the client closed, a release ends it without I/O', async () => {
    const { l, calls, close } = ledger();
    const r = reservation(l);
    close();
    await r.release();
    expect(r.status).toBe('released');
    expect(calls).toEqual(['ended:r1:reserved:false']);
  });

  it('end() from the client (a hold found foreign) counts once; a later release does nothing', async () => {
    const { l, calls } = ledger();
    const r = reservation(l);
    await r.commit();
    r.end('lost', true);
    r.end('released', false);
    await r.release();
    expect(r.status).toBe('lost');
    expect(calls).toEqual(['commit:r1', 'committed:r1', 'ended:r1:committed:true']);
  });

  it('keeps its state private', () => {
    const r = reservation(ledger().l);
    expect(Object.keys(r).sort()).toEqual(['id', 'worker']);
  });
});
