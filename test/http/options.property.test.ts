// Proves over generated option strings (every key, spellings with leading zeros, trailing zeros,
// `-0`, shuffled order, with and without `exp`) that normalisation is a fixed point: whatever
// parses, its normalised string parses again to the same string; that segment order and `exp`
// never change it; and that a normalised string never contains a newline. Witness: a large share
// of the generated inputs are accepted, so the property is not vacuous.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FORMATS } from '../../src/core/variant.js';
import { normalizeOptions, parseOptions } from '../../src/http/options.js';

const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'.split('')), minLength: min, maxLength: max });

/** A decimal in the grammar's plain notation, with spelling noise that must normalise away. */
const decimalText = (maxInt: number, signed: boolean) =>
  fc
    .tuple(
      signed ? fc.boolean() : fc.constant(false),
      fc.integer({ min: 0, max: maxInt }),
      fc.option(digits(1, 3), { nil: undefined }),
      fc.constantFrom('', '0', '00'),
    )
    .map(([neg, int, frac, zeros]) => {
      const lead = int === 0 ? '' : zeros;
      const body = frac === undefined ? `${lead}${int}` : `${lead}${int}.${frac}`;
      return neg ? `-${body}` : body;
    });

const intText = (min: number, max: number) =>
  fc.tuple(fc.integer({ min, max }), fc.constantFrom('', '0')).map(([n, z]) => `${z}${n}`);

const opaque = fc.string({
  unit: fc.constantFrom(...'abcXYZ09%-._~'.split('')),
  minLength: 1,
  maxLength: 8,
});

const segments: Record<string, fc.Arbitrary<string>> = {
  f: fc.constantFrom(...FORMATS),
  br: intText(1, 10000),
  q: decimalText(12, true),
  sr: intText(8000, 96000),
  ch: fc.constantFrom('1', '2'),
  bd: fc.constantFrom('16', '24', '32f'),
  t: fc
    .tuple(decimalText(100, false), fc.option(decimalText(100, false), { nil: undefined }))
    .map(([s, d]) => (d === undefined ? s : `${s}:${d}`)),
  fade: fc
    .tuple(decimalText(3, false), fc.option(decimalText(3, false), { nil: undefined }))
    .map(([i, o]) => (o === undefined ? i : `${i}:${o}`)),
  gain: decimalText(100, true),
  norm: fc
    .tuple(
      fc.integer({ min: 0, max: 3 }),
      decimalText(70, true),
      decimalText(9, true),
      decimalText(50, false),
    )
    .map(([n, i, tp, lra]) => ['ebu', i, tp, lra].slice(0, n + 1).join(':')),
  enhance: fc.constant('voice'),
  pts: intText(1, 100000),
  pk_fmt: fc.constantFrom('json', 'dat'),
  dl: opaque,
  cb: opaque,
  exp: intText(1, 253402300799),
};

const optionSet = fc
  .subarray(Object.keys(segments), { minLength: 0 })
  .chain((keys) =>
    fc
      .tuple(...keys.map((k) => segments[k]!.map((v) => `${k}:${v}`)))
      .chain((segs) =>
        fc.shuffledSubarray(segs, { minLength: segs.length, maxLength: segs.length }),
      ),
  );

describe('options properties', () => {
  it('normalisation is a fixed point, order-blind, exp-blind and newline-free', () => {
    let accepted = 0;
    let total = 0;
    fc.assert(
      fc.property(optionSet, (segs) => {
        total += 1;
        const parsed = parseOptions(segs);
        if (!parsed.ok) return;
        accepted += 1;
        const once = normalizeOptions(parsed.options);
        expect(once).not.toContain('\n');
        expect(once).not.toContain('exp:');
        const again = parseOptions(once);
        expect(again.ok).toBe(true);
        if (!again.ok) return;
        expect(normalizeOptions(again.options)).toBe(once);
        expect(again.options).toEqual(parsed.options);
        // Order never matters.
        const reversed = parseOptions([...segs].reverse());
        expect(reversed.ok && normalizeOptions(reversed.options)).toBe(once);
        // exp never matters.
        const withoutExp = parseOptions(segs.filter((s) => !s.startsWith('exp:')));
        expect(withoutExp.ok && normalizeOptions(withoutExp.options)).toBe(once);
      }),
      { numRuns: 300 },
    );
    // Non-vacuity witness: many combinations are legal.
    expect(accepted).toBeGreaterThan(total / 10);
  });

  it('a refusal always names a segment and never throws', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 12 }), { maxLength: 6 }), (segs) => {
        const r = parseOptions(segs);
        if (!r.ok) {
          expect(r.error).toBe('invalid_options');
          expect(typeof r.message).toBe('string');
          expect(r.message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 200 },
    );
  });
});
