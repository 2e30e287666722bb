/**
 * The probe-verdict cache alone: keys name a source version (canonical, size, mtime) and only a
 * fully known version; the bound evicts the least recently used; capacity 0 keeps nothing; hit
 * and miss counts follow the lookups.
 */
import { describe, expect, it } from 'vitest';
import { ProbeCache } from '../../src/services/probeCache.js';

describe('ProbeCache', () => {
  it('keys a version only when both size and mtime are known', () => {
    expect(ProbeCache.keyOf({ canonical: 'local://a.wav', size: 10, mtimeMs: 5 })).toBe(
      'local://a.wav\n10\n5',
    );
    expect(ProbeCache.keyOf({ canonical: 'https://h/a.wav', size: 10 })).toBeUndefined();
    expect(ProbeCache.keyOf({ canonical: 'https://h/a.wav', mtimeMs: 5 })).toBeUndefined();
    expect(ProbeCache.keyOf({ canonical: 'a', size: 1, mtimeMs: 2 })).not.toBe(
      ProbeCache.keyOf({ canonical: 'a', size: 1, mtimeMs: 3 }),
    );
  });

  it('evicts the least recently used past its bound', () => {
    const cache = new ProbeCache<string>(2);
    cache.set('a', 'A');
    cache.set('b', 'B');
    expect(cache.get('a')).toBe('A'); // a is now the most recent
    cache.set('c', 'C'); // evicts b
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe('A');
    expect(cache.get('c')).toBe('C');
    expect(cache.size).toBe(2);
    expect({ hits: cache.hits, misses: cache.misses }).toEqual({ hits: 3, misses: 1 });
  });

  it('keeps nothing for an unknown version or at capacity 0', () => {
    const cache = new ProbeCache<string>(4);
    cache.set(undefined, 'X');
    expect(cache.size).toBe(0);
    expect(cache.get(undefined)).toBeUndefined();
    const off = new ProbeCache<string>(0);
    off.set('a', 'A');
    expect(off.get('a')).toBeUndefined();
    expect(() => new ProbeCache(-1)).toThrow(RangeError);
  });
});
