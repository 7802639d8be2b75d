-- state.lua: a scope's state, how it is stored, and the rules that change
-- it. Every scope script is eval.lua, globals.lua, constants.lua, this
-- file, rules.lua and the script's own file, run as one chunk; the function
-- library holds these files and every script's own (scripts.go).
--
-- The rules are a transcription of capacity/memscope.go, function by
-- function under the same names: read that file first. The differential
-- test (TestMatchesMemoryStore) drives both through the same random
-- operations and requires the same answers. What only Redis needs (loading
-- and saving, key lifetimes, release messages) is marked "Redis only".
--
-- Times are integer microseconds of the store's clock (Redis TIME). A
-- dimension d is 1-based here (capacity.Dimension + 1); a class c is
-- capacity.Class (0-based).
--
-- KEYS: K.EPOCH .. K.KEY_CAPS (constants.lua, keys.go).
-- ARGV: 1 now ('' = Redis TIME), 2 store instance id, 3 release channel,
--       4 day boundary, 5 the boundary after it ('' = unknown); the
--       script's own arguments follow from 6.

-- A function library is loaded with no globals but redis, and that
-- without redis.call: what the files' top levels run uses none of them
-- (globals.lua), and call looks redis.call up at each call. The math
-- functions used everywhere are locals set at each call (begin).
local function call(...) return redis.call(...) end
local floor, ceil, min, max

-- A call's state. The library of functions (scripts.go) defines these
-- files' functions once, when it is loaded, and each call begins with
-- begin, which sets everything below anew; a file that keeps more state
-- for a call adds its reset to resets. Nothing of one call is seen by
-- the next.

-- KEYS and ARGV are the call's keys and arguments.
local KEYS, ARGV
-- NOW is the store's clock: ARGV[1], or Redis TIME.
local NOW
local INSTANCE, CHANNEL
local BOUND1, BOUND2
-- S is the scope's state; EPOCH and CB the credential's epoch token and
-- block ({reason, until, detail, half open, probing}, msgpack).
local S, EPOCH, CB
local LOADED -- the state existed before this call
-- index holds what keeps each decision's cost bounded, stored beside the
-- state: the recent grants (index.recent*), the tickets' order
-- (index.order*), the lease marks (index.marks*) and the lease expiries
-- (index.expiry*). A state an older version of the scripts saved last has
-- none of them kept up to date, so all are rebuilt once (index.rebuild)
-- before this version decides (Redis only).
-- index.touched lists the ranks whose order set this call added to: they
-- get the ticket keys' TTL when it saves.
local index = {}
-- stored holds how the state is stored (Redis only: stored.pack and the
-- functions after it). stored.loaded is what the state hash held when the
-- call loaded it: the packed state, and the text fields written_by and
-- format.
local stored = {}
-- Reported to Go in every reply's header.
local RESET, FREED, PUBLISHED
-- DUE lists the calls whose tickets came due early (retime), announced when
-- the call saves (Redis only).
local DUE
-- READ_ONLY makes every write of the call a no-op (write): a snapshot
-- advances the state in the script's memory only, so reading a scope
-- never changes it (and runs as FCALL_RO or EVALSHA_RO).
local READ_ONLY

-- resets are the functions that set each file's state for a new call.
local resets = {}

-- begin starts a call of keys and args: every scope script's entry
-- (entries.<name>, in its own file) calls it first.
local function begin(keys, args)
  useGlobals()
  KEYS, ARGV = keys, args
  floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
  if ARGV[1] ~= '' then
    NOW = tonumber(ARGV[1])
  else
    local t = call('TIME')
    NOW = t[1] * 1000000 + t[2]
  end
  INSTANCE, CHANNEL = ARGV[2], ARGV[3]
  BOUND1, BOUND2 = tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0
  S, EPOCH, CB, LOADED = nil, nil, nil, false
  index.touched = {}
  stored.loaded = {}
  RESET, FREED, PUBLISHED = 0, 0, false
  DUE = {}
  READ_ONLY = false
  for _, reset in ipairs(resets) do reset() end
end

-- write runs a Redis command that changes data, unless READ_ONLY.
local function write(...)
  if READ_ONLY then return nil end
  return call(...)
end

-- fmt writes a number so that tonumber reads back the same double, in
-- the fewest of 15 or 17 significant digits (0.95, not 0.94999999999999996).
local function fmt(x)
  if x % 1 == 0 and x > -1e15 and x < 1e15 then return string.format('%d', x) end -- the same digits, sooner
  local s = string.format('%.15g', x)
  if tonumber(s) == x then return s end
  return string.format('%.17g', x)
end

-- readLayout reads a message of layout (LAYOUTS, wire.go) from values (a
-- list: ARGV, or a signature's fields) at position i: each field by its
-- name, a field one value wide as that value, a wider one as a list.
local function readLayout(layout, values, i)
  local m = {}
  for _, f in ipairs(layout) do
    local name, width, kind = f[1], f[2], f[3]
    if width == 1 and kind == 'string' then
      m[name] = values[i]
    elseif width == 1 then
      m[name] = tonumber(values[i])
    else
      local v = {}
      for j = 1, width do v[j] = tonumber(values[i + j - 1]) end
      m[name] = v
    end
    i = i + width
  end
  return m
end

-- Records ---------------------------------------------------------------

-- A lease or a ticket is a record: a table whose fields a schema lists
-- (LEASE_FIELDS, TICKET_FIELDS: {name, kind}, kind 'number' or
-- 'dimension', a number per dimension). Stored, it is one line of
-- name=value pairs, a per-dimension field as name.requests and so on;
-- zeros are left out. A name the schema does not list is ignored and one
-- it lists but the line lacks reads as 0: the format only grows.

-- newRecord returns a record of schema with every field zero.
local function newRecord(schema)
  local r = {}
  for _, f in ipairs(schema) do
    if f[2] == 'dimension' then
      r[f[1]] = {}
      for d = 1, ND do r[f[1]][d] = 0 end
    elseif f[2] == 'string' then
      r[f[1]] = ''
    else
      r[f[1]] = 0
    end
  end
  return r
end

-- fieldsByName maps each stored name of a record schema to {field,
-- dimension}, made once per script.
local fieldsByName = {}
local function storedNames(schema)
  local names = fieldsByName[schema]
  if not names then
    names = {}
    for _, f in ipairs(schema) do
      if f[2] == 'dimension' then
        for d = 1, ND do names[f[1] .. '.' .. DIMENSIONS[d]] = {f[1], d} end
      else
        names[f[1]] = {f[1], nil, f[2] == 'string'}
      end
    end
    fieldsByName[schema] = names
  end
  return names
end

-- encodeRecord writes a lease or a ticket as one line of name=value pairs.
local function encodeRecord(r, schema)
  local out = {}
  for _, f in ipairs(schema) do
    local name, v = f[1], r[f[1]]
    if f[2] == 'dimension' then
      for d = 1, ND do
        if v[d] ~= 0 then out[#out + 1] = name .. '.' .. DIMENSIONS[d] .. '=' .. fmt(v[d]) end
      end
    elseif f[2] == 'string' then
      if v ~= '' then out[#out + 1] = name .. '=' .. v end
    elseif v ~= 0 then
      out[#out + 1] = name .. '=' .. fmt(v)
    end
  end
  return table.concat(out, ' ')
end

-- decodeRecord reads a line that encodeRecord wrote.
local function decodeRecord(line, schema)
  local r, names = newRecord(schema), storedNames(schema)
  for name, v in string.gmatch(line, '(%S+)=(%S+)') do
    local f = names[name]
    if f and f[2] then
      r[f[1]][f[2]] = tonumber(v) or 0
    elseif f and f[3] then
      r[f[1]] = v
    elseif f then
      r[f[1]] = tonumber(v) or 0
    end
  end
  return r
end

-- The state ---------------------------------------------------------------

-- STATE_SCHEMA is the scope's state: a msgpack map of these names, in the
-- field 'packed' of the state hash (scripts 6.0; packState). A field's kind
-- is 'string', 'number', 'bucket' (a number per per-minute dimension),
-- 'dimension' (a number per dimension), 'class_bucket' (a bucket list per
-- class), 'rank' (a number per rank) or 'rank_bucket' (a bucket list per
-- rank). A field the state lacks reads as '' or 0 (stored.defaults), and a
-- field this version does not know is kept as it is: the format only
-- grows. Add fields at the end; never rename or reuse one.
--
-- Scripts before 6.0 stored each field but those marked packed in a hash
-- field of its own, as text (STATE_FORMAT then was TEXT_FORMAT): a list
-- is its numbers in dimension (and class) order, level = "50 500 0 1500"
-- (decodeField, encodeField). This version reads that text when such a
-- version saved the state last, and keeps it up to date for a while
-- (save), so that workers of both share one budget.
local STATE_SCHEMA = {
  {'format', 'number'}, -- STATE_FORMAT
  {'epoch', 'string'}, -- the credential epoch this state belongs to
  {'limits', 'string'}, -- signature of the installed limits ('': none yet)
  {'limit', 'dimension'}, -- the configured limits
  {'margin', 'number'}, {'burst', 'number'}, {'token_burst', 'number'},
  {'standard_floor', 'number'}, {'bulk_floor', 'number'},
  {'aging_after', 'number'}, -- µs (0: no aging)
  {'lowered', 'bucket'}, -- provider-reported limits below the configured ones
  {'lowered_until', 'number'}, -- Redis only: when a lowering is forgotten
  {'level', 'bucket'}, -- what a new call may take (memScope.level)
  {'booked', 'bucket'}, -- held by tickets (memScope.booked)
  {'booked_by', 'class_bucket'}, -- booked split by the tickets' class
  {'last', 'number'}, -- when the levels were last refilled
  {'day_used', 'dimension'}, -- used today (requests_per_day, tokens_per_day)
  {'day_end', 'number'}, -- end of the day window (0: pending)
  {'granted', 'dimension'}, -- the grant history (Mark)
  {'leases', 'number'}, -- live leases
  {'tickets', 'number'}, -- booked tickets
  {'next_lease_expiry', 'number'}, -- lower bound (0: none)
  {'next_ticket_expiry', 'number'}, -- exact (0: none)
  {'last_expiry', 'number'}, -- upper bound of every lease and ticket expiry
  {'lease_key_expiry', 'number'}, -- Redis only: the lease key's expiry
  {'ticket_key_expiry', 'number'}, -- Redis only: the ticket keys' expiry
  {'notify_until', 'number'}, -- Redis only: releases are announced until then (wake)
  {'block_reason', 'number'}, {'block_until', 'number'}, {'block_detail', 'string'},
  {'block_half_open', 'number'}, {'block_probing', 'number'},
  {'written_by', 'string'}, -- SCRIPT_VERSION of the script that last saved it (3.1)
  {'ticket_grace', 'number'}, -- µs a due ticket waits for its call (Options.TicketGrace; 3.3)
  {'cut', 'number'}, -- the rate lost to 429s (memScope.cut; 3.3)
  {'booked_rank', 'rank_bucket'}, -- booked split by the tickets' rank (memScope.bookedBy; 4.0)
  {'virtual', 'rank'}, -- each rank's virtual time (fairState.virtual; 4.0)
  {'last_finish', 'rank'}, -- the latest finish booked per rank (fairState.lastFinish; 4.0)
  {'flows', 'number'}, -- Redis only: fields of the flows hash (4.0)
  {'keys_until', 'number'}, -- Redis only: when every key cap is at rest (4.0)
  {'past', 'string'}, -- each rank's virtual time as it grew: "rank µs virtual ..." (fairState.past; 4.0)
  {'last_served', 'rank'}, -- when each rank last served a call (fairState.lastServed; 4.0)
  {'keyed', 'number'}, -- 1 once a keyed call came since the scope was at rest (fairState.keyed; 4.0)
  {'fair_start_until', 'number'}, -- end of the first keyed calls' gathering (fairState.fairStartUntil; 4.0)
  {'fair_start_from', 'number'}, -- its start (fairState.fairStartFrom; 4.0)
  {'lowered_mark', 'bucket'}, -- the grant mark of the report that lowered each limit (memScope.loweredMark; 4.7)
  {'recent_held', 'dimension'}, -- what the live leases of the recent list hold (recentGrants.held; 5.0)
  {'recent_cutoff', 'number'}, -- grants before it left the recent list (recentGrants.cutoff; 5.0)
  {'retime_pending', 'number'}, -- 1: a release, a refund or a booking ahead moved only the first tickets (memScope.retimePending; 5.3)
  {'booked_flow', 'string'}, -- the flow of every booked ticket, unless flows_mixed (memScope.bookedFlow; 5.4)
  {'flows_mixed', 'number'}, -- 1: tickets of several flows booked since none was (memScope.flowsMixed; 5.4)
  {'window_current', 'number'}, -- 1: the first tickets were retimed and none left since (memScope.windowCurrent; 5.4)
  {'booked_floor', 'number'}, -- the highest floor of the tickets booked since none was (memScope.bookedFloor; 5.4)
  {'text_until', 'number', packed = true}, -- Redis only: the text state is kept up to date until then (6.0)
  {'recent_last', 'number', packed = true}, -- Redis only: the grant time of the latest group of recent grants (6.1)
  {'recent_last_held', 'dimension', packed = true}, -- Redis only: what its live leases hold (6.1)
  {'recent_prev', 'number', packed = true}, -- Redis only: the grant time of the group before it (6.1)
  {'recent_prev_held', 'dimension', packed = true}, -- Redis only: what its live leases hold (6.1)
  {'grants', 'number', packed = true}, -- the leases granted: Mark.Seq of the latest (memScope.grants; 6.2)
  {'live_from', 'number', packed = true}, -- Redis only: at or below the lowest grant number live (index.liveBefore; 6.2)
  {'live_tree', 'number', packed = true}, -- Redis only: 1 while the live sums are a tree (index.liveAdd; 6.2)
  {'flows_cursor', 'string', packed = true}, -- Redis only: where forgetting idle flows looks next (HSCAN; fair.forgetIdleFlows; 6.2)
  {'lapsing', 'number', packed = true}, -- Redis only: 1 while KEYS[K.LAPSING] holds links of a reclaim in several scripts (fair.unplaceAll; 6.3)
}

-- STATE_KINDS is each state field's kind, by name; TEXT_KINDS the same
-- for the fields the text state holds.
local STATE_KINDS, TEXT_KINDS = {}, {}
for i = 1, #STATE_SCHEMA do
  local f = STATE_SCHEMA[i]
  STATE_KINDS[f[1]] = f[2]
  if not f.packed then TEXT_KINDS[f[1]] = f[2] end
end

-- zeros returns a list of n zeros.
local function zeros(n)
  local v = {}
  for d = 1, n do v[d] = 0 end
  return v
end

-- newField returns a state field of kind with its zero value.
local function newField(kind)
  if kind == 'string' then return '' end
  if kind == 'number' then return 0 end
  if kind == 'bucket' then return zeros(NB) end
  if kind == 'dimension' then return zeros(ND) end
  local v = {}
  if kind == 'rank' then
    for r = 0, NRANKS - 1 do v[r] = 0 end
    return v
  end
  local n = NCLASSES
  if kind == 'rank_bucket' then n = NRANKS end
  for c = 0, n - 1 do v[c] = zeros(NB) end
  return v
end

-- newState returns a state with every field at its zero value.
local function newState()
  local st = {}
  for _, f in ipairs(STATE_SCHEMA) do st[f[1]] = newField(f[2]) end
  return st
end

-- decodeField reads a text state field of kind.
local function decodeField(kind, s)
  if kind == 'string' then return s end
  if kind == 'number' then return tonumber(s) or 0 end
  local numbers = {}
  for x in string.gmatch(s, '%S+') do numbers[#numbers + 1] = tonumber(x) or 0 end
  local v = newField(kind)
  if kind == 'class_bucket' or kind == 'rank_bucket' then
    for c = 0, #v do
      for d = 1, NB do v[c][d] = numbers[c * NB + d] or 0 end
    end
  elseif kind == 'rank' then
    for r = 0, NRANKS - 1 do v[r] = numbers[r + 1] or 0 end
  else
    for d = 1, #v do v[d] = numbers[d] or 0 end
  end
  return v
end

-- encodeField writes a state field of kind as text.
local function encodeField(kind, v)
  if kind == 'string' then return v end
  if kind == 'number' then return fmt(v) end
  local out = {}
  if kind == 'class_bucket' or kind == 'rank_bucket' then
    for c = 0, #v do
      for d = 1, NB do out[#out + 1] = fmt(v[c][d]) end
    end
  elseif kind == 'rank' then
    for r = 0, NRANKS - 1 do out[#out + 1] = fmt(v[r]) end
  else
    for d = 1, #v do out[#out + 1] = fmt(v[d]) end
  end
  return table.concat(out, ' ')
end

-- copyField returns a copy of a state field's value.
local function copyField(v)
  if type(v) ~= 'table' then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = copyField(x) end
  return c
end

-- stored.defaults gives a state the zero value of each field it lacks, as
-- it is first read (a state an earlier version saved lacks the fields
-- added since).
stored.defaults = {__index = function(st, name)
  local kind = STATE_KINDS[name]
  if not kind then return nil end
  local v = newField(kind)
  rawset(st, name, v)
  return v
end}

function stored.withDefaults(st) return setmetatable(st, stored.defaults) end

-- stored.derived are the fields recompute derives at each load: never
-- stored.
stored.derived = {capacity = true, rate = true, configured = true}

-- stored.pack returns the state as stored: every field but the derived
-- ones, those this version does not know included, and but a number that
-- is 0 or a string that is '', which reads back as such (stored.defaults):
-- a quiet scope's state has many.
function stored.pack()
  local out = {}
  for name, v in pairs(S) do
    if not stored.derived[name] and v ~= 0 and v ~= '' then out[name] = v end
  end
  return cmsgpack.pack(out)
end

-- stored.textWriter reports whether version v of the scripts stores the
-- state as text only: every version before 6.0 (nil: one that recorded
-- none).
function stored.textWriter(v)
  local major = tonumber(string.match(v or '', '^(%d+)%.'))
  return not major or major < 6
end

function stored.unknownFormat() error({err = 'tollgate: unknown scope state format'}) end

-- stored.readText reads a state that a version before 6.0 saved last (Redis
-- only): each field from its text, and the fields only the packed form
-- holds from the packed state, if one was saved. The text is kept up to
-- date from now on for TEXT_STATE_WINDOW, in this scope and in every new
-- one of the credential (save; keyTextUntil).
function stored.readText()
  if stored.loaded.format ~= TEXT_FORMAT then stored.unknownFormat() end
  local st = {}
  if stored.loaded.packed then
    for name, v in pairs(cmsgpack.unpack(stored.loaded.packed)) do
      if not TEXT_KINDS[name] then st[name] = v end
    end
  end
  local all = call('HGETALL', KEYS[K.STATE])
  for i = 1, #all, 2 do
    local kind = TEXT_KINDS[all[i]]
    if kind then st[all[i]] = decodeField(kind, all[i + 1]) end
  end
  st.format, st.text_until = STATE_FORMAT, NOW + TEXT_STATE_WINDOW
  write('SET', KEYS[K.TEXT_UNTIL], fmt(st.text_until), 'PX', fmt(TEXT_STATE_WINDOW / 1000))
  return stored.withDefaults(st)
end

-- budgets derives each dimension's capacity and refill rate from the
-- limits (Limits.Budgets); capacity 0 is unlimited. lim is the limit of
-- each dimension.
local function budgets(lim)
  local m, burst = S.margin, S.burst
  if m == 0 then m = DEFAULT_MARGIN end
  if burst == 0 then burst = DEFAULT_BURST end
  local capacity, rate = {}, {}
  for d = 1, ND do
    capacity[d], rate[d] = 0, 0
    if lim[d] > 0 then
      if d <= NB then
        rate[d] = lim[d] * m / 60
        capacity[d] = max(1, floor(rate[d] * burst))
        if d ~= 1 and S.token_burst > capacity[d] then capacity[d] = S.token_burst end
      elseif d < IN_FLIGHT then
        capacity[d] = max(1, floor(lim[d] * m))
      else
        capacity[d] = lim[d]
      end
    end
  end
  return capacity, rate
end

-- recompute derives the effective budgets from the limits and what the
-- provider reported, and the configured capacities (S.configured).
-- Capacities and rates are derived, never stored.
local function recompute()
  local lim = {}
  for d = 1, ND do
    lim[d] = S.limit[d]
    local lo = d <= NB and S.lowered[d] or 0
    if lo > 0 and (lim[d] == 0 or lo < lim[d]) then lim[d] = lo end
  end
  S.capacity, S.rate = budgets(lim)
  S.configured = budgets(S.limit)
end

-- load reads the credential's epoch and block and the scope's state (Redis
-- only). State of another epoch outlived a data loss and is dropped. A
-- missing state is created, unless create is false: then load returns
-- false.
local function load(create)
  local v = call('MGET', KEYS[K.EPOCH], KEYS[K.CRED_BLOCK], KEYS[K.TEXT_UNTIL])
  EPOCH = v[1]
  if v[2] then CB = cmsgpack.unpack(v[2]) end
  if not EPOCH and READ_ONLY then return false end
  if not EPOCH then
    local t = call('TIME')
    EPOCH = t[1] .. string.format('%06d', t[2])
    write('SET', KEYS[K.EPOCH], EPOCH)
    RESET = 1
  end
  local h = call('HMGET', KEYS[K.STATE], 'packed', 'written_by', 'format')
  local got = {packed = h[1] or nil, writer = h[2] or nil, format = tonumber(h[3])}
  stored.loaded = got
  if got.packed or got.writer or got.format then
    if got.format ~= STATE_FORMAT and got.format ~= TEXT_FORMAT then stored.unknownFormat() end
    if got.packed and not stored.textWriter(got.writer) then
      local st = cmsgpack.unpack(got.packed)
      if type(st) ~= 'table' then stored.unknownFormat() end
      S = stored.withDefaults(st)
    else
      S = stored.readText()
    end
    if S.format ~= STATE_FORMAT then stored.unknownFormat() end
    if S.epoch ~= EPOCH then
      S, stored.loaded, RESET = nil, {}, 1
      write('DEL', KEYS[K.STATE])
    end
  end
  -- While the credential is marked (a 6.0 worker found a state a version
  -- before 6.0 saved, or KeepTextState), each of its scopes keeps its text.
  local mark = tonumber(v[3]) or 0
  if S then
    LOADED = true
    S.text_until = max(S.text_until, mark)
    recompute()
    if not index.keptBy[S.written_by] then index.rebuild() end
    if S.lapsing == 1 and stored.loaded.writer ~= SCRIPT_VERSION then
      -- Another version saved in the middle of a reclaim in several
      -- scripts (fair.unplaceAll), and reclaims every lapsed ticket at
      -- once: the links kept are stale.
      write('DEL', KEYS[K.LAPSING])
      S.lapsing = 0
    end
    return true
  end
  if not create then return false end
  write('DEL', KEYS[K.LEASES], KEYS[K.TICKETS], KEYS[K.TICKET_EXPIRIES], KEYS[K.TICKET_TIMES], KEYS[K.FLOWS], KEYS[K.KEY_CAPS],
    KEYS[K.RECENT], KEYS[K.RECENT_HELD], KEYS[K.LEASE_MARKS], KEYS[K.LEASE_EXPIRIES], KEYS[K.LIVE_SUMS], KEYS[K.LAPSING],
    unpack(KEYS, K.ORDER, K.ORDER + NRANKS - 1))
  S = stored.withDefaults(newState())
  S.format, S.epoch, S.text_until = STATE_FORMAT, EPOCH, mark
  recompute()
  return true
end

-- wake tells every worker's waiters that capacity may have come back
-- (Redis only: a release message). A waiter listens only after a denial
-- that a release may end, and only until the RetryAt it was given, so
-- nothing is published after the latest such RetryAt (deny).
local function wake()
  if not PUBLISHED and NOW <= S.notify_until then
    PUBLISHED = true
    write('SPUBLISH', CHANNEL, INSTANCE)
  end
end

-- Leases ------------------------------------------------------------------

-- Leases live in a hash (call -> encoded lease), read and written through a
-- cache: LEASES[call] is the lease, or false for none; DIRTY lists the
-- calls to write when the script saves.
local LEASES, DIRTY
-- Whether this call gave the lease or ticket keys their first entry
-- (they then need a TTL: see save).
local NEW_LEASE_KEY, NEW_TICKET_KEY
resets[#resets + 1] = function()
  LEASES, DIRTY = {}, {}
  NEW_LEASE_KEY, NEW_TICKET_KEY = false, false
end

local function getLease(c)
  local le = LEASES[c]
  if le == nil then
    local v = S.leases > 0 and call('HGET', KEYS[K.LEASES], c)
    le = v and decodeRecord(v, LEASE_FIELDS) or false
    LEASES[c] = le
  end
  return le or nil
end

local function putLease(c, le)
  LEASES[c], DIRTY[c] = le, true
end

-- dropLease removes c's lease: its slot comes back.
local function dropLease(c)
  local le = getLease(c)
  if le then
    index.recentEnded(le)
    index.liveAdd(le, -1)
    index.expiryDrop(c)
    LEASES[c], DIRTY[c] = false, true
    S.leases = S.leases - 1
  end
end

-- flushLeases writes the leases changed since the last flush (Redis only).
local function flushLeases()
  local set, del = {}, {}
  for c in pairs(DIRTY) do
    if LEASES[c] then
      set[#set + 1] = c
      set[#set + 1] = encodeRecord(LEASES[c], LEASE_FIELDS)
    else
      del[#del + 1] = c
    end
  end
  DIRTY = {}
  for i = 1, #set, 1000 do write('HSET', KEYS[K.LEASES], unpack(set, i, min(i + 999, #set))) end
  for i = 1, #del, 1000 do write('HDEL', KEYS[K.LEASES], unpack(del, i, min(i + 999, #del))) end
end

-- allLeases returns every lease by call: the stored ones, as this script
-- changed them (the cache, not yet written).
local function allLeases()
  local out = {}
  local all = S.leases > 0 and call('HGETALL', KEYS[K.LEASES]) or {}
  for i = 1, #all, 2 do
    local c = all[i]
    if LEASES[c] == nil then out[c] = decodeRecord(all[i + 1], LEASE_FIELDS) end
  end
  for c, le in pairs(LEASES) do
    if le then out[c] = le end
  end
  return out
end

-- The recent grants are the leases granted within REORDER_WINDOW, in
-- groups by the time they were granted (a script grants its whole batch at
-- one time): the list KEYS[K.RECENT] holds each group's time, oldest first.
-- What the live leases of the latest two groups hold is in the state
-- (S.recent_last and S.recent_prev, with _held); what those of each
-- earlier group hold, if anything, is in the hash KEYS[K.RECENT_HELD], a
-- number per dimension packed with cmsgpack, by time. S.recent_held is what every
-- group holds: Mark.InFlight without walking the leases. A grant drops the
-- groups that left the window, one entry per group, not per lease, so a
-- burst granted at once leaves the window in one step
-- (capacity/recentgrants.go, whose method names these keep after
-- index.recent, keeps the same sum over a queue of leases; until scripts
-- 6.1 the list held a line per lease, and the grant that dropped a burst of
-- a thousand read a thousand leases). A scope whose calls overlap at most
-- two at a time writes no group to the hash.

-- index.groups caches the earlier groups this call read or changed: time
-- (as fmt writes it) -> what its live leases hold, or false for none;
-- index.groupsDirty lists those to write, and index.groupsNew says one
-- came to the hash (index.recentFlush). (Fields, not locals: the library's
-- main function holds at most 200 locals.)
resets[#resets + 1] = function() index.groups, index.groupsDirty, index.groupsNew = {}, {}, false end
-- index.retimed says this call retimed the first tickets since its last
-- reserve or observe (forward.defer in ops.lua).
resets[#resets + 1] = function() index.retimed = false end

-- index.slot returns the state field ('recent_last' or 'recent_prev') of
-- the group of leases granted at time t (fmt's text), if it is one of the
-- two the state holds.
function index.slot(t)
  if S.recent_last > 0 and t == fmt(S.recent_last) then return 'recent_last' end
  if S.recent_prev > 0 and t == fmt(S.recent_prev) then return 'recent_prev' end
  return nil
end

-- index.recentGroup returns what the live leases granted at time t (fmt's
-- text) hold, or nil for no group, and whether the state holds it.
function index.recentGroup(t)
  local f = index.slot(t)
  if f then return S[f .. '_held'], true end
  local g = index.groups[t]
  if g == nil then
    local v = call('HGET', KEYS[K.RECENT_HELD], t)
    g = v and cmsgpack.unpack(v) or false
    index.groups[t] = g
  end
  return g or nil, false
end

-- index.recentInWindow reports whether a lease granted at granted_at is still
-- counted in recent_held (while it lives).
function index.recentInWindow(granted_at) return granted_at >= S.recent_cutoff end

-- index.recentPush appends a new group's time t to the list.
function index.recentPush(t)
  write('RPUSH', KEYS[K.RECENT], t)
  write('PEXPIRE', KEYS[K.RECENT], ceil((REORDER_WINDOW + SLACK) / 1000))
end

-- index.recentAdd counts lease le, granted now.
function index.recentAdd(le)
  local at, t = le.granted_at, fmt(le.granted_at)
  local g -- a time after the latest group's has no group yet (read nothing)
  if at <= S.recent_last then g = index.recentGroup(t) end
  if not g and at > S.recent_last then
    -- A new latest group: the one before the latest until now goes to the
    -- hash if its leases hold anything still.
    local was = S.recent_prev_held
    for d = 1, ND do
      if was[d] ~= 0 then
        local k = fmt(S.recent_prev)
        index.groups[k], index.groupsDirty[k], index.groupsNew = was, true, true
        break
      end
    end
    S.recent_prev, S.recent_prev_held = S.recent_last, S.recent_last_held
    S.recent_last, S.recent_last_held = at, zeros(ND)
    g = S.recent_last_held
    index.recentPush(t)
  elseif not g then
    -- Before the latest group (Redis's clock stepped back): one of the hash's.
    g = zeros(ND)
    index.groups[t], index.groupsNew = g, true
    index.recentPush(t)
  end
  if not index.slot(t) then index.groupsDirty[t] = true end
  for d = 1, ND do
    g[d] = g[d] + le.charge[d]
    S.recent_held[d] = S.recent_held[d] + le.charge[d]
  end
end

-- index.recentEnded takes lease le, which ended, out of recent_held and its
-- group if it is counted there.
function index.recentEnded(le)
  if not index.recentInWindow(le.granted_at) then return end
  local t = fmt(le.granted_at)
  local g, inState = index.recentGroup(t)
  for d = 1, ND do
    S.recent_held[d] = S.recent_held[d] - le.charge[d]
    if g then g[d] = g[d] - le.charge[d] end
  end
  if g and not inState then index.groupsDirty[t] = true end
end

-- index.recentExpire drops the groups granted before cutoff, taking what
-- their live leases hold out of recent_held. With no group left,
-- recent_held is exactly zero, and what the dropped groups held is not
-- read. The cutoff never moves back.
function index.recentExpire(cutoff)
  if cutoff > S.recent_cutoff then S.recent_cutoff = cutoff end
  local dropped, left, gone = 0, false, {}
  repeat
    local times = call('LRANGE', KEYS[K.RECENT], dropped, dropped + 15)
    for _, t in ipairs(times) do
      if tonumber(t) >= S.recent_cutoff then
        left = true
        break
      end
      dropped = dropped + 1
      gone[#gone + 1] = t
    end
  until left or #times < 16
  if dropped == 0 then return end
  write('LTRIM', KEYS[K.RECENT], dropped, -1)
  local held, unread, fields = {}, {}, {} -- what the gone groups hold; those to read; the hash's
  for _, t in ipairs(gone) do
    local f = index.slot(t)
    if f then
      held[#held + 1] = S[f .. '_held']
      S[f .. '_held'] = zeros(ND)
    else
      local g = index.groups[t]
      if g then held[#held + 1] = g elseif g == nil then unread[#unread + 1] = t end
      index.groups[t], index.groupsDirty[t] = false, nil
      fields[#fields + 1] = t
    end
  end
  if not left then
    -- Every group is gone: nothing is held, and nothing need be read.
    S.recent_held = zeros(ND)
    if #fields > 0 then write('DEL', KEYS[K.RECENT_HELD]) end
    return
  end
  if #unread > 0 then
    for _, v in ipairs(call('HMGET', KEYS[K.RECENT_HELD], unpack(unread))) do
      if v then held[#held + 1] = cmsgpack.unpack(v) end
    end
  end
  for _, g in ipairs(held) do
    for d = 1, ND do S.recent_held[d] = S.recent_held[d] - g[d] end
  end
  if #fields > 0 then write('HDEL', KEYS[K.RECENT_HELD], unpack(fields)) end
end

-- index.recentFlush writes the earlier groups changed since the last flush
-- (when the script saves). The hash lives as long as the list: the window
-- from the latest group that came to it on.
function index.recentFlush()
  for t in pairs(index.groupsDirty) do
    local g = index.groups[t]
    if g then write('HSET', KEYS[K.RECENT_HELD], t, cmsgpack.pack(g)) end
  end
  if index.groupsNew then write('PEXPIRE', KEYS[K.RECENT_HELD], ceil((REORDER_WINDOW + SLACK) / 1000)) end
  index.groupsDirty, index.groupsNew = {}, false
end

-- The live sums are what the live leases hold per bucket, by grant number
-- (le.seq, Mark.Seq), in the hash KEYS[K.LIVE_SUMS] (Redis only): field
-- '0:n' holds the charges of lease n, a number per bucket packed with
-- cmsgpack (a lease that holds nothing of any bucket has none). While at
-- most LIVE_FLAT leases are live that is all, and a report reads the
-- fields. Past LIVE_FLAT, the hash also sums them in a tree of radix
-- LIVE_RADIX (S.live_tree = 1, until no lease is live): field 'l:j', for
-- l from 1 to LIVE_LEVELS, holds the sum of leases j * LIVE_RADIX^l to
-- (j + 1) * LIVE_RADIX^l - 1; a sum of zero is no field. A grant or an end
-- then changes one field per level, and what the leases granted before a
-- given one hold is read in at most LIVE_RADIX - 1 fields per level, and
-- the top level's from S.live_from, at or below the lowest number live
-- (index.liveBefore). Until scripts 6.2 a report read every live lease
-- (observe). The memory store keeps the same sums (capacity/livesums.go,
-- liveSums).
index.LIVE_FLAT, index.LIVE_RADIX, index.LIVE_LEVELS = 16, 16, 4
index.LIVE_SPAN = {} -- how many grant numbers a field of level l sums: LIVE_SPAN[l + 1]
for l = 0, index.LIVE_LEVELS do index.LIVE_SPAN[l + 1] = index.LIVE_RADIX ^ l end

-- index.live caches the fields of the live sums this call read or changed
-- (false: none), and index.liveDirty lists those to write (index.liveFlush).
-- index.liveNone says that a field index.live lacks is empty (no lease was
-- live at a grant, or none is after an end), and index.liveClear that the
-- hash is deleted at the flush, before it writes.
resets[#resets + 1] = function() index.live, index.liveDirty, index.liveNone, index.liveClear = {}, {}, false, false end

-- index.liveName names field j of level l.
function index.liveName(l, j) return string.format('%d:%d', l, j) end

-- index.liveRead returns the sums of the named fields, as lists of NB
-- numbers (false: none), reading those this call has not in one HMGET.
function index.liveRead(names)
  local missing = {}
  for _, f in ipairs(names) do
    if index.live[f] == nil then
      if index.liveNone then index.live[f] = false else missing[#missing + 1] = f end
    end
  end
  if #missing > 0 then
    local got = call('HMGET', KEYS[K.LIVE_SUMS], unpack(missing))
    for i, f in ipairs(missing) do index.live[f] = got[i] and cmsgpack.unpack(got[i]) or false end
  end
  local out = {}
  for i, f in ipairs(names) do out[i] = index.live[f] end
  return out
end

-- index.liveLeases returns the charges of every live lease, by grant
-- number: while the sums are flat, at most LIVE_FLAT fields.
function index.liveLeases()
  local out = {}
  if not index.liveNone then
    local all = call('HGETALL', KEYS[K.LIVE_SUMS])
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == '0:' then out[tonumber(string.sub(all[i], 3))] = cmsgpack.unpack(all[i + 1]) end
    end
  end
  for f, v in pairs(index.live) do -- this call's own changes
    if string.sub(f, 1, 2) == '0:' then out[tonumber(string.sub(f, 3))] = v or nil end
  end
  return out
end

-- index.liveApply adds charges c of lease n, times sign (1: granted, -1:
-- ended), to its field and, in a tree, to the sums above it.
function index.liveApply(n, c, sign)
  local names = {}
  for l = 1, S.live_tree * index.LIVE_LEVELS do names[l] = index.liveName(l, floor(n / index.LIVE_SPAN[l + 1])) end
  local sums = index.liveRead(names)
  for i, f in ipairs(names) do
    local v, held = sums[i] or {}, false
    for d = 1, NB do
      v[d] = (v[d] or 0) + sign * c[d]
      held = held or v[d] ~= 0
    end
    index.live[f], index.liveDirty[f] = held and v, true
  end
  local own = index.liveName(0, n)
  index.live[own], index.liveDirty[own] = sign > 0 and {unpack(c, 1, NB)}, true
end

-- index.liveEmptied says no lease is live any more: the sums are deleted,
-- and flat again.
function index.liveEmptied()
  index.live, index.liveDirty, index.liveNone, index.liveClear = {}, {}, true, true
  S.live_tree = 0
end

-- index.liveAdd adds lease le's charges, times sign (1: granted, -1:
-- ended), to the sums. It is called before S.leases counts the change.
function index.liveAdd(le, sign)
  local c, holds = le.charge, false
  for d = 1, NB do
    if c[d] ~= 0 then holds = true break end
  end
  if not holds or le.seq <= 0 then return end
  if S.leases == 0 then
    -- The last end deleted the sums.
    index.liveNone, S.live_tree = true, 0
  elseif sign < 0 and S.leases == 1 then
    index.liveEmptied()
    return
  elseif sign > 0 and S.live_tree == 0 and S.leases >= index.LIVE_FLAT then
    -- Past LIVE_FLAT leases: sum those live in the tree.
    S.live_tree = 1
    S.live_from = le.seq
    for n, v in pairs(index.liveLeases()) do
      index.liveApply(n, v, 1)
      S.live_from = min(S.live_from, n)
    end
  end
  index.liveApply(le.seq, c, sign)
end

-- index.liveBefore returns what the live leases numbered below n hold, a
-- number per bucket, and what lease n holds if it is live.
function index.liveBefore(n)
  n = max(0, min(floor(n), S.grants + 1))
  local before = zeros(NB)
  if S.live_tree == 0 then
    local own
    for m, v in pairs(index.liveLeases()) do
      if m < n then
        for d = 1, NB do before[d] = before[d] + v[d] end
      elseif m == n then
        own = v
      end
    end
    return before, own or zeros(NB)
  end
  local radix, levels = index.LIVE_RADIX, index.LIVE_LEVELS
  local names, top = {}, index.LIVE_SPAN[levels + 1]
  -- [0, n) is the fields of each level l below the top from radix * q(l+1)
  -- to q(l) - 1, q(l) = floor(n / radix^l), and the top's below q(levels).
  for l = 0, levels - 1 do
    local q = floor(n / index.LIVE_SPAN[l + 1])
    for j = floor(q / radix) * radix, q - 1 do names[#names + 1] = index.liveName(l, j) end
  end
  local first = #names + 1
  for j = floor(S.live_from / top), floor(n / top) - 1 do names[#names + 1] = index.liveName(levels, j) end
  names[#names + 1] = index.liveName(0, n)
  local sums = index.liveRead(names)
  for i = 1, #names - 1 do
    local v = sums[i]
    if v then
      for d = 1, NB do before[d] = before[d] + v[d] end
    elseif i == first then
      -- No lease is live below the next top field: start from it.
      first = first + 1
      S.live_from = max(S.live_from, (floor(S.live_from / top) + 1) * top)
    end
  end
  -- Sums whose key expired before the leases' did are never below zero.
  for d = 1, NB do before[d] = max(0, before[d]) end
  return before, sums[#names] or zeros(NB)
end

-- index.liveFlush writes the sums changed since the last flush.
function index.liveFlush()
  local set, del = {}, {}
  for f in pairs(index.liveDirty) do
    if index.live[f] then
      set[#set + 1], set[#set + 2] = f, cmsgpack.pack(index.live[f])
    else
      del[#del + 1] = f
    end
  end
  if index.liveClear then
    write('DEL', KEYS[K.LIVE_SUMS])
  elseif #del > 0 then
    write('HDEL', KEYS[K.LIVE_SUMS], unpack(del))
  end
  if #set > 0 then write('HSET', KEYS[K.LIVE_SUMS], unpack(set)) end
  index.liveDirty, index.liveNone, index.liveClear = {}, false, false
end

-- The lease expiries are the live leases by expiry, a sorted set
-- (KEYS[K.LEASE_EXPIRIES]): the expired ones and the next expiry are found
-- without reading every lease (reclaimLeases; Redis only).

-- index.reclaimLimit is how many expired leases, and how many lapsed
-- tickets, a script reclaims (WALKS.RECLAIM; false: every one, for a
-- Snapshot, which writes nothing); index.reclaimMore says some were left,
-- and the script then decides nothing (reclaimed).
resets[#resets + 1] = function() index.reclaimLimit, index.reclaimMore = WALKS.RECLAIM, false end

-- index.expired returns the members of the sorted set key whose score is at
-- or before NOW, at most index.reclaimLimit of them, the earliest first (or
-- the latest, if latest), and whether others are left (index.reclaimMore).
function index.expired(key, latest)
  local n = index.reclaimLimit
  local count = n and n + 1 or -1
  local got
  if latest then
    -- ZRANGE ... REV, not ZREVRANGEBYSCORE: the least ACL of the package
    -- doc grants zrange.
    got = call('ZRANGE', key, NOW, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, count)
  else
    got = call('ZRANGEBYSCORE', key, '-inf', NOW, 'LIMIT', 0, count)
  end
  if n and #got > n then
    got[n + 1] = nil
    index.reclaimMore = true
    return got, true
  end
  return got, false
end

-- index.reclaimDue reports whether more leases expired, or more tickets
-- lapsed, than one script reclaims. The ops script then only advances
-- (reclaiming index.reclaimLimit of each) and has its batch sent again; a
-- batch that finds fewer reclaims them in its first operation's advance,
-- as the memory store does.
function index.reclaimDue()
  local n = index.reclaimLimit
  if S.next_lease_expiry ~= 0 and NOW >= S.next_lease_expiry and call('ZCOUNT', KEYS[K.LEASE_EXPIRIES], '-inf', NOW) > n then
    return true
  end
  return S.next_ticket_expiry ~= 0 and NOW >= S.next_ticket_expiry and call('ZCOUNT', KEYS[K.TICKET_EXPIRIES], '-inf', NOW) > n
end

-- index.expiryPut records that call c's lease expires at t.
function index.expiryPut(c, t) write('ZADD', KEYS[K.LEASE_EXPIRIES], t, c) end

-- index.expiryDrop forgets call c's lease.
function index.expiryDrop(c) write('ZREM', KEYS[K.LEASE_EXPIRIES], c) end

-- noteExpiry records a lease's or ticket's expiry t in field, a lower
-- bound of the next expiry of its kind.
local function noteExpiry(t, field)
  if S[field] == 0 or t < S[field] then S[field] = t end
  if t > S.last_expiry then S.last_expiry = t end
end

-- grantLease makes the lease of call with charges c. A fresh grant charges
-- c (charge is defined below); a claimed ticket was charged at booking.
local charge, dispatched, flushFlows
local function grantLease(c, fresh, req, weight)
  if fresh then charge(c) end
  dispatched(c)
  local le = newRecord(LEASE_FIELDS)
  le.attempt, le.class, le.granted_at, le.expires = req.attempt, req.class, NOW, NOW + req.ttl
  le.key, le.weight = req.key, weight
  index.recentExpire(NOW - REORDER_WINDOW)
  for d = 1, ND do le.charge[d], le.mark[d], le.inflight[d] = c[d], S.granted[d], S.recent_held[d] end
  S.grants = S.grants + 1
  le.seq = S.grants
  index.recentAdd(le)
  index.liveAdd(le, 1)
  index.expiryPut(req.call, le.expires)
  putLease(req.call, le)
  write('ZREM', KEYS[K.LAPSED], req.call .. '#' .. req.attempt) -- granted again: live, not lapsed
  if S.leases == 0 then NEW_LEASE_KEY = true end
  S.leases = S.leases + 1
  noteExpiry(le.expires, 'next_lease_expiry')
  return le
end

-- takeLapsed reports whether lease id lapsed (expired or was superseded)
-- within LAPSED_LEASE_MEMORY, and forgets it (lapsedLeases.take).
local function takeLapsed(id)
  local forget = tonumber(call('ZSCORE', KEYS[K.LAPSED], id))
  if forget == nil then return false end
  write('ZREM', KEYS[K.LAPSED], id)
  return NOW < forget
end

-- lapse drops c's live lease (its slot comes back, its tokens stay spent)
-- and remembers it as lapsed until LAPSED_LEASE_MEMORY from now, forgetting
-- those lapsed longer ago (memScope.lapse).
local function lapse(c)
  local le = getLease(c)
  if not le then return end
  dropLease(c)
  write('ZADD', KEYS[K.LAPSED], NOW + LAPSED_LEASE_MEMORY, c .. '#' .. le.attempt)
  write('ZREMRANGEBYSCORE', KEYS[K.LAPSED], '-inf', NOW)
  write('PEXPIRE', KEYS[K.LAPSED], ceil((LAPSED_LEASE_MEMORY + SLACK) / 1000))
end

-- Tickets -------------------------------------------------------------------

-- flowID names the fair-queuing flow of class and key (flowID in Go).
local function flowID(class, key) return class .. '/' .. key end

-- Tickets live in a hash (call -> encoded ticket) and two sorted sets
-- (their lapse times and times), read and written through a cache:
-- TICKETS[call] is the ticket, or false for none; TICKETS_DIRTY lists the
-- calls to write (flushTickets), at the latest when the script saves, so a
-- batch that retimes the first tickets several times writes each once.
-- ALL_TICKETS says the whole hash is in the cache (allTickets).
local TICKETS, TICKETS_DIRTY, ALL_TICKETS
resets[#resets + 1] = function() TICKETS, TICKETS_DIRTY, ALL_TICKETS = {}, {}, false end

local function getTicket(c)
  local tk = TICKETS[c]
  if tk == nil then
    tk = false
    if S.tickets > 0 and not ALL_TICKETS then
      local v = call('HGET', KEYS[K.TICKETS], c)
      if v then tk = decodeRecord(v, TICKET_FIELDS) end
    end
    TICKETS[c] = tk
  end
  return tk or nil
end

-- allTickets returns every ticket as {call, ticket}, in no order.
local function allTickets()
  if not ALL_TICKETS then
    ALL_TICKETS = true
    if S.tickets > 0 then
      local all = call('HGETALL', KEYS[K.TICKETS])
      for i = 1, #all, 2 do
        if TICKETS[all[i]] == nil then TICKETS[all[i]] = decodeRecord(all[i + 1], TICKET_FIELDS) end
      end
    end
  end
  local out = {}
  for c, tk in pairs(TICKETS) do
    if tk then out[#out + 1] = {c, tk} end
  end
  return out
end

local function putTicket(c, tk)
  TICKETS[c], TICKETS_DIRTY[c] = tk, true
  noteExpiry(tk.expires, 'next_ticket_expiry')
end

-- flushTickets writes the tickets changed since the last flush (Redis
-- only): before the sorted sets are read, and when the script saves.
local function flushTickets()
  for c in pairs(TICKETS_DIRTY) do
    local tk = TICKETS[c]
    if tk then
      write('HSET', KEYS[K.TICKETS], c, encodeRecord(tk, TICKET_FIELDS))
      write('ZADD', KEYS[K.TICKET_EXPIRIES], tk.expires, c)
      write('ZADD', KEYS[K.TICKET_TIMES], tk.at, c)
    else
      write('HDEL', KEYS[K.TICKETS], c)
      write('ZREM', KEYS[K.TICKET_EXPIRIES], c)
      write('ZREM', KEYS[K.TICKET_TIMES], c)
    end
  end
  TICKETS_DIRTY = {}
end

-- The order the tickets are due in (ticketBook.order in Go): higher ranks
-- first, then by virtual finish (weighted fair queuing), then by call; kept
-- as a sorted set per rank, KEYS[K.ORDER + rank], of calls by finish (a
-- sorted set orders equal scores by member, as Go orders them by call).
-- Redis only.

-- index.orderPut places ticket tk of call c in its rank's order.
function index.orderPut(c, tk)
  write('ZADD', KEYS[K.ORDER + tk.rank], fmt(tk.finish), c)
  index.touched[tk.rank] = true
end

-- index.place is how many booked tickets are due before call c's, of rank
-- r, in their order (ticketBook.place in Go).
function index.place(c, r)
  local n = call('ZRANK', KEYS[K.ORDER + r], c) or 0
  for higher = r + 1, NRANKS - 1 do n = n + call('ZCARD', KEYS[K.ORDER + higher]) end
  return n
end

-- index.nth returns the call of the booked ticket at place k (from 0) in
-- their order, or nil if fewer are booked.
function index.nth(k)
  for r = NRANKS - 1, 0, -1 do
    local n = call('ZCARD', KEYS[K.ORDER + r])
    if k < n then return call('ZRANGE', KEYS[K.ORDER + r], k, k)[1] end
    k = k - n
  end
  return nil
end

-- index.orderFirst returns the first k booked tickets as {call, ticket},
-- in the order they are due.
function index.orderFirst(k)
  local out = {}
  for r = NRANKS - 1, 0, -1 do
    local start = 0
    while #out < k do
      local ids = call('ZRANGE', KEYS[K.ORDER + r], start, start + k - #out - 1)
      if #ids == 0 then break end
      for _, c in ipairs(ids) do
        local tk = getTicket(c)
        if tk then out[#out + 1] = {c, tk} end
      end
      start = start + #ids
    end
  end
  return out
end

-- book takes a ticket's charges now and holds them until the ticket is
-- claimed, lapses or is released.
local function book(c, tk)
  local id = flowID(tk.class, tk.key)
  if S.tickets == 0 then
    S.booked_flow, S.flows_mixed, S.booked_floor = id, 0, tk.floor
  elseif S.booked_flow ~= id then
    S.flows_mixed = 1
  end
  S.booked_floor = max(S.booked_floor, tk.floor)
  charge(tk.charge)
  for d = 1, NB do
    S.booked[d] = S.booked[d] + tk.charge[d]
    S.booked_rank[tk.rank][d] = S.booked_rank[tk.rank][d] + tk.charge[d]
  end
  S.last_finish[tk.rank] = max(S.last_finish[tk.rank], tk.finish)
  putTicket(c, tk)
  index.orderPut(c, tk)
  if S.tickets == 0 then NEW_TICKET_KEY = true end
  S.tickets = S.tickets + 1
end

-- unbook drops c's ticket (claimed, lapsed or released) and returns it.
-- With no ticket left, booked is exactly zero.
local function unbook(c)
  local tk = getTicket(c)
  if not tk then return nil end
  TICKETS[c], TICKETS_DIRTY[c] = false, true
  S.window_current = 0 -- a ticket from beyond the first may be among them now
  write('ZREM', KEYS[K.ORDER + tk.rank], c)
  S.tickets = S.tickets - 1
  for d = 1, NB do
    S.booked[d] = max(0, S.booked[d] - tk.charge[d])
    S.booked_rank[tk.rank][d] = max(0, S.booked_rank[tk.rank][d] - tk.charge[d])
    if S.tickets == 0 then
      S.booked[d] = 0
      for r = 0, NRANKS - 1 do S.booked_rank[r][d] = 0 end
    end
  end
  if S.tickets == 0 then
    for r = 0, NRANKS - 1 do S.last_finish[r] = 0 end
    S.booked_flow, S.flows_mixed, S.booked_floor = '', 0, 0
  end
  return tk
end

-- soleFlow reports whether every booked ticket is of flow (class, key)
-- (memScope.soleFlow).
local function soleFlow(class, key)
  return S.tickets > 0 and S.flows_mixed == 0 and S.booked_flow == flowID(class, key)
end

-- index.keptBy are the versions of the scripts that keep these indexes as
-- this one does: a state one of them saved last needs no rebuild. A state
-- of any other version, older or newer (a rollback), is re-indexed.
-- 6.2 and 6.3 sum the live leases by grant number; 6.1 kept a line per lease.
index.keptBy = {['6.2'] = true, [SCRIPT_VERSION] = true}

-- index.rebuild makes the indexes anew from the leases and tickets: the one
-- walk over them, when a state saved by a version of the scripts that does
-- not keep them (index.keptBy) is loaded (a rolling deploy). A lease that
-- such a version granted, or wrote again, has no grant number: it takes
-- the next, in the order the leases were granted.
function index.rebuild()
  write('DEL', KEYS[K.RECENT], KEYS[K.RECENT_HELD], KEYS[K.LEASE_MARKS], KEYS[K.LEASE_EXPIRIES], KEYS[K.LIVE_SUMS],
    unpack(KEYS, K.ORDER, K.ORDER + NRANKS - 1))
  index.groups, index.groupsDirty = {}, {}
  S.recent_last, S.recent_last_held = 0, zeros(ND)
  S.recent_prev, S.recent_prev_held = 0, zeros(ND)
  S.recent_cutoff = max(S.recent_cutoff, NOW - REORDER_WINDOW)
  S.recent_held = zeros(ND)
  local leases = {}
  for c, le in pairs(allLeases()) do
    leases[#leases + 1] = {c, le}
    index.expiryPut(c, le.expires)
    S.grants = max(S.grants, le.seq)
  end
  table.sort(leases, function(a, b)
    if a[2].granted_at ~= b[2].granted_at then return a[2].granted_at < b[2].granted_at end
    return a[1] < b[1]
  end)
  index.liveEmptied()
  if #leases > index.LIVE_FLAT then S.live_tree = 1 end
  S.live_from = S.grants + 1
  for _, e in ipairs(leases) do
    local c, le = e[1], e[2]
    if le.seq <= 0 then
      S.grants = S.grants + 1
      le.seq = S.grants
      putLease(c, le)
    end
    S.live_from = min(S.live_from, le.seq)
    if index.recentInWindow(le.granted_at) then index.recentAdd(le) end
    local holds = false
    for d = 1, NB do holds = holds or le.charge[d] ~= 0 end
    if holds then index.liveApply(le.seq, le.charge, 1) end
  end
  for _, e in ipairs(allTickets()) do index.orderPut(e[1], e[2]) end
end

-- Saving ------------------------------------------------------------------

-- stateExpiry is when the scope's state stops mattering (Redis only): every
-- bucket full again, the day window over if a daily budget counted, every
-- lease expired and ticket lapsed, the block and a lowered limit forgotten.
local function stateExpiry()
  local t = NOW
  for d = 1, NB do
    local cap, lv = S.capacity[d], S.level[d]
    if cap > 0 and lv < cap then t = max(t, NOW + ceil((cap - lv) / (S.rate[d] * (1 - S.cut)) * 1e6)) end
  end
  for d = REQUESTS_PER_DAY, TOKENS_PER_DAY do
    if S.day_used[d] > 0 and S.capacity[d] > 0 then
      local e = S.day_end
      if e == 0 then e = NOW + 86400000000 end
      t = max(t, e)
    end
  end
  t = max(t, S.last_expiry, S.lowered_until, S.keys_until)
  if S.block_until > 0 then
    local e = S.block_until
    if S.block_half_open > 0 then e = e + S.block_half_open + HALF_OPEN_MEMORY end
    t = max(t, e)
  end
  return t
end

-- stored.save writes the state packed, if it changed, and its version
-- (Redis only). Until S.text_until it writes the text state too, whole, for
-- the workers of a version before 6.0 (stored.readText); then, once, it drops the
-- text and marks the state of this format, which they refuse.
function stored.save()
  local was = stored.loaded
  S.written_by = SCRIPT_VERSION
  local fields = {}
  local packed = stored.pack()
  if packed ~= was.packed then fields[#fields + 1], fields[#fields + 2] = 'packed', packed end
  if was.writer ~= SCRIPT_VERSION then fields[#fields + 1], fields[#fields + 2] = 'written_by', SCRIPT_VERSION end
  if S.text_until > NOW then
    for _, f in ipairs(STATE_SCHEMA) do
      local name = f[1]
      if TEXT_KINDS[name] and name ~= 'written_by' then
        local text = encodeField(f[2], S[name])
        if name == 'format' then text = TEXT_FORMAT end
        fields[#fields + 1], fields[#fields + 2] = name, text
      end
    end
  elseif was.format ~= STATE_FORMAT then
    if was.format == TEXT_FORMAT then
      local text = {}
      for name in pairs(TEXT_KINDS) do
        if name ~= 'format' and name ~= 'written_by' then text[#text + 1] = name end
      end
      write('HDEL', KEYS[K.STATE], unpack(text))
    end
    fields[#fields + 1], fields[#fields + 2] = 'format', STATE_FORMAT
  end
  if #fields > 0 then write('HSET', KEYS[K.STATE], unpack(fields)) end
end

-- save writes the leases and the fields of the state that changed, and
-- gives each key its TTL (Redis only). The lease and ticket keys live past
-- the latest expiry; their TTL is moved whenever a later one arrives.
local function save()
  if #DUE > 0 then write('SPUBLISH', CHANNEL, 'due ' .. table.concat(DUE, ' ')) end
  flushLeases()
  flushTickets()
  flushFlows()
  index.recentFlush()
  index.liveFlush()
  if NEW_LEASE_KEY or (S.leases > 0 and S.last_expiry > S.lease_key_expiry) then
    S.lease_key_expiry = S.last_expiry + SLACK
    write('PEXPIRE', KEYS[K.LEASES], ceil((S.lease_key_expiry - NOW) / 1000))
    write('PEXPIRE', KEYS[K.LIVE_SUMS], ceil((S.lease_key_expiry - NOW) / 1000))
    write('PEXPIRE', KEYS[K.LEASE_EXPIRIES], ceil((S.lease_key_expiry - NOW) / 1000))
  end
  if NEW_TICKET_KEY or (S.tickets > 0 and S.last_expiry > S.ticket_key_expiry) then
    S.ticket_key_expiry = S.last_expiry + SLACK
    local ttl = ceil((S.ticket_key_expiry - NOW) / 1000)
    for _, k in ipairs({K.TICKETS, K.TICKET_EXPIRIES, K.TICKET_TIMES}) do write('PEXPIRE', KEYS[k], ttl) end
    for r = 0, NRANKS - 1 do index.touched[r] = true end
  end
  for r in pairs(index.touched) do
    write('PEXPIRE', KEYS[K.ORDER + r], max(1, ceil((S.ticket_key_expiry - NOW) / 1000)))
  end
  stored.save()
  local ttl = ceil((stateExpiry() - NOW + SLACK) / 1000)
  write('PEXPIRE', KEYS[K.STATE], ttl)
  -- The fair-queuing keys live as long as the state.
  if S.flows > 0 then write('PEXPIRE', KEYS[K.FLOWS], ttl) end
  if S.keys_until > 0 then write('PEXPIRE', KEYS[K.KEY_CAPS], ttl) end
  if S.lapsing == 1 then write('PEXPIRE', KEYS[K.LAPSING], ttl) end
end

-- boundBlock is how long a block of the given length and half-open time
-- (µs) lasts from NOW, and its half-open time, each held to MAX_BLOCK (as
-- MemoryStore.Block).
local function boundBlock(lasts, halfOpen)
  return NOW + min(lasts, MAX_BLOCK), min(max(halfOpen, 0), MAX_BLOCK)
end

-- header is the start of every reply: kind, now, epoch ('' when a
-- read-only script found none), reset, freed.
local function header(kind)
  return {kind, NOW, EPOCH or '', RESET, FREED}
end

-- blockReply is a block for Go: reason, until, credential, detail, half
-- open, probing. cb is a credential block; without it, the scope's.
local function blockReply(cb)
  if cb then return {cb[1], cb[2], 1, cb[3], cb[4], cb[5]} end
  return {S.block_reason, S.block_until, 0, S.block_detail, S.block_half_open, S.block_probing}
end
