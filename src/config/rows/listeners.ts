/**
 * Rows of the public listener and of request signing: where the proxy listens (`AP_PORT`, the
 * platform's `PORT`, `AP_BIND`) and the HMAC material every signed URL is checked with.
 *
 * ## Invariants
 * - **`AP_PORT` wins over `PORT`**; `PORT` is consulted, and checked, only when `AP_PORT` is
 *   unset, so a platform's stray `PORT` never fails a boot that names its own port. The `port`
 *   field is the effective listener port; `apPort` is `AP_PORT`'s own value.
 * - **The keys and salts are never echoed** (`hexList` shows none), and are decoded into
 *   private, unpooled Buffers.
 * - **Rotation is imgproxy's model**: `AP_KEY` and `AP_SALT` may each list several values,
 *   comma-separated, paired by position (`signingKeys`). The first pair signs (`Config.key`,
 *   `Config.salt`); every pair verifies (`Config.rotatedKeys` holds the others). A single value
 *   reads exactly as before. Unequal counts are refused (`cross.ts`).
 */
import { DEFAULT_BIND, DEFAULT_PORT, MIN_KEY_BYTES } from '../defaults.js';
import type { Ledger } from '../fold.js';
import { boolean, hexList, integer, ipLiteral } from '../parsers.js';
import type { Fields } from '../row.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';
import type { SigningPair } from '../types.js';

const section = SECTIONS.listen;

export const LISTENER_ROWS = [
  row({
    name: 'AP_PORT',
    field: 'apPort',
    section,
    default: `\`PORT\`, then \`${DEFAULT_PORT}\``,
    rule: RULE.port,
    doc: 'Port of the public listener.',
    read: (v) => (v.raw === undefined ? undefined : integer(v, DEFAULT_PORT, 'port')),
  }),
  row({
    name: 'PORT',
    field: 'port',
    section,
    default: 'unset',
    rule: `${RULE.port}; checked only when \`AP_PORT\` is unset`,
    doc: 'Fallback listener port, for platforms that assign one.',
    read: (v) => v.get('apPort') ?? integer(v, DEFAULT_PORT, 'port'),
  }),
  row({
    name: 'AP_BIND',
    field: 'bind',
    section,
    default: 'unset: every interface (`::`, dual-stack), as the original',
    rule: RULE.ip,
    doc: 'Address of the public listener, used by `audio-proxy serve` and `listen()`; `127.0.0.1` keeps it to this host (behind a local reverse proxy).',
    read: (v) => ipLiteral(v, '') || DEFAULT_BIND,
  }),
  row({
    name: 'AP_KEY',
    field: 'keys',
    section,
    default: 'unset: every signed request is a 401',
    rule: RULE.keys,
    doc: 'HMAC-SHA256 key that signs URLs. Several (key rotation, paired with `AP_SALT` by position): the first signs (`audio-proxy sign`, cluster hops), every pair verifies. Never echoed in an error.',
    read: (v) => hexList(v, MIN_KEY_BYTES),
  }),
  row({
    name: 'AP_SALT',
    field: 'salts',
    section,
    default: 'unset: every signed request is a 401',
    rule: RULE.salts,
    doc: 'Bytes prepended to the path before signing; one per `AP_KEY` entry, in the same order. Never echoed in an error.',
    read: (v) => hexList(v, 0),
  }),
  row({
    name: 'AP_ALLOW_INSECURE',
    field: 'allowInsecure',
    section,
    default: '`false`',
    rule: RULE.boolean,
    doc: 'Accept the literal signature `insecure` (development only; a warning is logged at boot).',
    read: (v) => boolean(v, false),
  }),
] as const;

/** Where the effective listener port came from, as the metrics-port rule names it. */
export function listenerPortSource(ld: Ledger): string {
  if (ld.isSet('apPort')) return ld.nameOf('apPort');
  if (ld.isSet('port')) return ld.nameOf('port');
  return 'the default';
}

/** The signing material `Config` carries, paired from the two lists (checked equal by `cross.ts`). */
export interface SigningKeys {
  /** The first pair's key: the one that signs. */
  readonly key: Buffer | undefined;
  readonly salt: Buffer | undefined;
  /** The other pairs, in order: they verify and never sign. */
  readonly rotatedKeys: readonly SigningPair[];
}

/**
 * Pairs `AP_KEY`'s entries with `AP_SALT`'s by position. With either unset (or unequal counts,
 * already a problem) there are no rotated pairs, and nothing verifies without both.
 */
export function signingKeys(f: Pick<Fields, 'keys' | 'salts'>): SigningKeys {
  const { keys, salts } = f;
  const key = keys?.[0];
  const salt = salts?.[0];
  if (keys === undefined || salts === undefined || keys.length !== salts.length) {
    return { key, salt, rotatedKeys: [] };
  }
  const rotatedKeys = keys.slice(1).map((k, i) => ({ key: k, salt: salts[i + 1]! }));
  return { key, salt, rotatedKeys };
}
