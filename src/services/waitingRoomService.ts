/**
 * The waiting room in the proxy: the admission-queue chart, with each reserved room slot backed
 * by one real render slot from the semaphore.
 *
 * The room promises a listener "your turn has come": that promise is only true if a render slot
 * is actually kept for them. So when the room reserves a slot for a session, this service asks
 * the semaphore for a slot under the id `room:<session>`; when the session's render request
 * arrives, its coordinator takes that slot over with `transfer` (the count goes 1 → 1, never
 * 1 → 0 → 1, so no outside request can slip into the gap); when the reservation ends unclaimed
 * the slot is released, or transferred straight to the next session the room hands it to.
 *
 * The room has `AP_WAITING_ROOM_SLOTS` slots, at most `AP_MAX_CONCURRENCY − 1` (checked at boot):
 * tickets can hold that many render slots and no more, so however many sessions join and keep
 * their tickets alive, requests without a ticket always have a render slot of their own.
 *
 * ## Invariants
 * - **At most one semaphore slot per reserved room slot**, held under `room:<session>`; so at
 *   most `AP_WAITING_ROOM_SLOTS` semaphore slots are ever held for tickets.
 * - **A claimed slot is never released by the room**: after `transfer` it is the coordinator's,
 *   released when its ffmpeg is gone.
 * - **Every claim is ended**: `claim` answers non-null for every run the room started, implicit
 *   ones (no reservation, no slot to adopt) included, and the handler sends one `runEnded` for
 *   each non-null answer once its response is over.
 * - **Requests without a ticket are unchanged**: they ask the semaphore as before.
 *
 * ## Races
 * - *Reservation lapses while the claim is in flight*: the room judges the claim against its own
 *   window; a refused claim renders like an ordinary request.
 * - *The semaphore has no free slot when the room reserves* (other traffic holds them): the
 *   `room:<session>` request queues like any waiter and the takeover moves the queued place.
 */
import type { Actor, ActorOptions, AnyActorRef } from 'xstate';
import { call, cast } from '../actors/call.js';
import type { ConfigProvider } from '../config/index.js';
import type {
  JoinOutcome,
  LeaveOutcome,
  RoomClaimOutcome,
  StatusOutcome,
  waitingRoomMachine,
} from '../machines/waitingRoom.js';
import type { WaitingRoomTelemetry } from '../machines/waitingRoomSlots.js';
import { join, leave, startWaitingRoom, status } from './waitingRoomClient.js';

/** What the HTTP side's queue endpoints and render path ask of the room (`endpoints()`). */
export interface WaitingRoomCalls {
  join(session: string): Promise<JoinOutcome>;
  status(session: string): Promise<StatusOutcome>;
  leave(session: string): Promise<LeaveOutcome>;
  claim(session: string): Promise<{ readonly adoptSlotId: string | null } | null>;
  runEnded(session: string, cancelled: boolean): void;
}

export function roomSlotId(session: string): string {
  return `room:${session}`;
}

export class WaitingRoomService {
  readonly room: Actor<typeof waitingRoomMachine>;
  readonly #semaphore: AnyActorRef;

  constructor(options: {
    semaphore: AnyActorRef;
    config: ConfigProvider;
    now?: () => number;
    /** XState inspection observer (the proxy's `inspect` option). */
    inspect?: ActorOptions<typeof waitingRoomMachine>['inspect'];
  }) {
    const c = options.config.get();
    this.#semaphore = options.semaphore;
    this.room = startWaitingRoom(
      {
        // The room's share of the render slots; the rest always serve requests without a ticket.
        slots: c.waitingRoomSlots,
        reservationSeconds: c.waitingRoomReservationS,
        heartbeatSeconds: c.waitingRoomHeartbeatS,
        maxLength: c.waitingRoomMaxLength,
        now: options.now ?? Date.now,
      },
      options.inspect ? { inspect: options.inspect } : {},
    );
    this.room.on('*', (event: { type: string }) =>
      this.#onRoomEvent(event as WaitingRoomTelemetry),
    );
  }

  #onRoomEvent(event: WaitingRoomTelemetry): void {
    switch (event.type) {
      case 'reserved':
        void this.#reserve(event.session, event.handedFrom);
        return;
      case 'released':
      case 'finished':
        // Handed on: the `reserved` for the next session moves the slot. Otherwise give it back
        // (a no-op when the slot was already taken over by a render).
        if (event.handedTo === null) {
          cast(this.#semaphore, { type: 'release', id: roomSlotId(event.session) });
        }
        return;
      default:
        return;
    }
  }

  async #reserve(session: string, handedFrom: string | null): Promise<void> {
    const to = roomSlotId(session);
    if (handedFrom !== null) {
      const moved = await call<{ type: string }>(this.#semaphore, {
        type: 'transfer',
        from: roomSlotId(handedFrom),
        to,
      });
      if (moved.type === 'transferred') return;
    }
    await call(this.#semaphore, { type: 'request', id: to });
  }

  /**
   * The session's render starts its run in the room: `null` when refused (nothing to end), else
   * the run, with the reserved slot id to take over (`null` for an implicit claim, which holds
   * no slot and acquires one as usual). The caller owes exactly one `runEnded` per non-null.
   */
  async claim(session: string): Promise<{ readonly adoptSlotId: string | null } | null> {
    const outcome = await call<RoomClaimOutcome>(this.room, { type: 'claim', session });
    if (outcome.type !== 'claimed') return null;
    return { adoptSlotId: outcome.implicit ? null : roomSlotId(session) };
  }

  /** The claimed run is over (its response finished, failed or was abandoned); every claim's. */
  runEnded(session: string, cancelled: boolean): void {
    cast(this.room, { type: 'runEnded', session, cancelled });
  }

  /** The room's calls as free functions (no `this`), for the HTTP side. */
  endpoints(): WaitingRoomCalls {
    return {
      join: (session) => join(this.room, session),
      status: (session) => status(this.room, session),
      leave: (session) => leave(this.room, session),
      claim: (session) => this.claim(session),
      runEnded: (session, cancelled) => this.runEnded(session, cancelled),
    };
  }

  stop(): void {
    this.room.stop();
  }
}
