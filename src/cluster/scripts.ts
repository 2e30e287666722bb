/**
 * The registry's critical sections, as Redis Lua scripts. Each runs atomically on the server,
 * so choosing a worker and counting its claim, or handing a claim over, is one indivisible step
 * for every node of the cluster: nothing here needs a lock or a consensus of its own.
 *
 * ## Keys (`P` = the prefix, `{audio-proxy}:` by default: one hash tag, one slot)
 * | Key | Type | Holds |
 * |---|---|---|
 * | `P nodes` | ZSET | node id → heartbeat lease expiry (ms) |
 * | `P pool:<pool>` | ZSET | node id → the same expiry, for the nodes serving `pool` |
 * | `P node:<id>` | HASH | `url`, `capacity` (`''` = unknown), `label`, `draining` (`0`/`1`) |
 * | `P held:<id>` | ZSET | reservation id → slot expiry (ms): the held count is derived from it |
 * | `P res:<rid>` | HASH | `worker`, `pool`, `owner`, `state` (`reserved`/`adopted`/`committed`) |
 * | `P cursor:<pool>` | STRING | the pool's rotation cursor; minted by the first selection |
 * | `P wake` | channel | a worker id, published when it may have a slot again |
 *
 * ## Invariants
 * - **Scores are the truth; key TTLs are only garbage collection.** A node is alive while its
 *   ZSET score is in the future; a slot is held while its `held` score is. Every key also gets a
 *   TTL past its last score (`GRACE`), so nothing is left behind by a node that vanished.
 * - **A held count is `ZCOUNT held:<id> (now +inf`**, computed in the script that uses it: it is
 *   never stored, so it cannot drift from the reservations that make it up.
 * - **Read-only on refusal**: select and reserve write nothing unless they claim, so asking a
 *   full or empty pool leaves no trace (not even a pruned ZSET or a cursor).
 * - **`now` is the server's `TIME`**, one clock for every node; tests may pass their own.
 *
 * ## Races
 * - *Two nodes choose at once*: scripts run one at a time; the second sees the first's claim.
 * - *A forwarder releases after the peer adopted*: `release` checks the owner and does nothing.
 * - *A lease lapses before commit*: `commit` finds the score in the past, removes the claim and
 *   answers `lost`, so the slot is never counted for two renders.
 */

/** Helpers every script starts with. */
const PRELUDE = `
local function now_ms(override)
  if override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fmt(n) return string.format('%.0f', n) end
local function extend_to_last(key, now, grace)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #last == 2 then
    redis.call('PEXPIRE', key, fmt(math.max(tonumber(last[2]) - now, 0) + grace))
  end
end
local function as_map(flat)
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  return h
end
-- nil: no record; false: malformed; else the node.
local function read_node(prefix, id)
  local flat = redis.call('HGETALL', prefix .. 'node:' .. id)
  if #flat == 0 then return nil end
  local h = as_map(flat)
  local cap = h['capacity']
  if cap == nil or h['url'] == nil or (h['draining'] ~= '0' and h['draining'] ~= '1') then
    return false
  end
  local capacity = -1
  if cap ~= '' then
    if not string.match(cap, '^%d+$') then return false end
    capacity = tonumber(cap)
  end
  return { id = id, url = h['url'], capacity = capacity, label = h['label'] or '',
           draining = h['draining'] == '1' }
end
local function held_count(prefix, id, now)
  return redis.call('ZCOUNT', prefix .. 'held:' .. id, '(' .. fmt(now), '+inf')
end
local function soonest_free(prefix, id, now)
  local first = redis.call('ZRANGEBYSCORE', prefix .. 'held:' .. id, '(' .. fmt(now), '+inf',
    'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 2 then return tonumber(first[2]) end
  return nil
end
local function claim(prefix, worker, pool, rid, owner, expiry, now, grace)
  local heldkey = prefix .. 'held:' .. worker
  redis.call('ZREMRANGEBYSCORE', heldkey, '-inf', fmt(now))
  redis.call('ZADD', heldkey, fmt(expiry), rid)
  extend_to_last(heldkey, now, grace)
  local reskey = prefix .. 'res:' .. rid
  redis.call('HSET', reskey, 'worker', worker, 'pool', pool, 'owner', owner, 'state', 'reserved')
  redis.call('PEXPIRE', reskey, fmt(expiry - now + grace))
end
local function node_json(node, held)
  return { id = node.id, url = node.url, capacity = node.capacity, label = node.label,
           draining = node.draining, held = held }
end
`;

/**
 * Chooses and claims. KEYS: pool ZSET, cursor. ARGV: prefix, now override, reservation id,
 * owner, lease ms, label ('' = any), order, pool, grace ms, cursor TTL ms, excluded ids….
 * Answers JSON `{ worker, bad }` or `{ retry, bad }` (`retry`: ms until a held slot on a full
 * candidate lapses, -1 if none).
 */
export const SELECT_AND_RESERVE = `${PRELUDE}
local prefix, now = ARGV[1], now_ms(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now), '+inf')
table.sort(ids)
local excluded = {}
for i = 11, #ARGV do excluded[ARGV[i]] = true end
local eligible, bad, soonest = {}, {}, nil
for _, id in ipairs(ids) do
  if not excluded[id] then
    local node = read_node(prefix, id)
    if node == false then
      table.insert(bad, id)
    elseif node and not node.draining and node.capacity >= 0
        and (ARGV[6] == '' or node.label == ARGV[6]) then
      local held = held_count(prefix, id, now)
      if held < node.capacity then
        node.held = held
        table.insert(eligible, node)
      else
        local at = soonest_free(prefix, id, now)
        if at and (soonest == nil or at < soonest) then soonest = at end
      end
    end
  end
end
if #eligible == 0 then
  return cjson.encode({ retry = soonest and (soonest - now) or -1, bad = bad })
end
local cursor = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local n = #eligible
local start = cursor % n
local pick = eligible[start + 1]
if ARGV[7] == 'least_loaded' then
  for k = 1, n - 1 do
    local cand = eligible[((start + k) % n) + 1]
    if cand.capacity - cand.held > pick.capacity - pick.held then pick = cand end
  end
end
redis.call('SET', KEYS[2], fmt(cursor + 1), 'PX', ARGV[10])
claim(prefix, pick.id, ARGV[8], ARGV[3], ARGV[4], now + tonumber(ARGV[5]), now, tonumber(ARGV[9]))
return cjson.encode({ worker = node_json(pick, pick.held + 1), bad = bad })
`;

/**
 * Claims on one named worker. KEYS: nodes ZSET. ARGV: prefix, now override, reservation id,
 * owner, lease ms, worker, grace ms. Answers JSON `{ worker }`, `{ refused }` or `{ malformed }`.
 */
export const RESERVE = `${PRELUDE}
local prefix, now, worker = ARGV[1], now_ms(ARGV[2]), ARGV[6]
local score = redis.call('ZSCORE', KEYS[1], worker)
if not score or tonumber(score) <= now then return cjson.encode({ refused = 'gone' }) end
local node = read_node(prefix, worker)
if node == nil then return cjson.encode({ refused = 'gone' }) end
if node == false then return cjson.encode({ malformed = true }) end
if node.draining then return cjson.encode({ refused = 'draining' }) end
if node.capacity < 0 then return cjson.encode({ refused = 'unknown_capacity' }) end
local held = held_count(prefix, worker, now)
if held >= node.capacity then return cjson.encode({ refused = 'full' }) end
claim(prefix, worker, '', ARGV[3], ARGV[4], now + tonumber(ARGV[5]), now, tonumber(ARGV[7]))
return cjson.encode({ worker = node_json(node, held + 1) })
`;

/**
 * Moves a reservation to a new owner and gives it a fresh lease. ARGV: prefix, now override,
 * reservation id, new owner, self ('' = any worker), lease ms, grace ms. Answers JSON
 * `{ worker }` or `{ refused }` (`gone`, `elsewhere`, `taken`) or `{ malformed }`.
 */
export const ADOPT = `${PRELUDE}
local prefix, now, rid = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local reskey = prefix .. 'res:' .. rid
local h = as_map(redis.call('HGETALL', reskey))
local worker = h['worker']
if worker == nil then return cjson.encode({ refused = 'gone' }) end
if ARGV[5] ~= '' and worker ~= ARGV[5] then return cjson.encode({ refused = 'elsewhere' }) end
local heldkey = prefix .. 'held:' .. worker
local score = redis.call('ZSCORE', heldkey, rid)
if not score or tonumber(score) <= now then return cjson.encode({ refused = 'gone' }) end
if h['state'] ~= 'reserved' then return cjson.encode({ refused = 'taken' }) end
local expiry = now + tonumber(ARGV[6])
local grace = tonumber(ARGV[7])
redis.call('ZADD', heldkey, fmt(expiry), rid)
extend_to_last(heldkey, now, grace)
redis.call('HSET', reskey, 'owner', ARGV[4], 'state', 'adopted')
redis.call('PEXPIRE', reskey, fmt(expiry - now + grace))
local node = read_node(prefix, worker)
if node == false then return cjson.encode({ malformed = true, worker = worker }) end
if node == nil then
  node = { id = worker, url = '', capacity = -1, label = '', draining = true }
end
return cjson.encode({ worker = node_json(node, held_count(prefix, worker, now)) })
`;

/**
 * Hands a reservation to its render. ARGV: prefix, now override, reservation id, owner, hold
 * lease ms, grace ms. Answers `ok`, `lost`, `foreign` or `malformed`.
 */
export const COMMIT = `${PRELUDE}
local prefix, now, rid = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local reskey = prefix .. 'res:' .. rid
local h = as_map(redis.call('HGETALL', reskey))
if h['worker'] == nil then
  if next(h) == nil then return 'lost' end
  return 'malformed'
end
if h['owner'] ~= ARGV[4] then return 'foreign' end
local heldkey = prefix .. 'held:' .. h['worker']
local score = redis.call('ZSCORE', heldkey, rid)
if not score or tonumber(score) <= now then
  redis.call('ZREM', heldkey, rid)
  redis.call('DEL', reskey)
  return 'lost'
end
local expiry = now + tonumber(ARGV[5])
local grace = tonumber(ARGV[6])
redis.call('ZADD', heldkey, fmt(expiry), rid)
extend_to_last(heldkey, now, grace)
redis.call('HSET', reskey, 'state', 'committed')
redis.call('PEXPIRE', reskey, fmt(expiry - now + grace))
return 'ok'
`;

/**
 * Renews committed holds. ARGV: prefix, now override, owner, hold lease ms, grace ms, then
 * (reservation id, worker) pairs. A hold found lapsed is re-asserted (its render is still
 * running, so counting it is the truth) and reported. Answers JSON `{ lapsed, foreign }`.
 */
export const RENEW = `${PRELUDE}
local prefix, now, owner = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local expiry = now + tonumber(ARGV[4])
local grace = tonumber(ARGV[5])
local lapsed, foreign = {}, {}
for i = 6, #ARGV - 1, 2 do
  local rid, worker = ARGV[i], ARGV[i + 1]
  local reskey = prefix .. 'res:' .. rid
  local current = redis.call('HGET', reskey, 'owner')
  if current and current ~= owner then
    table.insert(foreign, rid)
  else
    local heldkey = prefix .. 'held:' .. worker
    local score = redis.call('ZSCORE', heldkey, rid)
    if not score or tonumber(score) <= now then table.insert(lapsed, rid) end
    redis.call('ZREMRANGEBYSCORE', heldkey, '-inf', fmt(now))
    redis.call('ZADD', heldkey, fmt(expiry), rid)
    extend_to_last(heldkey, now, grace)
    redis.call('HSET', reskey, 'worker', worker, 'owner', owner, 'state', 'committed')
    redis.call('PEXPIRE', reskey, fmt(expiry - now + grace))
  end
end
return cjson.encode({ lapsed = lapsed, foreign = foreign })
`;

/**
 * Frees a slot if this owner still holds it. ARGV: prefix, reservation id, owner, worker.
 * Answers `released`, `gone` (already lapsed) or `foreign` (adopted by a peer: untouched).
 */
export const RELEASE = `
local prefix, rid, owner = ARGV[1], ARGV[2], ARGV[3]
local reskey = prefix .. 'res:' .. rid
local current = redis.call('HMGET', reskey, 'owner', 'worker')
if current[1] and current[1] ~= owner then return 'foreign' end
local worker = current[2] or ARGV[4]
local removed = redis.call('ZREM', prefix .. 'held:' .. worker, rid)
redis.call('DEL', reskey)
if removed == 1 then
  redis.call('PUBLISH', prefix .. 'wake', worker)
  return 'released'
end
return 'gone'
`;

/**
 * Registers or renews a node. KEYS: nodes ZSET. ARGV: prefix, now override, id, url, capacity
 * ('' = unknown), label, draining ('0'/'1'), lease ms, grace ms, pools…. Publishes a wake-up
 * when the node may offer slots it did not before. Answers 1 if it was alive already, else 0.
 */
export const HEARTBEAT = `${PRELUDE}
local prefix, now, id = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local expiry = now + tonumber(ARGV[8])
local grace = tonumber(ARGV[9])
local before = redis.call('ZSCORE', KEYS[1], id)
local alive = before and tonumber(before) > now
local nodekey = prefix .. 'node:' .. id
local was = redis.call('HMGET', nodekey, 'capacity', 'draining')
redis.call('HSET', nodekey, 'url', ARGV[4], 'capacity', ARGV[5], 'label', ARGV[6],
  'draining', ARGV[7])
redis.call('PEXPIRE', nodekey, fmt(expiry - now + grace))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(now))
redis.call('ZADD', KEYS[1], fmt(expiry), id)
extend_to_last(KEYS[1], now, grace)
for i = 10, #ARGV do
  local poolkey = prefix .. 'pool:' .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', poolkey, '-inf', fmt(now))
  redis.call('ZADD', poolkey, fmt(expiry), id)
  extend_to_last(poolkey, now, grace)
end
local changed = (not alive) or was[1] ~= ARGV[5] or was[2] ~= ARGV[7]
if changed and ARGV[7] == '0' and ARGV[5] ~= '' then
  redis.call('PUBLISH', prefix .. 'wake', id)
end
if alive then return 1 end
return 0
`;

/** Removes a node at once. KEYS: nodes ZSET. ARGV: prefix, id, pools…. */
export const LEAVE = `
local prefix, id = ARGV[1], ARGV[2]
redis.call('ZREM', KEYS[1], id)
for i = 3, #ARGV do redis.call('ZREM', prefix .. 'pool:' .. ARGV[i], id) end
redis.call('DEL', prefix .. 'node:' .. id)
return 1
`;

/**
 * Every live node with its held count. KEYS: nodes ZSET. ARGV: prefix, now override. Answers
 * JSON `{ nodes, bad }`. Read-only.
 */
export const NODES = `${PRELUDE}
local prefix, now = ARGV[1], now_ms(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now), '+inf')
table.sort(ids)
local nodes, bad = {}, {}
for _, id in ipairs(ids) do
  local node = read_node(prefix, id)
  if node == false then table.insert(bad, id)
  elseif node then table.insert(nodes, node_json(node, held_count(prefix, id, now))) end
end
return cjson.encode({ nodes = nodes, bad = bad })
`;

/** Script name → (Lua, number of KEYS), for `defineCommand`. */
export const SCRIPTS = {
  apSelectAndReserve: { lua: SELECT_AND_RESERVE, numberOfKeys: 2 },
  apReserve: { lua: RESERVE, numberOfKeys: 1 },
  apAdopt: { lua: ADOPT, numberOfKeys: 0 },
  apCommit: { lua: COMMIT, numberOfKeys: 0 },
  apRenew: { lua: RENEW, numberOfKeys: 0 },
  apRelease: { lua: RELEASE, numberOfKeys: 0 },
  apHeartbeat: { lua: HEARTBEAT, numberOfKeys: 1 },
  apLeave: { lua: LEAVE, numberOfKeys: 1 },
  apNodes: { lua: NODES, numberOfKeys: 1 },
} as const;

export type ScriptName = keyof typeof SCRIPTS;

/** Key names, one place. */
export const keys = (prefix: string) => ({
  nodes: `${prefix}nodes`,
  pool: (pool: string) => `${prefix}pool:${pool}`,
  cursor: (pool: string) => `${prefix}cursor:${pool}`,
  node: (id: string) => `${prefix}node:${id}`,
  held: (id: string) => `${prefix}held:${id}`,
  reservation: (id: string) => `${prefix}res:${id}`,
  wake: `${prefix}wake`,
});

/** The default prefix: one Redis Cluster hash tag, so every key of a registry shares a slot. */
export const DEFAULT_PREFIX = '{audio-proxy}:';
