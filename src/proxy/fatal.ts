/**
 * What the proxy does once the system reports a fatal failure (a state chart threw, a singleton
 * actor ended): close without draining, since a broken singleton must not keep serving, then hand
 * the decision to the host.
 *
 * ## Invariants
 * - **The close is bounded** by `budgetMs` (`FATAL_STOP_BUDGET_MS`): the host hears of the
 *   failure even if a child's stop hangs; a close that rejects counts as done.
 * - **The host decides, never the library**: `onFatal` is called once the close has ended; with
 *   no hook the failure is logged and the host process is left running. Nothing calls
 *   `process.exit`.
 * - **A throwing hook is logged**, never an unhandled rejection (that, too, would end a host).
 *
 * ## Events
 * | Log (level) | Fields          | When                                                        |
 * |-------------|-----------------|-------------------------------------------------------------|
 * | error       | `child`,`reason`| a fatal failure closed the proxy and no `onFatal` was given |
 * | error       | `err`           | the `onFatal` hook threw or rejected                        |
 */
import { FATAL_STOP_BUDGET_MS, type Fatal } from '../actors/system.js';

export interface CloseOnFatalOptions {
  /** The proxy's `close`; called with `drainMs: 0`. */
  close(options: { drainMs: number }): Promise<void>;
  /** The host's hook (`AudioProxyOptions.onFatal`). */
  readonly onFatal?: ((fatal: Fatal) => void | Promise<void>) | undefined;
  readonly logger: { error(fields: object, message?: string): void };
  /** @default FATAL_STOP_BUDGET_MS */
  readonly budgetMs?: number;
}

/** Closes (bounded), then calls the host's hook or logs; resolves when both are done. */
export async function closeOnFatal(fatal: Fatal, options: CloseOnFatalOptions): Promise<void> {
  let budget: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    options.close({ drainMs: 0 }).catch(() => {}),
    new Promise<void>((resolve) => {
      budget = setTimeout(resolve, options.budgetMs ?? FATAL_STOP_BUDGET_MS);
    }),
  ]);
  clearTimeout(budget);
  const { onFatal, logger } = options;
  if (onFatal) {
    await Promise.resolve()
      .then(() => onFatal(fatal))
      .catch((err: unknown) => logger.error({ err }, 'the onFatal hook threw'));
  } else {
    logger.error(
      { child: fatal.child, reason: fatal.reason.type },
      'audio-proxy closed after an internal failure; no onFatal hook was given, the host process is left running',
    );
  }
}
