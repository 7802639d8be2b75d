-- common.lua: the scope state model shared by every scope script. It mirrors
-- capacity/memscope.go; keep the two in step. Times are integer microseconds
-- in the store's clock. Fractions leave as strings (fstr): Redis truncates
-- a Lua number reply to an integer. The code favours few closures and few
-- tables: every script runs it from the top on every call.
--
-- KEYS: 1 epoch, 2 credential block, 3 state, 4 leases, 5 tickets,
--       6 ticket expiries, 7 ticket times
-- ARGV: 1 now ('' = Redis TIME), 2 store instance id, 3 release channel,
--       4 next day boundary, 5 the boundary after it ('' = unknown),
--       then the script's own arguments from ARGV[6].

local ceil, floor, min, max = math.ceil, math.floor, math.min, math.max
local call = redis.call
local mp_pack, mp_unpack = cmsgpack.pack, cmsgpack.unpack
local spack, sunpack = struct.pack, struct.unpack
local ARGV, KEYS = ARGV, KEYS -- upvalues, not globals: read for every operation

-- The state is one flat array, laid out in scripts.go and stored with
-- struct.pack: a format version byte, then each field as a double or, for
-- the three string fields, a zero-terminated string ($STATE_FMT). Decoding
-- it is one C call and one table; msgpack grew the table one slot at a time. Dimension d
-- is 1-based here (capacity.Dimension + 1); a per-dimension field sits at
-- S[OFFSET + d]. Names after a dollar sign are constants that Go writes in
-- as literals, not locals, so closures capture few upvalues: Lua 5.1 finds
-- each one in a list, and every script defines these functions on every
-- call.

local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = call('TIME')
  NOW = t[1] * 1000000 + t[2]
end
local INSTANCE, CHANNEL = ARGV[2], ARGV[3]
local BOUND1, BOUND2 = tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0

local S, EP, CB -- state, epoch token, credential block {r, u, d, h, p}
local LOADED = false -- the state existed before this script
local RESET, FREED, PUBLISHED = 0, 0, false
-- ADVANCED: the state is advanced to NOW and nothing in it falls due at NOW
-- (see advance).
local ADVANCED = false

-- The lease cache (see flush_leases).
local LEASES, DIRTY = {}, {} -- call -> lease (false: none); calls to write
local RAW = {} -- call -> a prefetched lease, still encoded (false: none)
local LEASE_FMT = '<dddddddddddddddddd'

-- @functions: what follows runs inside a function of its own (scripts.go).

local function fstr(x) return string.format('%.17g', x) end

-- next_boundary is the first day boundary after NOW that the caller passed,
-- or 0 when it passed none (the window's end is then pending).
local function next_boundary()
  if BOUND1 > NOW then return BOUND1 end
  if BOUND2 > NOW then return BOUND2 end
  return 0
end

-- recompute derives capacities and rates from the limits, lowered where the provider
-- reported less (Limits.Budgets, memScope.recompute).
local function recompute()
  local m, bs = S[$MARGIN], S[$BURST]
  if m == 0 then m = $DEF_MARGIN end
  if bs == 0 then bs = $DEF_BURST end
  for d = 1, $ND do
    local lim = S[$L + d]
    if d <= $NB then
      local lo = S[$LO + d]
      if lo > 0 and (lim == 0 or lo < lim) then lim = lo end
      local rate, c = 0, 0
      if lim > 0 then
        rate = lim * m / 60
        c = max(1, floor(rate * bs))
        if d ~= 1 and S[$TBURST] > c then c = S[$TBURST] end
      end
      S[$CAP + d], S[$RATE + d] = c, rate
    elseif d < $ND then
      S[$CAP + d] = lim > 0 and max(1, floor(lim * m)) or 0
    else
      S[$CAP + d] = lim
    end
  end
end

local function unpack_state(v) return {sunpack('<$STATE_FMT', v, 2)} end

-- load reads the credential's epoch, its block and the scope's state. State
-- from another epoch is dropped (its keys outlived a data loss). With create
-- false a missing state returns false.
local function load(create)
  local v = call('MGET', KEYS[$K_EPOCH], KEYS[$K_CB], KEYS[$K_STATE])
  EP = v[1]
  if not EP then
    local t = call('TIME')
    EP = t[1] .. string.format('%06d', t[2])
    call('SET', KEYS[$K_EPOCH], EP)
    RESET = 1
  end
  if v[2] then CB = mp_unpack(v[2]) end
  if v[3] then
    -- State of this format is read; msgpack state (0xdc: an array) is
    -- an earlier version's and dropped; anything else is an error.
    local version = string.byte(v[3], 1)
    if version == $STATE_VERSION then
      local ok, s = pcall(unpack_state, v[3])
      if not ok then error({err = 'tollgate: unreadable scope state'}) end
      S = s
      S[$NSTATE + 1] = nil -- the position after the last field
    elseif version ~= 0xdc then
      error({err = 'tollgate: unknown scope state format'})
    end
    if not S or S[$EPOCH] ~= EP or #S ~= $NSTATE then
      S = nil
      RESET = 1
      call('DEL', KEYS[$K_STATE])
    end
  end
  if S then
    LOADED = true
    return true
  end
  if not create then return false end
  call('DEL', KEYS[$K_LEASES], KEYS[$K_TICKETS], KEYS[$K_TEXP], KEYS[$K_TAT])
  S = {}
  for i = 1, $NSTATE do S[i] = 0 end
  S[$EPOCH], S[$SIG], S[$BLK + 3] = EP, '', ''
  return true
end

-- publish announces freed capacity to every worker's waiters on the scope,
-- if any may be waiting: a waiter waits only after a denial, and only until
-- the RetryAt it was given, so no release is announced after the latest
-- RetryAt handed out (WD).
local function publish()
  if not PUBLISHED and NOW <= S[$WD] then
    PUBLISHED = true
    call('SPUBLISH', CHANNEL, INSTANCE)
  end
end

-- A lease is {attempt, class, granted at, expires, charges x7, granted x7},
-- stored as 18 little-endian doubles (decode_lease); a ticket is {at,
-- expires, class, charges x7} in msgpack.
--
-- Leases are read and written through a cache: a batch reads the leases of
-- its calls with one HMGET (prefetch_leases) and writes the changed ones
-- with one HSET and one HDEL (flush_leases), before anything reads the hash
-- directly and before the script ends.

local function decode_lease(v)
  if not v then return false end
  local le = {sunpack(LEASE_FMT, v)}
  le[19] = nil -- the position after the last field
  return le
end

local function encode_lease(le)
  return spack(LEASE_FMT, le[1], le[2], le[3], le[4], le[5], le[6], le[7], le[8], le[9],
    le[10], le[11], le[12], le[13], le[14], le[15], le[16], le[17], le[18])
end

-- prefetch_leases reads the leases of calls with one HMGET; each is decoded
-- when first needed (a settle needs only its attempt: lease_attempt).
local function prefetch_leases(calls)
  if S[$NL] == 0 or #calls == 0 then return end
  local v = call('HMGET', KEYS[$K_LEASES], unpack(calls))
  for i, c in ipairs(calls) do RAW[c] = v[i] or false end
end

local function get_lease(c)
  local le = LEASES[c]
  if le == nil then
    local v = RAW[c]
    if v == nil then
      if S[$NL] == 0 then return nil end
      v = call('HGET', KEYS[$K_LEASES], c)
    end
    le = decode_lease(v)
    LEASES[c] = le
  end
  return le or nil
end

-- lease_attempt returns the attempt of c's lease, or nil if none.
local function lease_attempt(c)
  local le = LEASES[c]
  if le == nil then
    local v = RAW[c]
    if v == nil then
      le = get_lease(c)
    elseif v then
      return (sunpack('<d', v))
    end
  end
  return le and le[1] or nil
end

local function put_lease(c, le)
  LEASES[c], DIRTY[c] = le, true
end

local function drop_lease(c)
  if lease_attempt(c) then
    LEASES[c], DIRTY[c] = false, true
    S[$NL] = S[$NL] - 1
  end
end

-- flush_leases writes the leases changed since the last flush.
local function flush_leases()
  local set, del = {}, {}
  for c in pairs(DIRTY) do
    local le = LEASES[c]
    if le then
      set[#set + 1] = c
      set[#set + 1] = encode_lease(le)
    elseif le == nil and RAW[c] then -- granted: stored encoded
      set[#set + 1] = c
      set[#set + 1] = RAW[c]
    else
      del[#del + 1] = c
    end
  end
  DIRTY = {}
  for i = 1, #set, 1000 do call('HSET', KEYS[$K_LEASES], unpack(set, i, min(i + 999, #set))) end
  for i = 1, #del, 1000 do call('HDEL', KEYS[$K_LEASES], unpack(del, i, min(i + 999, #del))) end
end

local function get_ticket(c)
  if S[$NT] == 0 then return nil end
  local v = call('HGET', KEYS[$K_TICKETS], c)
  return v and mp_unpack(v)
end

-- scan_leases reclaims expired leases (their slots come back, their tokens
-- stay spent), recounts the live ones and returns the earliest live expiry
-- (0: none), which becomes the exact next expiry. Leases are found by
-- reading them all: it runs only when the next expiry (a lower bound) has
-- passed, or to tell when a slot frees.
local function scan_leases()
  flush_leases()
  local all = call('HGETALL', KEYS[$K_LEASES])
  local dead, n, first = {}, 0, 0
  for i = 1, #all, 2 do
    local ex = sunpack('<d', all[i + 1], 25)
    if ex <= NOW then
      dead[#dead + 1] = all[i]
      LEASES[all[i]] = false
    else
      n = n + 1
      if first == 0 or ex < first then first = ex end
    end
  end
  for i = 1, #dead, 1000 do
    call('HDEL', KEYS[$K_LEASES], unpack(dead, i, min(i + 999, #dead)))
  end
  S[$NL], S[$NE] = n, first
  if #dead > 0 then
    FREED = FREED + #dead
    publish()
  end
  return first
end

-- Classes (capacity.Class): 0 Standard, 1 Interactive, 2 Bulk.

-- class_rules reports whether the limits rank classes (floors set): only
-- then may a call borrow what lower classes booked (memScope.classRules).
local function class_rules() return S[$SF] > 0 or S[$BF] > 0 end

-- class_index maps a class to 0..2 as capacity's classIndex.
local function class_index(c)
  if c < 0 or c >= 3 then return 0 end
  return c
end

-- class_rank orders classes: Interactive above Standard above Bulk.
local function class_rank(c)
  if c == 1 then return 2 end
  if c == 2 then return 0 end
  return 1
end

-- class_floor is the fraction of every budget class c may not consume
-- (Limits.floor).
local function class_floor(c)
  if c == 0 then return S[$SF] end
  if c == 2 then return S[$BF] end
  return 0
end

-- effective_class is c lifted one class for each AgingAfter waited since
-- since (0: never) (Limits.effectiveClass).
local function effective_class(c, since)
  local S = S -- registers, not upvalues: this is hot
  local ag = S[$AG]
  if ag <= 0 or since == 0 or c == 1 then return c end
  local w = NOW - since
  while w >= ag and c ~= 1 do
    if c == 2 then c = 0 else c = 1 end
    w = w - ag
  end
  return c
end

-- clear_booked zeroes the booked sums: no ticket is left.
local function clear_booked()
  for d = 1, $NB do S[$BK + d] = 0 end
  for i = 1, 3 * $NB do S[$BC + i] = 0 end
end

-- unbook drops c's ticket (claimed, lapsed or released) and returns it.
-- booked is the exact sum over live tickets, whatever the limits are now.
local function unbook(c)
  local tk = get_ticket(c)
  if not tk then return nil end
  call('HDEL', KEYS[$K_TICKETS], c)
  call('ZREM', KEYS[$K_TEXP], c)
  call('ZREM', KEYS[$K_TAT], c)
  S[$NT] = S[$NT] - 1
  local bc = $BC + class_index(tk[3]) * $NB
  for d = 1, $NB do
    S[$BK + d] = max(0, S[$BK + d] - tk[3 + d])
    S[bc + d] = max(0, S[bc + d] - tk[3 + d])
  end
  if S[$NT] == 0 then clear_booked() end
  return tk
end

-- charge takes c (charges at c[1 .. 7]) from every budget; a negative
-- charge is a refund, capped at capacity. Grants (the positive parts) are
-- recorded in the grant history. Each charge is read once (this is hot).
local function charge(c)
  local S = S -- registers, not upvalues: this is hot
  for d = 1, $NB do -- unroll
    local x = c[d]
    if x ~= 0 then
      local cap = S[$CAP + d]
      if cap > 0 then
        -- min(cap - booked, level - x), without a C call (this is hot).
        local lv, top = S[$LV + d] - x, cap - S[$BK + d]
        if lv > top then lv = top end
        S[$LV + d] = lv
      end
      if x > 0 then S[$G + d] = S[$G + d] + x end
    end
  end
  local x5, x6, x7 = c[5], c[6], c[7]
  local u1, u2 = S[$DU + 1] + x5, S[$DU + 2] + x6
  S[$DU + 1], S[$DU + 2] = u1 > 0 and u1 or 0, u2 > 0 and u2 or 0
  if x5 > 0 then S[$G + 5] = S[$G + 5] + x5 end
  if x6 > 0 then S[$G + 6] = S[$G + 6] + x6 end
  if x7 > 0 then S[$G + 7] = S[$G + 7] + x7 end
end

-- refund gives back the charges at c[off + 1 .. off + 7] but the slot.
local function refund(c, off)
  local neg = {}
  for d = 1, $ND do neg[d] = -c[off + d] end
  neg[$ND] = 0
  charge(neg)
end

-- advance refills the buckets to NOW, rolls the day window and reclaims
-- expired leases (their slots come back, their tokens stay spent) and lapsed
-- tickets (their capacity stays spent, but under class rules it goes back)
-- (memScope.advance).
local function advance()
  if ADVANCED then return end
  local S, NOW = S, NOW -- registers, not upvalues: this is hot
  if S[$STARTED] == 0 then return end
  -- Elapsed seconds computed as Go's Duration.Seconds does (whole seconds
  -- plus nanoseconds / 1e9), so the refill matches the memory store's to
  -- the last bit.
  local dt, us = 0, NOW - S[$LAST]
  if us > 0 then
    local sec = floor(us / 1e6)
    dt = sec + (us - sec * 1e6) * 1000 / 1e9
  end
  if dt > 0 then
    for d = 1, $NB do -- unroll
      local c = S[$CAP + d]
      if c > 0 then
        local top, lv = c - S[$BK + d], S[$LV + d]
        if lv < top then S[$LV + d] = min(top, lv + S[$RATE + d] * dt) end
      end
    end
    S[$LAST] = NOW
  end
  local de = S[$DE]
  if de == 0 or NOW >= de then
    if de ~= 0 then S[$DU + 1], S[$DU + 2] = 0, 0 end
    S[$DE] = next_boundary()
  end
  if S[$NE] ~= 0 and NOW >= S[$NE] then scan_leases() end
  if S[$TE] ~= 0 and NOW >= S[$TE] then
    -- Counts are taken from the sorted set, so keys that expired on their
    -- own leave no trace.
    local rules = class_rules()
    for _, c in ipairs(call('ZRANGEBYSCORE', KEYS[$K_TEXP], '-inf', NOW)) do
      local tk = unbook(c)
      -- Under class rules a due ticket's claim checks the provider's bucket
      -- (level + booked): the lapsed charge never reached the provider.
      if tk and rules then refund(tk, 3) end
    end
    S[$NT] = call('ZCARD', KEYS[$K_TEXP])
    if S[$NT] == 0 then clear_booked() end
    local first = call('ZRANGE', KEYS[$K_TEXP], 0, 0, 'WITHSCORES')
    S[$TE] = tonumber(first[2]) or 0
  end
  -- A second call at the same NOW would change nothing while the day
  -- window's end is known and no lease or ticket expiry is at or before
  -- NOW: the later operations of a batch skip it. Whatever stores an expiry
  -- at NOW or installs limits clears this.
  local ne, te = S[$NE], S[$TE]
  ADVANCED = S[$DE] > NOW and (ne == 0 or ne > NOW) and (te == 0 or te > NOW)
end

-- slot_free reports whether a call whose class may not consume fl (a
-- fraction) of the in-flight slots finds one free.
local function slot_free(fl)
  local S = S -- registers, not upvalues: this is hot
  local c = S[$CAP + $ND]
  if c == 0 then return true end
  if fl == 0 then return S[$NL] < c end -- no C call (this is hot)
  return S[$NL] < c - floor(fl * c)
end

-- note_expiry records a new lease (or, at i = TE, ticket) expiry.
local function note_expiry(t, i)
  if t <= NOW then ADVANCED = false end
  if S[i] == 0 or t < S[i] then S[i] = t end
  if t > S[$MX] then S[$MX] = t end
end

-- save writes the state with its TTL: until the scope stops mattering (every
-- bucket full again, the day window over if a daily budget counted, every
-- lease expired and ticket lapsed, the block and a lowered limit forgotten).
-- Lease and ticket keys are given a TTL past their latest expiry whenever a
-- later one arrives (or the key is new).
local function save(leases_new, tickets_new)
  local S, NOW = S, NOW -- registers, not upvalues: this is hot
  flush_leases()
  local dl = NOW
  for d = 1, $NB do -- unroll
    local c, lv = S[$CAP + d], S[$LV + d]
    if c > 0 and lv < c then
      local t = NOW + ceil((c - lv) / S[$RATE + d] * 1e6)
      if t > dl then dl = t end
    end
  end
  if (S[$DU + 1] > 0 and S[$CAP + 5] > 0) or (S[$DU + 2] > 0 and S[$CAP + 6] > 0) then
    local de = S[$DE]
    if de == 0 then de = NOW + 86400000000 end
    if de > dl then dl = de end
  end
  if S[$MX] > dl then dl = S[$MX] end
  if S[$LOM] > dl then dl = S[$LOM] end
  if S[$BLK] == 1 then
    local e = S[$BLK + 2]
    if S[$BLK + 4] > 0 then e = e + S[$BLK + 4] + $HALF_OPEN_MEMORY end
    if e > dl then dl = e end
  end
  if leases_new or (S[$NL] > 0 and S[$MX] > S[$LK]) then
    S[$LK] = S[$MX] + $SLACK_US
    call('PEXPIRE', KEYS[$K_LEASES], ceil((S[$LK] - NOW) / 1000))
  end
  if tickets_new or (S[$NT] > 0 and S[$MX] > S[$TK]) then
    S[$TK] = S[$MX] + $SLACK_US
    local ttl = ceil((S[$TK] - NOW) / 1000)
    call('PEXPIRE', KEYS[$K_TICKETS], ttl)
    call('PEXPIRE', KEYS[$K_TEXP], ttl)
    call('PEXPIRE', KEYS[$K_TAT], ttl)
  end
  call('SET', KEYS[$K_STATE], spack('<B$STATE_FMT', $STATE_VERSION, unpack(S, 1, $NSTATE)), 'PX', ceil((dl - NOW + $SLACK_US) / 1000))
end

-- block_end is when a block stops mattering: its end, or for a half-open
-- block whose probe nobody claims, HalfOpenMemory after its half-open time.
local function block_end(u, h)
  if h > 0 then return u + h + $HALF_OPEN_MEMORY end
  return u
end

-- append_block appends a block for Go: reason, until, credential, detail,
-- half-open, probing. cb is a credential block {r, u, d, h, p}; without it
-- the scope's block is appended.
local function append_block(out, cb)
  local n = #out
  if cb then
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = cb[1], cb[2], 1, cb[3], cb[4], cb[5]
  else
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] =
      S[$BLK + 1], S[$BLK + 2], 0, S[$BLK + 3], S[$BLK + 4], S[$BLK + 5]
  end
  return out
end

-- append_lease appends a stored lease for Go.
local function append_lease(out, le)
  local n = #out
  for i = 1, 18 do out[n + i] = le[i] end
  return out
end
