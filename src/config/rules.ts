/**
 * The rule texts: what a valid value of each kind is, in words. One text serves the error
 * message that refuses a value and the documentation row that describes it, so the two cannot
 * drift apart.
 *
 * ## Invariants
 * - **A bound in a text is the constant the reader checks** (`MAX_PORT`, `MAX_TIMEOUT_S`…), never
 *   a copied number.
 * - **Texts are stable**: `test/config.test.ts` and `docs/configuration.md` quote them.
 */
import {
  FALSY_WORDS,
  MAX_CLUSTER_LEASE_MS,
  MAX_CLUSTER_NAME_CHARS,
  MAX_NICE,
  MAX_PORT,
  MAX_PRESET_NAME_CHARS,
  MAX_PRESIGN_TTL_S,
  MAX_TIMEOUT_S,
  MIN_CLUSTER_LEASE_MS,
  MIN_KEY_BYTES,
  TRUTHY_WORDS,
} from './defaults.js';

export const RULE = {
  positive: 'a positive integer (digits only)',
  nonNegative: 'an integer ≥ 0 (digits only)',
  port: `an integer from 1 to ${MAX_PORT} (digits only)`,
  timeout: `an integer from 1 to ${MAX_TIMEOUT_S} (seconds, digits only)`,
  presignTtl: `an integer from 1 to ${MAX_PRESIGN_TTL_S} (seconds, digits only)`,
  boolean: `one of ${[...TRUTHY_WORDS, ...FALSY_WORDS].join(', ')} (any case)`,
  key: `hex (either case, even length) decoding to at least ${MIN_KEY_BYTES} bytes (${MIN_KEY_BYTES * 2} hex characters)`,
  hex: 'hex (either case, even length)',
  keys: `one or more comma-separated values, each hex (either case, even length) decoding to at least ${MIN_KEY_BYTES} bytes (${MIN_KEY_BYTES * 2} hex characters)`,
  salts:
    'one or more comma-separated values, each hex (either case, even length); as many as `AP_KEY`',
  list: 'comma-separated; entries trimmed; empty entries dropped',
  presets: `comma-separated \`name=options\` entries (trimmed; empty entries dropped): a unique name of 1 to ${MAX_PRESET_NAME_CHARS} characters from \`a-z 0-9 _ -\`, then \`/\`-separated option segments as a URL spells them (no whitespace; a comma as \`%2C\`), valid on their own, without \`pr\` or \`exp\``,
  directory: 'an existing directory, not `/`; `~` and relative paths are expanded',
  store: '`file:///absolute/dir` or `s3://bucket`',
  readableFile: 'a readable file',
  executable: 'an existing executable file (a path: PATH is not searched)',
  ip: 'an IPv4 or IPv6 address literal (hostnames refused)',
  origin:
    '`*` or an origin exactly as a browser sends it: `http(s)://host[:port]`, lowercase scheme and host, no default port, no trailing slash or dot, no path, query, fragment or userinfo',
  endpoint:
    '`http(s)://host[:port]`, optionally with a bare trailing `/`; no path, query, fragment or userinfo',
  redisUrl: '`redis://[user:password@]host[:port][/db]` or `rediss://…` (TLS)',
  clusterName: `1 to ${MAX_CLUSTER_NAME_CHARS} characters from \`A-Z a-z 0-9 . _ : @ -\``,
  leaseMs: `an integer from ${MIN_CLUSTER_LEASE_MS} to ${MAX_CLUSTER_LEASE_MS} (milliseconds, digits only)`,
  nice: `an integer from 0 to ${MAX_NICE} (digits only)`,
  enum: (allowed: readonly string[]) => `one of ${allowed.map((a) => `\`${a}\``).join(', ')}`,
} as const;

/** The integer kinds a reader checks: bounds and the rule text that states them. */
export const INTEGER_KINDS = {
  positive: { min: 1, max: Number.MAX_SAFE_INTEGER, rule: RULE.positive },
  nonNegative: { min: 0, max: Number.MAX_SAFE_INTEGER, rule: RULE.nonNegative },
  port: { min: 1, max: MAX_PORT, rule: RULE.port },
  timeout: { min: 1, max: MAX_TIMEOUT_S, rule: RULE.timeout },
  presignTtl: { min: 1, max: MAX_PRESIGN_TTL_S, rule: RULE.presignTtl },
  leaseMs: { min: MIN_CLUSTER_LEASE_MS, max: MAX_CLUSTER_LEASE_MS, rule: RULE.leaseMs },
  nice: { min: 0, max: MAX_NICE, rule: RULE.nice },
} as const;
export type IntegerKind = keyof typeof INTEGER_KINDS;
