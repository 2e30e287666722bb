// Proves source decoding and identity: `plain/` percent-decoded exactly once (malformed escapes
// refused), `enc/` base64url padded or not, every 404 rule (empty, invalid UTF-8, control/format
// code points, unknown schemes), the canonical strings of local, s3 and https sources (including
// the https folding rules), that both encodings share one identity, and remote authorisation.
import { describe, expect, it } from 'vitest';
import {
  authorizeRemote,
  parseSource,
  percentDecodeOnce,
  SOURCE_NOT_FOUND,
} from '../../src/sources/parse.js';

const enc = (s: string, pad = false) => {
  const b = Buffer.from(s, 'utf8').toString('base64url');
  return `enc/${pad ? b.padEnd(Math.ceil(b.length / 4) * 4, '=') : b}`;
};

function canonicalOf(sourceString: string): string {
  const r = parseSource(sourceString);
  if (!r.ok) throw new Error(`expected ${sourceString} to parse`);
  return r.canonical;
}

describe('decoding', () => {
  it.each([
    ['plain/local://a%20b.wav', 'local://a b.wav'],
    ['plain/local://a+b.wav', 'local://a+b.wav'],
    ['plain/local://100%25.wav', 'local://100%.wav'],
    ['plain/local://%2525.wav', 'local://%25.wav'],
    ['plain/local://caf%C3%A9.wav', 'local://café.wav'],
    ['plain/LOCAL://a.wav', 'local://a.wav'],
    ['plain/Local%3A%2F%2Fa.wav', 'local://a.wav'],
    ['plain/local://dir/plain/enc/x.wav', 'local://dir/plain/enc/x.wav'],
  ])('%s → %s', (input, canonical) => {
    expect(canonicalOf(input)).toBe(canonical);
  });

  it('enc/ accepts padded and unpadded base64url, and agrees with plain/', () => {
    for (const s of ['local://a b.wav', 'local://ab.wav', 'local://abc.wav', 's3://b/k€y.wav']) {
      const plain = `plain/${encodeURI(s)}`;
      expect(parseSource(enc(s))).toEqual(parseSource(plain));
      expect(parseSource(enc(s, true))).toEqual(parseSource(plain));
    }
  });

  it.each([
    ['malformed escape', 'plain/local://a%zz.wav'],
    ['truncated escape', 'plain/local://a%2'],
    ['lone percent', 'plain/local://100%.wav'],
    ['invalid UTF-8', 'plain/local://%C3%28.wav'],
    ['overlong UTF-8', 'plain/local://%C0%AE%C0%AE/x'],
    ['empty plain', 'plain/'],
    ['no slash after plain', 'plain'],
    ['empty enc', 'enc/'],
    ['not base64url (+)', 'enc/bG9jYWw6Ly9h+C53YXY'],
    ['not base64url (/)', `${enc('local://a.wav')}/x`],
    ['bad padding', `${enc('local://ab.wav')}===`],
    ['padding in the middle', 'enc/bG9j=YWw6Ly9hLndhdg'],
    ['impossible length', `enc/${'A'.repeat(5)}`],
    ['enc of invalid UTF-8', `enc/${Buffer.from([0x6c, 0xff, 0xfe]).toString('base64url')}`],
    ['unknown encoding', 'raw/local://a.wav'],
    ['NUL', 'plain/local://a%00b.wav'],
    ['newline', 'plain/local://a%0Ab.wav'],
    ['DEL', 'plain/local://a%7Fb.wav'],
    ['C1 NEL', 'plain/local://a%C2%85b.wav'],
    ['line separator', 'plain/local://a%E2%80%A8b.wav'],
    ['RTL override', 'plain/local://a%E2%80%AEvaw.mp3'],
    ['zero-width joiner', 'plain/local://a%E2%80%8Db.wav'],
    ['BOM', 'enc/' + Buffer.from('\ufefflocal://a.wav').toString('base64url')],
    ['no scheme', 'plain/a.wav'],
    ['http', 'plain/http://example.com/a.wav'],
    ['ftp', 'plain/ftp://example.com/a.wav'],
    ['file', 'plain/file:///etc/passwd'],
    ['data', 'plain/data://x'],
    ['scheme with a slash', 'plain/x/local://a.wav'],
  ])('%s is not found', (_name, input) => {
    expect(parseSource(input)).toBe(SOURCE_NOT_FOUND);
  });
});

describe('local', () => {
  it.each([
    ['local://previews/track.wav', 'local://previews/track.wav'],
    ['local://previews//track.wav', 'local://previews/track.wav'],
    ['local://./previews/./track.wav', 'local://previews/track.wav'],
    ['local://previews/track.wav/', 'local://previews/track.wav'],
    ['local://a/../b.wav', 'local://a/../b.wav'],
    ['local://../etc/passwd', 'local://../etc/passwd'],
    ['local:///etc/passwd', 'local:///etc/passwd'],
    ['local:////', 'local:////'],
  ])('%s → %s (confinement is authorisation’s job)', (s, canonical) => {
    expect(canonicalOf(`plain/${s}`)).toBe(canonical);
  });

  it.each(['local://', 'local://.', 'local://./.', 'local://.//./'])('%s is empty', (s) => {
    expect(parseSource(`plain/${s}`)).toBe(SOURCE_NOT_FOUND);
  });

  it('the decoded path, not the escaped one, is the identity', () => {
    expect(parseSource('plain/local://%2E%2E/outside.wav')).toEqual({
      ok: true,
      source: { scheme: 'local', path: '../outside.wav' },
      canonical: 'local://../outside.wav',
    });
  });
});

describe('s3', () => {
  it.each([
    ['s3://masters/2026/piece.wav', { bucket: 'masters', key: '2026/piece.wav' }],
    ['s3://b/a%20b.wav', { bucket: 'b', key: 'a b.wav' }],
    ['s3://b/a//b.wav', { bucket: 'b', key: 'a//b.wav' }],
    ['S3://b/k', { bucket: 'b', key: 'k' }],
  ])('%s', (s, expected) => {
    const r = parseSource(`plain/${s}`);
    expect(r).toMatchObject({ ok: true, source: { scheme: 's3', ...expected } });
    if (r.ok) expect(r.canonical).toBe(`s3://${expected.bucket}/${expected.key}`);
  });

  it.each([
    's3://',
    's3://bucket',
    's3://bucket/',
    's3:///key',
    `s3://${'b'.repeat(64)}/k`,
    `s3://b/${'k'.repeat(1025)}`,
  ])('%s is not found', (s) => {
    expect(parseSource(`enc/${Buffer.from(s).toString('base64url')}`)).toBe(SOURCE_NOT_FOUND);
  });

  it('accepts the S3 maxima', () => {
    expect(parseSource(`plain/s3://${'b'.repeat(63)}/${'k'.repeat(1024)}`).ok).toBe(true);
  });
});

describe('https', () => {
  it.each([
    ['https://media.example/a.wav', 'https://media.example/a.wav'],
    ['HTTPS://Media.Example./A.wav', 'https://media.example/A.wav'],
    ['https://media.example:443/a.wav', 'https://media.example/a.wav'],
    ['https://media.example:8443/a.wav', 'https://media.example:8443/a.wav'],
    ['https://media.example:0443/a', 'https://media.example/a'],
    ['https://media.example:/a', 'https://media.example/a'],
    ['https://media.example', 'https://media.example/'],
    ['https://media.example?x=1', 'https://media.example/?x=1'],
    ['https://media.example/a?', 'https://media.example/a'],
    ['https://media.example/a?b=1&c=%2F', 'https://media.example/a?b=1&c=%2F'],
    ['https://media.example/a#frag', 'https://media.example/a'],
    ['https://media.example/a?q#frag', 'https://media.example/a?q'],
    ['https://media.example/a%2Fb', 'https://media.example/a%2Fb'],
    ['https://media.example/a/../b', 'https://media.example/a/../b'],
    ['https://[0:0:0:0:0:0:0:1]/a', 'https://[::1]/a'],
    ['https://[2001:DB8::1]:443/a', 'https://[2001:db8::1]/a'],
    ['https://01.2.3.4/a', 'https://01.2.3.4/a'],
    ['https://1.2.3.4/a', 'https://1.2.3.4/a'],
  ])('%s → %s', (url, canonical) => {
    // Carried through enc/ so the URL's own escapes survive.
    expect(canonicalOf(enc(url))).toBe(canonical);
  });

  it('plain/ strips one layer, so an escaped URL needs double escaping', () => {
    expect(canonicalOf('plain/https://h.example/a%2520b')).toBe('https://h.example/a%20b');
    expect(parseSource('plain/https://h.example/a%20b')).toBe(SOURCE_NOT_FOUND);
  });

  it.each([
    'https://user:pass@media.example/a',
    'https://user@media.example/a',
    'https:///a.wav',
    'https://',
    'https://:443/a',
    'https://http://media.example/x',
    'https://media.example:99999/a',
    'https://media.example:12a/a',
    'https://[::1/a',
    'https://[not-ip]/a',
    'https://[fe80::1%25eth0]/a',
    'https://[::1]x/a',
    'https://med ia.example/a',
    'https://médiа.example/a',
    'https://media.example/a b',
    'https://media.example/a<b>',
    'https://media.example/a[1]',
    'https://media.example/a%zz',
    `https://${'h'.repeat(254)}/a`,
    `https://h.example/${'a'.repeat(2048)}`,
  ])('%s is not found', (url) => {
    expect(parseSource(enc(url))).toBe(SOURCE_NOT_FOUND);
  });

  it('carries the bracketless host for the allowlist', () => {
    expect(parseSource(enc('https://[::1]/a'))).toMatchObject({
      source: { scheme: 'https', host: '::1', url: 'https://[::1]/a' },
    });
  });
});

describe('authorizeRemote', () => {
  const s3 = { scheme: 's3', bucket: 'masters', key: 'k' } as const;
  const https = { scheme: 'https', url: 'https://media.example/a', host: 'media.example' } as const;

  it('unset accepts buckets and refuses hosts', () => {
    expect(authorizeRemote(s3, [])).toBe(true);
    expect(authorizeRemote(https, [])).toBe(false);
  });

  it('set, both are matched against it', () => {
    expect(authorizeRemote(s3, ['media.example'])).toBe(false);
    expect(authorizeRemote(https, ['media.example'])).toBe(true);
    expect(authorizeRemote(s3, ['mast*'])).toBe(true);
  });
});

describe('percentDecodeOnce', () => {
  it('decodes once and refuses malformed escapes', () => {
    expect(percentDecodeOnce('a%2541')).toBe('a%41');
    expect(percentDecodeOnce('%41%62')).toBe('Ab');
    expect(percentDecodeOnce('%4')).toBeUndefined();
    expect(percentDecodeOnce('%g0')).toBeUndefined();
  });
});
