/**
 * What `exp` means once the URL has been parsed: the 410 verdict, and the clamps that keep a live
 * response from outliving its URL.
 *
 * The grammar (`exp` is an integer 1..253402300799) lives in `options.ts`; this module owns the
 * time. The clock is injected: every function takes `nowS` (Unix seconds), so the verdict and the
 * clamps of one request can be computed from one reading and tests never sleep.
 *
 * ## Invariants
 * - **The expiring second is still served.** The verdict is `now > exp`, with no leeway: a
 *   generator that wants a margin adds it to its own timestamps.
 * - **A live response never hands out a longer life than its URL has.** Every `max-age` in a
 *   success response's `Cache-Control` is clamped to `min(existing, exp − now)`; the rest of the
 *   header is untouched. Without `exp` the clamps are identities.
 * - **Remaining life is never negative.** An expired URL has 0 seconds left.
 * - **Stored variants are not clamped.** The clamp belongs to the response on its way out, never
 *   to the metadata written back, which every `exp` shares.
 *
 * ## Races
 * None: pure functions of their arguments.
 *
 * ## Events
 * None.
 */

const MAX_AGE = /max-age=(\d+)/g;

/** Seconds of life left in the URL (never negative), or `Infinity` without `exp`. */
export function remainingS(exp: number | undefined, nowS: number): number {
  if (exp === undefined) return Number.POSITIVE_INFINITY;
  return Math.max(exp - Math.floor(nowS), 0);
}

/** The 410 verdict: true when `now > exp`. No `exp`, never expired. */
export function isExpired(exp: number | undefined, nowS: number): boolean {
  return exp !== undefined && Math.floor(nowS) > exp;
}

/**
 * Rewrites every `max-age=N` in `cacheControl` to `max-age=min(N, exp − now)`. Identity without
 * `exp`. `s-maxage` is a different directive and is left alone (it is not emitted here anyway).
 */
export function clampCacheControl(
  cacheControl: string,
  exp: number | undefined,
  nowS: number,
): string {
  const remaining = remainingS(exp, nowS);
  if (remaining === Number.POSITIVE_INFINITY) return cacheControl;
  return cacheControl.replace(MAX_AGE, (whole, digits: string, offset: number) => {
    // `s-maxage` does not contain `max-age=`; guard anyway against `x-max-age` style extensions.
    const before = offset === 0 ? '' : cacheControl[offset - 1]!;
    if (before !== '' && /[A-Za-z0-9_-]/.test(before)) return whole;
    return `max-age=${Math.min(Number(digits), remaining)}`;
  });
}

/** Clamps a credential's time-to-live (a presigned HIT redirect) to the URL's own. 0 is a real answer. */
export function clampTtlS(ttlS: number, exp: number | undefined, nowS: number): number {
  return Math.min(ttlS, remainingS(exp, nowS));
}
