/**
 * The async face of the readiness latch (`machines/readiness.ts`): `checkReady` reads the render
 * queue's depth from the semaphore and asks the latch whether the node is ready (`GET /ready`).
 *
 * ## Invariants
 * - **Only listeners' waiting counts** (issue #19): the depth judged is the `interactive` class's,
 *   the one live requests use. Warm work queued at `high|normal|low` yields to every live
 *   request (displaced, or preempted once running), so a queue full of it must not take the
 *   node out of rotation.
 * - **Every uncertainty resolves to ready**: a depth read that fails or overruns
 *   `READINESS_DEPTH_TIMEOUT_MS` counts as depth 0, and a latch that does not answer within
 *   `READINESS_CHECK_TIMEOUT_MS` is answered `{ ready: true, queued: 0 }`. A node is taken out
 *   of rotation only on evidence, never because a read was slow.
 */
import type { AnyActorRef } from 'xstate';
import { call } from '../actors/call.js';
import type { ReadinessReply } from '../machines/readiness.js';
import { stats as semaphoreStats } from './semaphoreClient.js';

/** Readiness reads the semaphore's depth with this deadline; a slow read counts as depth 0. */
export const READINESS_DEPTH_TIMEOUT_MS = 1_000;
/** How long the latch gets to answer before the node is called ready. */
export const READINESS_CHECK_TIMEOUT_MS = 2_000;

/** Asks `readiness` about the depth of `semaphore`'s queue against `threshold` (0: disabled). */
export async function checkReady(
  semaphore: AnyActorRef,
  readiness: AnyActorRef,
  threshold: number,
): Promise<ReadinessReply> {
  let queued = 0;
  try {
    queued = (await semaphoreStats(semaphore, READINESS_DEPTH_TIMEOUT_MS)).queuedByClass
      .interactive;
  } catch {
    queued = 0; // every uncertainty resolves to ready
  }
  try {
    return await call<ReadinessReply>(
      readiness,
      { type: 'check', queued, threshold },
      { timeout: READINESS_CHECK_TIMEOUT_MS },
    );
  } catch {
    return { ready: true, queued: 0, threshold };
  }
}
