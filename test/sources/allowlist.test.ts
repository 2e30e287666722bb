// Proves the allowlist grammar: unset accepts buckets and refuses hosts; exact names; the bucket
// trailing-`*` prefix glob; the host leading-`*.` label-anchored suffix glob; bare `*`; stray `*`
// matching nothing; buckets case-sensitive and hosts case-folded; and the raw variable's parsing.
import { describe, expect, it } from 'vitest';
import { isAllowed, parseAllowlist, patternMatches } from '../../src/sources/allowlist.js';

describe('parseAllowlist', () => {
  it.each([
    [undefined, []],
    ['', []],
    [' , ', []],
    ['masters', ['masters']],
    [' masters , *.media.example,, ', ['masters', '*.media.example']],
  ])('%j → %j', (raw, list) => {
    expect(parseAllowlist(raw)).toEqual(list);
  });
});

describe('buckets', () => {
  it.each([
    ['masters', 'masters', true],
    ['masters', 'Masters', false],
    ['masters', 'masters2', false],
    ['previews-*', 'previews-eu', true],
    ['previews-*', 'previews-', true],
    ['previews-*', 'preview', false],
    ['*', 'anything', true],
    ['*previews', 'x-previews', false],
    ['pre*views', 'preXviews', false],
    ['previews-**', 'previews-x', false],
    ['*.media.example', 'cdn.media.example', false],
  ])('%j vs %j → %s', (pattern, bucket, expected) => {
    expect(patternMatches('bucket', pattern, bucket)).toBe(expected);
  });
});

describe('hosts', () => {
  it.each([
    ['media.example', 'media.example', true],
    ['Media.Example.', 'media.example', true],
    ['media.example', 'cdn.media.example', false],
    ['*.media.example', 'media.example', true],
    ['*.media.example', 'cdn.media.example', true],
    ['*.media.example', 'a.b.media.example', true],
    ['*.Media.Example', 'cdn.media.example', true],
    ['*.media.example', 'media.example.evil.com', false],
    ['*.media.example', 'evilmedia.example', false],
    ['cdn.*', 'cdn.evil.com', false],
    ['*.', 'media.example', false],
    ['*.*.example', 'a.b.example', false],
    ['*', 'anything.example', true],
    ['::1', '::1', true],
    ['[::1]', '::1', true], // brackets are how an IPv6 entry names a port
  ])('%j vs %j → %s', (pattern, host, expected) => {
    expect(patternMatches('host', pattern, host)).toBe(expected);
  });

  // Issue #14: the allowlist ignored ports, so any service on an allowed host was reachable.
  it.each([
    ['media.example', 'media.example', 443, true],
    ['media.example', 'media.example', 8443, false],
    ['media.example:8443', 'media.example', 8443, true],
    ['media.example:8443', 'media.example', 443, false],
    ['media.example:443', 'media.example', 443, true],
    ['*.media.example:8443', 'cdn.media.example', 8443, true],
    ['*.media.example', 'cdn.media.example', 22, false],
    ['127.0.0.1', '127.0.0.1', 6379, false],
    ['127.0.0.1:6379', '127.0.0.1', 6379, true],
    ['[::1]:8443', '::1', 8443, true],
    ['[::1]:8443', '::1', 443, false],
    ['::1', '::1', 8443, false],
    ['media.example:0', 'media.example', 0, false],
    ['media.example:99999', 'media.example', 99999, false],
    ['media.example:x', 'media.example', 443, false],
    ['*', 'anything.example', 8443, true],
  ])('%j admits %j on port %i → %s', (pattern, host, port, expected) => {
    expect(patternMatches('host', pattern, host, port)).toBe(expected);
  });
});

describe('isAllowed', () => {
  it('unset: buckets yes, hosts no', () => {
    expect(isAllowed('bucket', 'masters', [])).toBe(true);
    expect(isAllowed('host', 'media.example', [])).toBe(false);
  });

  it('set: any pattern admits', () => {
    const list = ['masters', '*.media.example'];
    expect(isAllowed('bucket', 'masters', list)).toBe(true);
    expect(isAllowed('bucket', 'other', list)).toBe(false);
    expect(isAllowed('host', 'cdn.media.example', list)).toBe(true);
    expect(isAllowed('host', 'evil.example', list)).toBe(false);
  });

  it('an empty subject is refused', () => {
    expect(isAllowed('bucket', '', [])).toBe(false);
    expect(isAllowed('host', '', ['*'])).toBe(false);
  });
});
