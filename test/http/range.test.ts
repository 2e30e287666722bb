// Proves single-range parsing for HIT serving: suffix, open and closed ranges with the end clamped,
// the two unsatisfiable forms (`first >= size`, `-0`, and everything on an empty variant), and that
// multi-range, other units, repeated headers, malformed specs and `last < first` are ignored.
import { describe, expect, it } from 'vitest';
import { contentRange, parseRange } from '../../src/http/range.js';

const SIZE = 1000;
const full = { type: 'full' };
const unsat = { type: 'unsatisfiable' };
const part = (start: number, end: number) => ({ type: 'partial', start, end });

describe('parseRange', () => {
  it.each([
    ['bytes=0-99', part(0, 99)],
    ['bytes=0-0', part(0, 0)],
    ['bytes=100-', part(100, 999)],
    ['bytes=0-', part(0, 999)],
    ['bytes=999-', part(999, 999)],
    ['bytes=500-5000', part(500, 999)],
    ['bytes=999-999', part(999, 999)],
    ['bytes=-100', part(900, 999)],
    ['bytes=-1', part(999, 999)],
    ['bytes=-1000', part(0, 999)],
    ['bytes=-5000', part(0, 999)],
    ['bytes= 10-20 ', part(10, 20)],
    ['  bytes=10-20', part(10, 20)],
    ['Bytes=10-20', part(10, 20)],
    ['bytes=0010-0020', part(10, 20)],
    // unsatisfiable
    ['bytes=1000-', unsat],
    ['bytes=1000-2000', unsat],
    ['bytes=5000-6000', unsat],
    ['bytes=-0', unsat],
    [`bytes=${'9'.repeat(30)}-`, unsat],
    // ignored
    ['bytes=0-1,5-6', full],
    ['bytes=0-1, 5-6', full],
    ['bytes=', full],
    ['bytes=-', full],
    ['bytes=abc', full],
    ['bytes=1-a', full],
    ['bytes=a-1', full],
    ['bytes=+1-2', full],
    ['bytes=1 -2', full],
    ['bytes=1.5-2', full],
    ['bytes=--1', full],
    ['bytes=20-10', full],
    ['items=0-1', full],
    ['bytes 0-1', full],
    ['0-1', full],
    ['', full],
  ])('%j → %j', (header, expected) => {
    expect(parseRange(header, SIZE)).toEqual(expected);
  });

  it('no header, or a repeated one, is the full body', () => {
    expect(parseRange(undefined, SIZE)).toEqual(full);
    expect(parseRange(['bytes=0-1', 'bytes=2-3'], SIZE)).toEqual(full);
    expect(parseRange(['bytes=0-1'], SIZE)).toEqual(part(0, 1));
  });

  it('every range on an empty variant is unsatisfiable', () => {
    for (const header of ['bytes=0-', 'bytes=0-0', 'bytes=-1', 'bytes=-0']) {
      expect(parseRange(header, 0)).toEqual(unsat);
    }
    expect(parseRange('bytes=1-0', 0)).toEqual(full);
  });

  it('refuses a size that is not a byte count', () => {
    expect(() => parseRange('bytes=0-1', -1)).toThrow(RangeError);
    expect(() => parseRange('bytes=0-1', 1.5)).toThrow(RangeError);
  });

  it('formats Content-Range', () => {
    expect(contentRange(0, 99, SIZE)).toBe('bytes 0-99/1000');
  });
});
