/**
 * `Range` for serving a stored variant (a HIT): single `bytes=` ranges only.
 *
 * A stored variant has a known size, which is what makes `206` and `416` possible; a MISS ignores
 * `Range` altogether (its caller never asks). Anything this does not understand is answered with
 * the whole variant, which RFC 9110 permits for any `Range` a server chooses to ignore.
 *
 * ## Invariants
 * - **Only one well-formed range is honoured.** Several ranges, another unit, a repeated header,
 *   signs, spaces inside numbers and `last < first` are all `full`.
 * - **A partial range lies inside the variant:** `0 <= start <= end <= size − 1`. An end past the
 *   last byte is clamped; a suffix longer than the variant is the whole variant.
 * - **Unsatisfiable means syntactically valid and empty:** `first >= size` (every range on a
 *   zero-length variant) or the suffix `-0`. The caller answers 416 naming the size.
 *
 * ## Races
 * None: a pure function of the header and the size the store reported.
 *
 * ## Events
 * None.
 */

export type RangeResult =
  | { readonly type: 'full' }
  | { readonly type: 'partial'; readonly start: number; readonly end: number }
  | { readonly type: 'unsatisfiable' };

const FULL: RangeResult = Object.freeze({ type: 'full' } as const);
const UNSATISFIABLE: RangeResult = Object.freeze({ type: 'unsatisfiable' } as const);
const DIGITS = /^\d+$/;
const UNIT = /^bytes=/i;

/** Digits only (`+5`, ` 5`, `5.0` are not positions). Huge values stay huge: past any size. */
function integer(text: string): number | undefined {
  return DIGITS.test(text) ? Number(text) : undefined;
}

function satisfiable(start: number, end: number, size: number): RangeResult {
  return start < size && start <= end ? { type: 'partial', start, end } : UNSATISFIABLE;
}

/** Interprets a `Range` header against a stored variant of `size` bytes. */
export function parseRange(
  header: string | readonly string[] | undefined,
  size: number,
): RangeResult {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError('size must be a byte count');
  if (header === undefined) return FULL;
  if (typeof header !== 'string') {
    if (header.length !== 1) return FULL;
    header = header[0]!;
  }
  const value = header.trim();
  if (!UNIT.test(value)) return FULL;
  const specs = value.slice('bytes='.length).split(',');
  if (specs.length !== 1) return FULL;
  const spec = specs[0]!.trim();

  if (spec.startsWith('-')) {
    const length = integer(spec.slice(1));
    if (length === undefined) return FULL;
    // `-0` asks for no bytes at all: unsatisfiable rather than empty.
    if (length === 0) return UNSATISFIABLE;
    return satisfiable(Math.max(size - length, 0), size - 1, size);
  }

  const dash = spec.indexOf('-');
  if (dash === -1) return FULL;
  const first = integer(spec.slice(0, dash));
  if (first === undefined) return FULL;
  const lastText = spec.slice(dash + 1);
  if (lastText === '') return satisfiable(first, size - 1, size);
  const last = integer(lastText);
  if (last === undefined) return FULL;
  // `last < first` is not a range at all: ignored, not refused.
  if (last < first) return FULL;
  return satisfiable(first, Math.min(last, size - 1), size);
}

/** The `Content-Range` value of a 206. */
export function contentRange(start: number, end: number, size: number): string {
  return `bytes ${start}-${end}/${size}`;
}
