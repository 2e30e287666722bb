/**
 * Rows of where sources may come from: the HTTPS hosts and S3 buckets a signed URL may name,
 * the directory `local://` sources are confined to, and whether an `https://` source may reach
 * private addresses.
 *
 * ## Invariants
 * - **Unset is the closed door**: no allowlist refuses every HTTPS host, no local root makes
 *   every `local://` source a 404, and private addresses are refused.
 * - **The local root is proved** to be an existing directory that is not `/` (a root of `/`
 *   would confine nothing); it is expanded (`~`, relative paths), symlinks left unresolved.
 *
 * Not here: how an allowlist entry matches (`sources/`), and the S3 connection (`s3.ts`).
 */
import { boolean, directory, list } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.sources;

export const SOURCE_ROWS = [
  row({
    name: 'AP_SOURCE_ALLOWLIST',
    field: 'sourceAllowlist',
    section,
    default: 'empty: every HTTPS host refused, every S3 bucket admitted',
    rule: RULE.list,
    doc: 'HTTPS hosts and S3 buckets a source may name. A host entry admits port 443 only; `host:port` (`[v6]:port`, `*.suffix:port`) admits that port; `*` admits every host and port.',
    read: (v) => list(v),
  }),
  row({
    name: 'AP_LOCAL_ROOT',
    field: 'localRoot',
    section,
    default: 'unset: every `local://` source is a 404',
    rule: RULE.directory,
    doc: 'Directory `local://` sources are confined to.',
    read: (v) => directory(v),
  }),
  row({
    name: 'AP_SOURCE_ALLOW_PRIVATE',
    field: 'sourceAllowPrivate',
    section,
    default: '`false`: an `https://` host resolving to such an address is a 404',
    rule: RULE.boolean,
    doc: "Let `https://` sources connect to loopback, private, link-local, CGNAT, multicast or unspecified addresses (tests, closed networks). S3 endpoints are the operator's own and are not checked.",
    read: (v) => boolean(v, false),
  }),
] as const;
