/**
 * `Range`: single `bytes=` ranges only, for a stored variant (a HIT, `parseRange` against its
 * size) and for a render still running (`parseRangeWant` now, `resolveRange` once a total is
 * known; the delivery chart decides in between, see `machines/delivery.ts`).
 *
 * Anything this does not understand is answered with the whole variant, which RFC 9110 permits
 * for any `Range` a server chooses to ignore.
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

/**
 * What a `Range` header asks for before any size is known: `from` (`first-` or `first-last`),
 * `suffix` (the last `length` bytes), `none` (`-0`: no bytes at all) or `full` (no header, or
 * one this parser ignores). A render whose total is not known yet holds on to this until its
 * bytes say whether and how it can be answered (`machines/delivery.ts`).
 */
export type RangeWant =
  | { readonly type: 'full' }
  | { readonly type: 'from'; readonly first: number; readonly last?: number }
  | { readonly type: 'suffix'; readonly length: number }
  | { readonly type: 'none' };

const WANT_FULL: RangeWant = Object.freeze({ type: 'full' } as const);
const WANT_NONE: RangeWant = Object.freeze({ type: 'none' } as const);

/** Interprets a `Range` header without a size (see `RangeWant`). */
export function parseRangeWant(header: string | readonly string[] | undefined): RangeWant {
  if (header === undefined) return WANT_FULL;
  if (typeof header !== 'string') {
    if (header.length !== 1) return WANT_FULL;
    header = header[0]!;
  }
  const value = header.trim();
  if (!UNIT.test(value)) return WANT_FULL;
  const specs = value.slice('bytes='.length).split(',');
  if (specs.length !== 1) return WANT_FULL;
  const spec = specs[0]!.trim();

  if (spec.startsWith('-')) {
    const length = integer(spec.slice(1));
    if (length === undefined) return WANT_FULL;
    // `-0` asks for no bytes at all: unsatisfiable rather than empty.
    return length === 0 ? WANT_NONE : { type: 'suffix', length };
  }

  const dash = spec.indexOf('-');
  if (dash === -1) return WANT_FULL;
  const first = integer(spec.slice(0, dash));
  if (first === undefined) return WANT_FULL;
  const lastText = spec.slice(dash + 1);
  if (lastText === '') return { type: 'from', first };
  const last = integer(lastText);
  if (last === undefined) return WANT_FULL;
  // `last < first` is not a range at all: ignored, not refused.
  if (last < first) return WANT_FULL;
  return { type: 'from', first, last };
}

/** What `want` means against a variant of `size` bytes. */
export function resolveRange(want: RangeWant, size: number): RangeResult {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError('size must be a byte count');
  switch (want.type) {
    case 'full':
      return FULL;
    case 'none':
      return UNSATISFIABLE;
    case 'suffix':
      return satisfiable(Math.max(size - want.length, 0), size - 1, size);
    case 'from':
      return satisfiable(want.first, Math.min(want.last ?? size - 1, size - 1), size);
  }
}

/** Interprets a `Range` header against a stored variant of `size` bytes. */
export function parseRange(
  header: string | readonly string[] | undefined,
  size: number,
): RangeResult {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError('size must be a byte count');
  return resolveRange(parseRangeWant(header), size);
}

/** The `Content-Range` value of a 206; a `size` of null is a total not known yet (`/*`). */
export function contentRange(start: number, end: number, size: number | null): string {
  return `bytes ${start}-${end}/${size ?? '*'}`;
}
