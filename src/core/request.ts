/**
 * The request's nouns, as the HTTP layer and the services exchange them: what the probe gate
 * found (`ProbeOutcome`), what a MISS asks to render (`RenderRequest`), and what subscribing to
 * a render answered (`SubscribeOutcome`).
 *
 * The handler produces requests and consumes outcomes; `services/` produce outcomes. Neither
 * side defines these, so neither imports the other.
 */
import type { AnyActorRef } from 'xstate';
import type { Failure, RenderFailure } from './failure.js';
import type { ResolvedSource } from './source.js';
import type { RenderOptions } from './variant.js';

/** What the render needs from the probe: rate, channels, depth, duration. */
export interface SourceMedia {
  readonly sampleRate?: number;
  readonly channels?: number;
  readonly bitDepth?: number;
  readonly duration?: number;
}

/** What the probe gate found about a source: the /info body and the media facts, or a failure. */
export type ProbeOutcome =
  | {
      readonly ok: true;
      /** The /info body (snake_case, unknown fields absent). */
      readonly info: Record<string, unknown>;
      readonly media?: SourceMedia;
    }
  | { readonly ok: false; readonly failure: Failure };

/** What a MISS asks the render service for. */
export interface RenderRequest {
  /** A semaphore slot id to take over instead of requesting one (a waiting-room claim). */
  readonly adoptSlotId?: string;
  /** A cluster registry reservation this render was handed off with (a peer's full queue). */
  readonly clusterReservation?: string;
  readonly key: string;
  /**
   * Rendered only for the variant store (warm work, prefetch): its ffmpeg runs at the weakest
   * niceness, so a listener's encode gets the CPU first while both run.
   */
  readonly background?: true;
  readonly options: RenderOptions;
  readonly source: ResolvedSource;
  /** The probe gate's findings about the source (absent only when no probe ran). */
  readonly media?: SourceMedia;
}

/** What subscribing to a variant's render answered: a render to stream from, or a failure. */
export type SubscribeOutcome =
  | {
      readonly type: 'miss' | 'coalesced';
      readonly coordinator: AnyActorRef;
      readonly state: 'queued' | 'rendering' | 'completed';
      readonly backlog: readonly Buffer[];
    }
  | { readonly type: 'failed'; readonly failure: RenderFailure };
