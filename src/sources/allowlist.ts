/**
 * `AP_SOURCE_ALLOWLIST`: which S3 buckets and HTTPS hosts a remote source may name.
 *
 * One comma-separated list answers for both remote types, because the question is the same (is
 * this namespace ours?) and only its spelling differs. Local sources are not gated here:
 * `AP_LOCAL_ROOT` is the whole allowlist for disk.
 *
 * ## Invariants
 * - **Unset accepts every bucket and refuses every host.** A bucket without credentials is
 *   unreadable anyway; an ungated HTTPS fetch is a server-side request forgery primitive.
 * - **Wildcards are asymmetric.** Buckets: exact, or one trailing `*` prefix glob (`previews-*`).
 *   Hosts: exact, or a leading `*.` suffix glob anchored at a label boundary (`*.media.example`
 *   admits `media.example` and `cdn.media.example`, never `media.example.evil.com`). A bare `*`
 *   admits everything. A `*` anywhere else matches nothing: a pattern that cannot be honoured
 *   exactly is not honoured approximately.
 * - **Buckets match case-sensitively, hosts fold case** (as S3 and DNS do). IP-literal hosts are
 *   matched bracketless (`::1`, not `[::1]`).
 * - **A host entry names a port too.** `host` admits port 443 only; `host:8443` (or
 *   `[::1]:8443`, `*.media.example:8443`) admits that port only; a bare `*` admits every host on
 *   every port. A service on another port of an allowed host is another origin, not a subject of
 *   the entry.
 * - **Every answer is a verdict.** Nothing here throws on client input; an empty subject is refused.
 *
 * ## Races
 * None: pure functions of the parsed list.
 *
 * ## Events
 * None.
 */

export type AllowlistKind = 'bucket' | 'host';

/** Parses the raw variable: comma-separated, trimmed, empties dropped. Unset or blank → []. */
export function parseAllowlist(raw: string | undefined): readonly string[] {
  if (raw === undefined) return [];
  return raw
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

function normalizeHostPattern(pattern: string): string {
  const lower = pattern.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** The port a host subject is reached on when its URL names none. */
export const DEFAULT_HTTPS_PORT = 443;

/** A host pattern split into host and port (`[v6]:p`, `name:p`, bare IPv6 = no port). */
function splitHostPattern(pattern: string): { host: string; port: number } | undefined {
  let host = pattern;
  let portText = '';
  if (pattern.startsWith('[')) {
    const close = pattern.indexOf(']');
    if (close === -1) return undefined;
    host = pattern.slice(1, close);
    const after = pattern.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) return undefined;
    portText = after.slice(1);
  } else {
    const colons = pattern.split(':').length - 1;
    if (colons === 1) {
      const at = pattern.indexOf(':');
      host = pattern.slice(0, at);
      portText = pattern.slice(at + 1);
    }
  }
  if (portText === '') return { host, port: DEFAULT_HTTPS_PORT };
  if (!/^\d{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  return port >= 1 && port <= 65_535 ? { host, port } : undefined;
}

/** Whether one pattern admits one subject (the subject already normalised by its source type). */
export function patternMatches(
  kind: AllowlistKind,
  pattern: string,
  subject: string,
  port: number = DEFAULT_HTTPS_PORT,
): boolean {
  if (pattern === '*') return true;
  if (kind === 'bucket') {
    const star = pattern.indexOf('*');
    if (star === -1) return pattern === subject;
    // Exactly one `*`, in the trailing position, with a non-empty prefix.
    if (star !== pattern.length - 1 || star === 0) return false;
    return subject.startsWith(pattern.slice(0, -1));
  }
  const split = splitHostPattern(pattern);
  if (split === undefined || split.port !== port) return false;
  const p = normalizeHostPattern(split.host);
  if (p.startsWith('*.')) {
    const suffix = p.slice(2);
    if (suffix === '' || suffix.includes('*')) return false;
    return subject === suffix || subject.endsWith(`.${suffix}`);
  }
  return !p.includes('*') && p === subject;
}

/**
 * The verdict for a bucket, or a (normalised, bracketless) host on `port` (default 443), against
 * the parsed allowlist.
 */
export function isAllowed(
  kind: AllowlistKind,
  subject: string,
  allowlist: readonly string[],
  port: number = DEFAULT_HTTPS_PORT,
): boolean {
  if (typeof subject !== 'string' || subject === '') return false;
  if (allowlist.length === 0) return kind === 'bucket';
  return allowlist.some((pattern) => patternMatches(kind, pattern, subject, port));
}
