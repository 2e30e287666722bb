/**
 * One claimed render slot, as the registry client that claimed it holds it: a `Reservation`
 * whose status only moves forward, whose operations run one at a time, and which leaves the
 * client's books exactly once. The Redis work is the client's (`capacityRegistry.ts`); the
 * reservation reaches it only through the `ReservationLedger` the client hands it.
 *
 * ## Invariants
 * - **Status moves forward only**: `reserved` → `committed` → one of `released`, `lost`,
 *   `handed_off` (or straight from `reserved` to one of those). An ended reservation never
 *   comes back.
 * - **It leaves the books exactly once** (`end`): the ledger hears `ended` once, from where it
 *   was, so the client's counts are the slots it still owes.
 * - **Operations are serialised**: `commit` and `release` on one reservation run in call order,
 *   each after the previous one settled, whatever it answered.
 * - **A commit is a hand-over, not a claim**: idempotent once committed; one that finds the slot
 *   lapsed or adopted ends the reservation and rejects with the worker named.
 *
 * ## Races
 * - *`release()` while `commit()` is in flight*: the release waits for the commit's outcome,
 *   and tells the ledger to stop renewing before the slot is freed, so no renewal re-asserts it.
 * - *Renewal finds the hold adopted by a peer*: the client ends it (`end('lost', true)`); a later
 *   `release()` finds it ended and does nothing.
 * - *Release after the client closed*: it ends without I/O; Redis drops the hold within a lease.
 *
 * ## Events (to the ledger)
 * | What happened | Ledger call |
 * |---|---|
 * | a commit was accepted | `committed(r)` |
 * | a commit was refused as lapsed or malformed (not as foreign) | `failed(code, worker)` |
 * | a release is about to run | `forget(r)` |
 * | it left the books | `ended(r, from, lost)` |
 */
import type { RegistryErrorCode } from '../machines/registryLink.js';
import { type NodeInfo, RegistryError, type Reservation, type ReservationStatus } from './types.js';

/** Where a reservation can be before it ends. */
type Open = 'reserved' | 'committed';

/** What a reservation needs from the client that made it. The client implements it privately. */
export interface ReservationLedger {
  /** True once the client is closed: a release then ends without I/O. */
  isClosed(): boolean;
  /** Runs the commit script for `r`; answers its word (`ok`, `lost`, `foreign`, …) or throws. */
  commit(r: SlotReservation): Promise<unknown>;
  /** Runs the release script for `r`; answers its word (`ok`, `gone`, `foreign`) or throws. */
  release(r: SlotReservation): Promise<unknown>;
  /** `r` is committed: it is counted as such and renewed from now on. */
  committed(r: SlotReservation): void;
  /** A commit was refused with `code` (lapsed or malformed): counted, naming `worker`. */
  failed(code: RegistryErrorCode, worker: string): void;
  /** `r` is about to be released: it is renewed no more. */
  forget(r: SlotReservation): void;
  /** `r` left the books, from `from`; `lost` if its slot was gone before it was given back. */
  ended(r: SlotReservation, from: Open, lost: boolean): void;
}

export class SlotReservation implements Reservation {
  readonly id: string;
  readonly worker: NodeInfo;
  readonly #ledger: ReservationLedger;
  #status: ReservationStatus = 'reserved';
  #chain: Promise<unknown> = Promise.resolve();

  constructor(id: string, worker: NodeInfo, ledger: ReservationLedger) {
    this.id = id;
    this.worker = worker;
    this.#ledger = ledger;
  }

  get status(): ReservationStatus {
    return this.#status;
  }

  /** Leaves the books once (later calls do nothing): the ledger hears where it was. */
  end(status: 'released' | 'lost' | 'handed_off', lost: boolean): void {
    if (this.#status !== 'reserved' && this.#status !== 'committed') return;
    const from = this.#status;
    this.#status = status;
    this.#ledger.ended(this, from, lost);
  }

  commit(): Promise<void> {
    return this.#serial(async () => {
      if (this.#status === 'committed') return;
      if (this.#status !== 'reserved') {
        const code =
          this.#status === 'handed_off' ? 'ERR_RESERVATION_FOREIGN' : 'ERR_RESERVATION_LOST';
        throw new RegistryError(code, `reservation ${this.id} is ${this.#status}`, {
          worker: this.worker.id,
        });
      }
      const answer = await this.#ledger.commit(this);
      if (answer === 'ok') {
        this.#status = 'committed';
        this.#ledger.committed(this);
        return;
      }
      const foreign = answer === 'foreign';
      this.end(foreign ? 'handed_off' : 'lost', !foreign);
      const code: RegistryErrorCode = foreign
        ? 'ERR_RESERVATION_FOREIGN'
        : answer === 'lost'
          ? 'ERR_RESERVATION_LOST'
          : 'ERR_REGISTRY_MALFORMED';
      const error = new RegistryError(
        code,
        `commit of ${this.id} on ${this.worker.id}: ${String(answer)}`,
        { worker: this.worker.id },
      );
      if (code !== 'ERR_RESERVATION_FOREIGN') this.#ledger.failed(code, this.worker.id);
      throw error;
    });
  }

  release(): Promise<void> {
    return this.#serial(async () => {
      if (this.#status !== 'reserved' && this.#status !== 'committed') return;
      if (this.#ledger.isClosed()) {
        this.end('released', false);
        return;
      }
      this.#ledger.forget(this); // no renewal may race the release
      try {
        const answer = await this.#ledger.release(this);
        if (answer === 'foreign') this.end('handed_off', false);
        else this.end('released', answer === 'gone');
      } catch (error) {
        // The slot stays counted until its lease lapses: end it here (nobody renews it now)
        // and tell the caller, with the worker named.
        this.end('released', false);
        throw error;
      }
    });
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(step, step);
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
