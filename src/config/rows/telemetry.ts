/**
 * Rows of observability and CORS: the log level and format, the access log, the `/metrics`
 * listener's address and port, and the `Access-Control-Allow-Origin` the main listener answers
 * with.
 *
 * ## Invariants
 * - **The scrape endpoint is unsigned, so its bind is its access control**: loopback by default,
 *   and only an IP literal is accepted (a hostname could resolve anywhere).
 * - **An allowed origin is spelled exactly as a browser sends it**, since the browser compares
 *   it byte for byte; a near miss is refused with the canonical spelling suggested.
 *
 * Not here: that the metrics port differs from the listener port (`cross.ts`).
 */
import {
  DEFAULT_METRICS_BIND,
  DEFAULT_METRICS_PORT,
  LOG_FORMATS,
  LOG_LEVELS,
} from '../defaults.js';
import { boolean, enumeration, integer, ipLiteral, origin } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.observability;

export const TELEMETRY_ROWS = [
  row({
    name: 'AP_LOG_LEVEL',
    field: 'logLevel',
    section,
    default: '`info`',
    rule: RULE.enum(LOG_LEVELS),
    doc: 'Least severe level that is logged.',
    read: (v) => enumeration(v, LOG_LEVELS, 'info'),
  }),
  row({
    name: 'AP_LOG_FORMAT',
    field: 'logFormat',
    section,
    default: '`auto`',
    rule: RULE.enum(LOG_FORMATS),
    doc: '`json`: one JSON object per line (pino). `pretty`: one human-readable line per record (pino-pretty). `auto`: pretty when the CLI writes to a terminal, JSON otherwise; a proxy embedded with its default logger never looks at the terminal, so `auto` is JSON there.',
    read: (v) => enumeration(v, LOG_FORMATS, 'auto'),
  }),
  row({
    name: 'AP_ACCESS_LOG',
    field: 'accessLog',
    section,
    default: '`true`',
    rule: RULE.boolean,
    doc: 'One `info` line per public-listener request, whatever its answer (401, 404, `/info` and HITs included): method, path without its query, status, bytes sent, milliseconds and cache status (`HIT`, `MISS`, `COALESCED`).',
    read: (v) => boolean(v, true),
  }),
  row({
    name: 'AP_METRICS_BIND',
    field: 'metricsBind',
    section,
    default: `\`${DEFAULT_METRICS_BIND}\``,
    rule: RULE.ip,
    doc: 'Address of the `/metrics` listener; the endpoint is unsigned, so this is its access control.',
    read: (v) => ipLiteral(v, DEFAULT_METRICS_BIND),
  }),
  row({
    name: 'AP_METRICS_PORT',
    field: 'metricsPort',
    section,
    default: `\`${DEFAULT_METRICS_PORT}\``,
    rule: `${RULE.port}; must differ from the effective listener port (\`AP_PORT\`, else \`PORT\`)`,
    doc: 'Port of the `/metrics` listener.',
    read: (v) => integer(v, DEFAULT_METRICS_PORT, 'port'),
  }),
  row({
    name: 'AP_ALLOW_ORIGIN',
    field: 'allowOrigin',
    section,
    default: 'unset: no CORS headers, OPTIONS is a 404',
    rule: `${RULE.origin}; the error suggests the canonical spelling`,
    doc: 'Value of `Access-Control-Allow-Origin` on every main-listener response; enables OPTIONS 204.',
    read: (v) => origin(v),
  }),
] as const;
