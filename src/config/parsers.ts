/**
 * The readers rows are made of: one function per kind of value (integer, boolean, enumeration,
 * hex, list, directory, file, executable, IP literal, origin, URL…). Each takes the row's
 * `Reading` and returns the parsed value, or records one problem and returns its fallback.
 *
 * ## Invariants
 * - **Every message names the variable and the rule** (`RULE`), and quotes the bad value through
 *   `show`, which elides it past `MAX_ECHO_CHARS`.
 * - **No secret is echoed.** Hex values (keys, salts) are never shown; a URL carrying userinfo
 *   is replaced by `(value not shown…)`, so a boot failure cannot put a credential in a log.
 * - **Filesystem claims are proved, not assumed**: a directory is stat'ed, a CA bundle is read,
 *   an executable is `access(X_OK)`-checked, through the injected `ConfigFs`.
 * - **Integers are plain decimal digits**: no sign, exponent, separator or fraction.
 */
import * as nodeFs from 'node:fs';
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  FALSY_WORDS,
  MAX_CLUSTER_NAME_CHARS,
  MAX_PRESET_NAME_CHARS,
  TRUTHY_WORDS,
} from './defaults.js';
import type { Reading } from './row.js';
import { INTEGER_KINDS, type IntegerKind, RULE } from './rules.js';
import type { PresetDefinition, S3Endpoint } from './types.js';

/** Longest echo of a bad value in a message, in characters; the rest is elided. */
const MAX_ECHO_CHARS = 120;

const DIGITS_RE = /^[0-9]+$/;
const HEX_RE = /^(?:[0-9a-fA-F]{2})+$/;
/** `scheme://…@` within the authority: userinfo, even an empty one. */
export const USERINFO_RE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*@/;
const PRESET_NAME_RE = new RegExp(`^[a-z0-9_-]{1,${MAX_PRESET_NAME_CHARS}}$`);
const CLUSTER_NAME_RE = new RegExp(`^[A-Za-z0-9._:@-]{1,${MAX_CLUSTER_NAME_CHARS}}$`);

/** A bad value as a message quotes it: JSON-quoted, elided past `MAX_ECHO_CHARS`. */
export function show(value: string): string {
  const cut = value.length > MAX_ECHO_CHARS ? `${value.slice(0, MAX_ECHO_CHARS)}…` : value;
  return JSON.stringify(cut);
}

/** An errno code (`ENOENT`), else the error's message. */
export function errCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : String((err as Error)?.message ?? err);
}

function expandPath(value: string): string {
  if (value === '~') return homedir();
  if (value.startsWith('~/')) return join(homedir(), value.slice(2));
  return resolve(value);
}

export function parseUrl(raw: string): URL | undefined {
  try {
    return new URL(raw);
  } catch {
    return undefined;
  }
}

/** Digits only, whole, within the kind's bounds; otherwise a problem and the fallback. */
export function integer(v: Reading, fallback: number, kind: IntegerKind): number {
  const { name, raw } = v;
  if (raw === undefined) return fallback;
  const { min, max, rule } = INTEGER_KINDS[kind];
  const n = DIGITS_RE.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    v.fail(`${name} must be ${rule}, got ${show(raw)}`);
    return fallback;
  }
  return n;
}

export function boolean(v: Reading, fallback: boolean): boolean {
  const { name, raw } = v;
  if (raw === undefined) return fallback;
  const word = raw.toLowerCase();
  if ((TRUTHY_WORDS as readonly string[]).includes(word)) return true;
  if ((FALSY_WORDS as readonly string[]).includes(word)) return false;
  v.fail(`${name} must be ${RULE.boolean}, got ${show(raw)}`);
  return fallback;
}

export function enumeration<T extends string>(v: Reading, allowed: readonly T[], fallback: T): T {
  const { name, raw } = v;
  if (raw === undefined) return fallback;
  const hit = allowed.find((a) => a === raw);
  if (hit !== undefined) return hit;
  v.fail(`${name} must be ${RULE.enum(allowed)}, got ${show(raw)}`);
  return fallback;
}

/** Why `raw` is not hex of at least `minBytes` bytes, or its bytes. Never quotes `raw`. */
function decodeHex(raw: string, minBytes: number): Buffer | string {
  if (!HEX_RE.test(raw)) {
    return /^[0-9a-fA-F]+$/.test(raw)
      ? `has an odd number of characters (${raw.length})`
      : 'has a character outside 0-9a-fA-F';
  }
  // Buffer.alloc, not Buffer.from: an unpooled buffer shares its memory with nothing else.
  const bytes = Buffer.alloc(raw.length / 2);
  bytes.write(raw, 'hex');
  return bytes.length < minBytes ? `decodes to ${bytes.length} bytes` : bytes;
}

/**
 * A comma-separated list of hex values to bytes, in order (key rotation: `AP_KEY`, `AP_SALT`).
 * A single value reads exactly as it always did. The values are secrets, so none is echoed; a
 * problem names the entry's position when there are several.
 */
export function hexList(v: Reading, minBytes: number): readonly Buffer[] | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const entries = raw.split(',').map((s) => s.trim());
  const rule = minBytes > 0 ? RULE.key : RULE.hex;
  const out: Buffer[] = [];
  let failed = false;
  for (const [i, entry] of entries.entries()) {
    const which = entries.length === 1 ? name : `${name} entry ${i + 1} of ${entries.length}`;
    const bytes = entry === '' ? 'is empty' : decodeHex(entry, minBytes);
    if (typeof bytes === 'string') {
      v.fail(`${which} must be ${rule}; the value (not shown) ${bytes}`);
      failed = true;
    } else {
      out.push(bytes);
    }
  }
  return failed ? undefined : out;
}

/**
 * `name=options` entries, comma-separated, in order. Proves the syntax a URL relies on (a name
 * `pr:NAME` can carry, unique; options a path could spell); the options' grammar is checked
 * where it lives, when the proxy is built. Every bad entry is a problem of its own.
 */
export function presetList(v: Reading): readonly PresetDefinition[] {
  const { name, raw } = v;
  if (raw === undefined) return [];
  const out: PresetDefinition[] = [];
  const seen = new Set<string>();
  for (const entry of raw.split(',').map((s) => s.trim())) {
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const preset = eq === -1 ? entry : entry.slice(0, eq).trim();
    const options = eq === -1 ? '' : entry.slice(eq + 1).trim();
    if (!PRESET_NAME_RE.test(preset)) {
      v.fail(
        `${name}: the preset name ${show(preset)} must be 1 to ${MAX_PRESET_NAME_CHARS} characters from a-z 0-9 _ -`,
      );
    } else if (seen.has(preset)) {
      v.fail(`${name}: the preset ${show(preset)} is defined twice`);
    } else if (options === '') {
      v.fail(`${name}: the preset ${show(preset)} has no options (write ${preset}=f:opus/br:96)`);
    } else if (/\s/.test(options)) {
      v.fail(
        `${name}: the preset ${show(preset)} has whitespace in its options, which no URL carries (percent-encode it)`,
      );
    } else {
      out.push({ name: preset, options });
    }
    seen.add(preset);
  }
  return out;
}

export function list(v: Reading): readonly string[] {
  if (v.raw === undefined) return [];
  return v.raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function directory(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  if (expanded === '/') {
    return v.fail(
      `${name} must not be the filesystem root: it would confine nothing (${RULE.directory})`,
    );
  }
  let why: string | undefined;
  try {
    if (!v.fs.stat(expanded).isDirectory()) why = 'not a directory';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return v.fail(`${name} must be ${RULE.directory}; got ${show(raw)} (${why})`);
  }
  return expanded;
}

/** A file that can actually be read: stat'ed as a regular file, then read. */
export function readableFile(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  let why: string | undefined;
  try {
    if (v.fs.stat(expanded).isFile()) v.fs.readFile(expanded);
    else why = 'not a regular file';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    return v.fail(`${name} must be ${RULE.readableFile}; got ${show(raw)} (${why})`);
  }
  return expanded;
}

export function executable(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const expanded = expandPath(raw);
  let why: string | undefined;
  try {
    if (v.fs.stat(expanded).isFile()) v.fs.access(expanded, nodeFs.constants.X_OK);
    else why = 'not a regular file';
  } catch (err) {
    why = errCode(err);
  }
  if (why !== undefined) {
    const hint = raw.includes('/') ? '' : `; give the full path, e.g. /usr/bin/${raw}`;
    return v.fail(`${name} must be ${RULE.executable}; got ${show(raw)} (${why})${hint}`);
  }
  return expanded;
}

export function ipLiteral(v: Reading, fallback: string): string {
  const { name, raw } = v;
  if (raw === undefined) return fallback;
  if (isIP(raw) !== 0) return raw;
  v.fail(`${name} must be ${RULE.ip}, e.g. 127.0.0.1, 0.0.0.0 or ::1; got ${show(raw)}`);
  return fallback;
}

export function origin(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined || raw === '*') return raw;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return v.fail(`${name} must be ${RULE.origin}, e.g. https://app.example.com; got ${shown}`);
  }
  const host = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  const canonical = `${url.protocol}//${host}${url.port ? `:${url.port}` : ''}`;
  if (USERINFO_RE.test(raw)) {
    return v.fail(
      `${name} must not carry userinfo (value not shown); it must be ${RULE.origin}. Did you mean "${canonical}"?`,
    );
  }
  if (raw !== canonical) {
    return v.fail(
      `${name} must be ${RULE.origin}, since a browser compares it byte for byte with the Origin it sends; got ${show(raw)}. Did you mean "${canonical}"?`,
    );
  }
  return raw;
}

export function clusterName(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined || CLUSTER_NAME_RE.test(raw)) return raw;
  return v.fail(`${name} must be ${RULE.clusterName}, got ${show(raw)}`);
}

/** A `redis://` or `rediss://` URL with a host; kept whole (ioredis needs the password). */
export function redisUrl(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'redis:' && url.protocol !== 'rediss:') ||
    !url.hostname
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return v.fail(`${name} must be ${RULE.redisUrl}; got ${shown}`);
  }
  return raw;
}

/** An `http(s)://host[:port]` origin, returned without a trailing slash. */
export function advertiseUrl(v: Reading): string | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname ||
    USERINFO_RE.test(raw) ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== '' ||
    raw.endsWith('?') ||
    raw.endsWith('#')
  ) {
    const shown = USERINFO_RE.test(raw) ? '(value not shown: it carries userinfo)' : show(raw);
    return v.fail(`${name} must be ${RULE.endpoint}, e.g. http://10.0.0.5:4000; got ${shown}`);
  }
  return `${url.protocol}//${url.host}`;
}

/** An S3-compatible endpoint: an origin and nothing more. */
export function endpoint(v: Reading): S3Endpoint | undefined {
  const { name, raw } = v;
  if (raw === undefined) return undefined;
  if (USERINFO_RE.test(raw)) {
    return v.fail(
      `${name} must not carry credentials (value not shown): S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the AP_VARIANT_S3_* group), and userinfo here would be ignored. It must be ${RULE.endpoint}`,
    );
  }
  const url = parseUrl(raw);
  if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    !url.hostname ||
    url.pathname !== '/' ||
    raw.includes('?') ||
    raw.includes('#')
  ) {
    return v.fail(`${name} must be ${RULE.endpoint}, e.g. http://minio:9000; got ${show(raw)}`);
  }
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    url: url.origin,
    protocol,
    hostname: url.hostname,
    port: url.port ? Number(url.port) : protocol === 'https' ? 443 : 80,
  };
}
