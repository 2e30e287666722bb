// Proves the raw-path byte convention shared by the signature, the cache key and the source
// decoder: byte strings map one code unit to one byte, text becomes the UTF-8 byte string a client
// would send, and wider code units are refused as programmer errors.
import { describe, expect, it } from 'vitest';
import { isByteString, rawBytes, toRawPath } from '../../src/http/rawPath.js';

describe('raw paths', () => {
  it('maps a byte string to its bytes one to one', () => {
    expect([...rawBytes('/a%20\u00ff')]).toEqual([0x2f, 0x61, 0x25, 0x32, 0x30, 0xff]);
  });

  it('turns text into the UTF-8 byte string a client sends', () => {
    expect(toRawPath('/plain/local://ascii.wav')).toBe('/plain/local://ascii.wav');
    expect([...rawBytes(toRawPath('/\u20ac'))]).toEqual([0x2f, 0xe2, 0x82, 0xac]);
  });

  it('refuses code units wider than a byte', () => {
    expect(isByteString('\u00ff')).toBe(true);
    expect(isByteString('\u0100')).toBe(false);
    expect(() => rawBytes('/\u20ac')).toThrow(TypeError);
  });
});
