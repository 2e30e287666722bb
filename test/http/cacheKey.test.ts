// Proves the variant identity: the key is lowercase hex SHA-256 of `normalised ‖ "\n" ‖ canonical`
// (vectors computed independently with Python's hashlib), equal variants share it whatever the
// segment order or source spelling, the ETag is the quoted key, If-None-Match matching follows the
// weak comparison over comma lists with `*` ignored, and the /info ETag formula.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cacheKey, etagOf, ifNoneMatchMatches, infoEtag } from '../../src/http/cacheKey.js';
import { parseRoute } from '../../src/http/options.js';
import { parseSource } from '../../src/sources/parse.js';

// python3 -c "import hashlib; print(hashlib.sha256(b'f:opus/br:96\ns3://masters/a.wav').hexdigest())"
const VECTORS: [string, string, string][] = [
  [
    'f:opus/br:96',
    's3://masters/a.wav',
    '612b3925668968859c6ce7c319d1c417e3e966ee172b6450e8b46524090531e9',
  ],
  [
    'ch:1/f:peaks/pk_fmt:json/pts:800',
    'local://a.wav',
    '61cd94f2351d2e3be26cb181227e716b5b175f247e6ef0f60b34e7491cdb9e1b',
  ],
];

function keyOfUrlRest(rest: string): string {
  const route = parseRoute(rest);
  if (!route.ok || route.endpoint !== 'render') throw new Error(`not a render route: ${rest}`);
  const source = parseSource(route.source);
  if (!source.ok) throw new Error(`bad source: ${route.source}`);
  return cacheKey(route.normalized, source.canonical);
}

describe('cacheKey', () => {
  it.each(VECTORS)('sha256(%j ‖ \\n ‖ %j)', (normalized, canonical, expected) => {
    expect(cacheKey(normalized, canonical)).toBe(expected);
  });

  it('hashes the canonical source as UTF-8', () => {
    const expected = createHash('sha256')
      .update('f:mp3\nlocal://caf\u00e9.wav', 'utf8')
      .digest('hex');
    expect(cacheKey('f:mp3', 'local://caf\u00e9.wav')).toBe(expected);
  });

  it('the separator keeps the halves apart', () => {
    expect(cacheKey('', 'gain:3')).not.toBe(cacheKey('gain:3', ''));
  });

  it('refuses a normalised string with a newline (programmer error)', () => {
    expect(() => cacheKey('cb:a\nb', 'local://a.wav')).toThrow(RangeError);
  });

  it('is computable from the URL alone and blind to order, exp and source spelling', () => {
    const base = keyOfUrlRest('/f:opus/br:96/plain/local://dir/a%20b.wav');
    expect(keyOfUrlRest('/br:96/f:opus/plain/local://dir/a%20b.wav')).toBe(base);
    expect(keyOfUrlRest('/br:96/exp:2000000000/f:opus/plain/local://dir//./a%20b.wav')).toBe(base);
    const enc = Buffer.from('local://dir/a b.wav').toString('base64url');
    expect(keyOfUrlRest(`/f:opus/br:96/enc/${enc}`)).toBe(base);
    expect(keyOfUrlRest('/f:opus/br:96/cb:2/plain/local://dir/a%20b.wav')).not.toBe(base);
  });
});

describe('etagOf and If-None-Match', () => {
  const key = VECTORS[0]![2];
  const etag = etagOf(key);

  it('quotes the key', () => {
    expect(etag).toBe(`"${key}"`);
  });

  it.each([
    [etag, true],
    [`W/${etag}`, true],
    [`"other", ${etag}`, true],
    [`"a",W/${etag} ,"b"`, true],
    [[`"a"`, `W/${etag}`], true],
    [key, false],
    ['*', false],
    [`w/${etag}`, false],
    ['"other"', false],
    ['', false],
    [undefined, false],
    [[], false],
  ])('%j → %s', (header, expected) => {
    expect(ifNoneMatchMatches(header as string | string[] | undefined, etag)).toBe(expected);
  });
});

describe('infoEtag', () => {
  it('is the quoted sha256 of canonical ‖ \\n ‖ material', () => {
    const expected = createHash('sha256').update('local://a.wav\nabc123').digest('hex');
    expect(infoEtag('local://a.wav', 'abc123')).toBe(`"${expected}"`);
  });
});
