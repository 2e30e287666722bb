/**
 * Rows of the public listener and of request signing: where the proxy listens (`AP_PORT`, the
 * platform's `PORT`, `AP_BIND`) and the HMAC material every signed URL is checked with.
 *
 * ## Invariants
 * - **`AP_PORT` wins over `PORT`**; `PORT` is consulted, and checked, only when `AP_PORT` is
 *   unset, so a platform's stray `PORT` never fails a boot that names its own port. The `port`
 *   field is the effective listener port; `apPort` is `AP_PORT`'s own value.
 * - **The key and salt are never echoed** (`hex` shows neither), and are decoded into private,
 *   unpooled Buffers.
 */
import { DEFAULT_BIND, DEFAULT_PORT, MIN_KEY_BYTES } from '../defaults.js';
import type { Ledger } from '../fold.js';
import { boolean, hex, integer, ipLiteral } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

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
    field: 'key',
    section,
    default: 'unset: every signed request is a 401',
    rule: RULE.key,
    doc: 'HMAC-SHA256 key that signs URLs. Never echoed in an error.',
    read: (v) => hex(v, MIN_KEY_BYTES),
  }),
  row({
    name: 'AP_SALT',
    field: 'salt',
    section,
    default: 'unset: every signed request is a 401',
    rule: RULE.hex,
    doc: 'Bytes prepended to the path before signing. Never echoed in an error.',
    read: (v) => hex(v, 0),
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
