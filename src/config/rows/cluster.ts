/**
 * Rows of cluster mode: the Redis registry that turns it on, this node's id, the origin peers
 * reach it at, its affinity label, and the lease of its membership and render claims.
 *
 * ## Invariants
 * - **Unset Redis means a node alone**; the other rows are still checked.
 * - **A node id always exists**: `<hostname>:<port>` (the effective listener port, read before
 *   it in the table), made to fit the id rule, or a random id when the hostname gives nothing.
 * - **The Redis password is never echoed**: a URL with userinfo is refused without being shown.
 *
 * Not here: that cluster mode needs `AP_KEY`, `AP_SALT` and an advertised URL (`cross.ts`).
 */
import { randomInt } from 'node:crypto';
import { hostname } from 'node:os';
import { DEFAULT_CLUSTER_LEASE_MS, MAX_CLUSTER_NAME_CHARS, RANDOM_ID_RANGE } from '../defaults.js';
import { advertiseUrl, clusterName, integer, redisUrl } from '../parsers.js';
import { row, SECTIONS } from '../row.js';
import { RULE } from '../rules.js';

const section = SECTIONS.cluster;

/** `<hostname>:<port>`, made to fit the id rule; a random id when the hostname gives nothing. */
function defaultNodeId(port: number): string {
  const host = hostname()
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, MAX_CLUSTER_NAME_CHARS - 6);
  return host ? `${host}:${port}` : `node-${randomInt(RANDOM_ID_RANGE).toString(36)}`;
}

export const CLUSTER_ROWS = [
  row({
    name: 'AP_CLUSTER_REDIS_URL',
    field: 'clusterRedisUrl',
    section,
    default: 'unset: the node runs alone',
    rule: RULE.redisUrl,
    doc: 'Turns cluster mode on: membership, one render per key across nodes, and hand-off of a full queue to a peer. Redis unreachable or slow, each node acts alone. The password is never echoed. Needs `AP_KEY` and `AP_SALT`, the same on every node: forwards between nodes are authenticated with a key derived from them.',
    read: (v) => redisUrl(v),
  }),
  row({
    name: 'AP_CLUSTER_NODE_ID',
    field: 'clusterNodeId',
    section,
    default: '`<hostname>:<port>`',
    rule: `${RULE.clusterName}; unique among the nodes`,
    doc: 'This node’s name in the registry, in render claims and on forwarded requests.',
    read: (v) => clusterName(v) ?? defaultNodeId(v.get('port')),
  }),
  row({
    name: 'AP_CLUSTER_ADVERTISE_URL',
    field: 'clusterAdvertiseUrl',
    section,
    default: 'unset',
    rule: `${RULE.endpoint}; required when \`AP_CLUSTER_REDIS_URL\` is set`,
    doc: 'The origin peers use to reach this node’s public listener (forwarded renders and hand-offs).',
    read: (v) => advertiseUrl(v),
  }),
  row({
    name: 'AP_CLUSTER_NODE_LABEL',
    field: 'clusterNodeLabel',
    section,
    default: 'unset: no label',
    rule: RULE.clusterName,
    doc: 'A label announced with the node, for affinity when peers pick where to hand a request.',
    read: (v) => clusterName(v),
  }),
  row({
    name: 'AP_CLUSTER_LEASE_MS',
    field: 'clusterLeaseMs',
    section,
    default: `\`${DEFAULT_CLUSTER_LEASE_MS}\``,
    rule: RULE.leaseMs,
    doc: 'Lease of the node’s membership and of its render claims, renewed every third of it; a node that dies lets both lapse within it.',
    read: (v) => integer(v, DEFAULT_CLUSTER_LEASE_MS, 'leaseMs'),
  }),
] as const;
