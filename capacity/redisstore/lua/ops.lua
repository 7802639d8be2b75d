-- ops.lua: a batch of Reserve, Settle and Observe operations on one scope,
-- decided one after the other exactly as if each ran alone
-- (MemoryStore.Reserve, Settle, Observe): concurrent calls of one store
-- share a round trip and the state is read and written once.
-- ARGV from 6: ticket grace, the limits signature of the batch's reserves
-- (''), then the operations, each a call ('' for an observe) and its
-- numbers, told apart by the numbers' length (each argument costs Redis a
-- string):
--   reserve (15 numbers): day boundary, next boundary, attempt, class,
--       charges x7, ttl, deadline (0: none), book (1), since (0: none);
--       with a 16th number (0), a limits signature of its own follows
--   settle (10 numbers): day boundary, next boundary, attempt (0: matches
--       no lease), final charges minus reserved x7 (in-flight 0)
--   observe (23 numbers): day boundary, next boundary, for each bucket d:
--       has limit, limit, has remaining, remaining; mark valid, mark x4
-- Numbers are one argument of little-endian doubles (Go's numbers type),
-- read with one struct.unpack: tonumber of each costs far more.
-- Reply: {'B', now, epoch, reset, freed, granted x7, result...}, one result
-- per operation; granted is the scope's grant history (S[G]) before the
-- first operation, from which Go follows it through the batch (each charge
-- adds its positive parts: a fresh grant's, a new ticket's, a settle's).
-- A reserve's result:
--   'g' room probe                        a fresh grant: one of 'g00' 'g10'
--                                         'g01' 'g11' (a constant: no string
--                                         to build); the lease is the request's,
--                                         expiring at now + ttl, its mark Go's
--   {'G', room, probe, lease x18}         a stored lease: a repeat or a claimed ticket
--   {'d', reason, binding, retry at, booked[, block x6 if blocked]}
--                                         booked: 0, 1 (holds a ticket) or 2
--                                         (booked one now: charged)
--   {'x', dimension, charge, capacity}    too large
--   {'s', live attempt}                   stale attempt
-- A settle's: 'ok', or 'gone' when the scope's state did not exist and
-- nothing was applied (a string).
-- An observe's: 'ok'.

local GRACE = tonumber(ARGV[6])
local BATCH_SIG = ARGV[7]
local unpack_numbers = struct.unpack
local LEASES_NEW, TICKETS_NEW = false, false

-- The operation being decided.
local CALL, ATTEMPT, CLASS, TTL, DEADLINE, BOOK, SINCE
local C = {}
local UNDO_SCOPE, PROBE, CLAIM_CRED
-- A fresh grant's result by room * 2 + probe + 1.
local GRANTED = {'g00', 'g01', 'g10', 'g11'}

-- @functions

-- install_limits installs a request's limits (memScope.setLimits): a new
-- scope starts each bucket at its burst capacity; a changed limit keeps
-- levels, clamped.
local function install_limits(sig)
  -- version|rpm|itpm|otpm|tpm|rpd|tpd|inflight|burst ns|burst s|token burst|margin|
  -- zone|offset|zone offset|standard floor|bulk floor|aging ns
  local f, pos = {}, 1
  while true do
    local j = string.find(sig, '|', pos, true)
    if not j then
      f[#f + 1] = string.sub(sig, pos)
      break
    end
    f[#f + 1] = string.sub(sig, pos, j - 1)
    pos = j + 1
  end
  for d = 1, $ND do S[$L + d] = tonumber(f[1 + d]) end
  S[$BURST], S[$TBURST], S[$MARGIN] = tonumber(f[10]), tonumber(f[11]), tonumber(f[12])
  S[$SF], S[$BF], S[$AG] = tonumber(f[16]), tonumber(f[17]), tonumber(f[18]) / 1000
  local first = S[$STARTED] == 0
  S[$STARTED], S[$SIG] = 1, sig
  ADVANCED = false
  recompute()
  if first then
    S[$LAST] = NOW
    for d = 1, $NB do S[$LV + d] = S[$CAP + d] end
    S[$DE] = next_boundary()
  else
    for d = 1, $NB do
      if S[$CAP + d] > 0 then S[$LV + d] = min(S[$LV + d], S[$CAP + d]) end
    end
  end
end

-- borrowable is what a call of class c may take, in bucket d, from what
-- lower classes booked: their tickets are late by as much.
local function borrowable(d, c)
  if not class_rules() then return 0 end
  local sum, r = 0, class_rank(c)
  for _, lower in ipairs({1, 0, 2}) do -- as memScope.borrowable sums
    if class_rank(lower) < r then sum = sum + S[$BC + lower * $NB + d] end
  end
  return sum
end

-- ticket_shortfall is how long (microseconds) a due ticket must still wait
-- because a higher class borrowed its capacity: the provider's bucket,
-- level + booked, must hold its charges above its class's floor fl. Zero
-- without class rules.
local function ticket_shortfall(tk, fl)
  if not class_rules() then return 0 end
  local w = 0
  for d = 1, $NB do
    local cap, c = S[$CAP + d], tk[3 + d]
    if cap > 0 and c ~= 0 then
      local short = min(c + fl * cap, cap) - (S[$LV + d] + S[$BK + d])
      if short > $EPS then
        -- In nanoseconds first, as memScope does, then up to the microsecond.
        w = max(w, ceil(ceil(short / S[$RATE + d] * 1e9) / 1000))
      end
    end
  end
  return w
end

-- next_slot_at is the latest time a slot frees without any settle: the
-- earliest live lease expiry.
local function next_slot_at()
  local t = scan_leases()
  if t == 0 then return NOW end
  return t
end

-- deny returns a denial; blk is a credential block, false for the scope's
-- block, nil for none. The caller may wait until retry: releases are
-- announced until then.
local function deny(reason, binding, retry, booked, blk)
  local S = S -- registers, not upvalues: this is hot
  if retry > S[$WD] then S[$WD] = retry end
  if UNDO_SCOPE then
    for i = 1, 5 do S[$BLK + i] = UNDO_SCOPE[i] end
  end
  local r = {'d', reason, binding, retry, booked and 1 or 0}
  if blk ~= nil then append_block(r, blk or nil) end
  return r
end

-- grant stores the lease of CALL with charges c (at c[off + 1 .. off + 7]).
local function grant(c, off)
  local S = S -- registers, not upvalues: this is hot
  if S[$NL] == 0 then LEASES_NEW = true end
  local ex = NOW + TTL
  -- Stored encoded, as flush_leases writes it: no table to build.
  RAW[CALL] = spack(LEASE_FMT, ATTEMPT, CLASS, NOW, ex,
    c[off + 1], c[off + 2], c[off + 3], c[off + 4], c[off + 5], c[off + 6], c[off + 7],
    S[$G + 1], S[$G + 2], S[$G + 3], S[$G + 4], S[$G + 5], S[$G + 6], S[$G + 7])
  LEASES[CALL], DIRTY[CALL] = nil, true
  S[$NL] = S[$NL] + 1
  -- note_expiry(ex, $NE), inline: this is hot.
  local ne = S[$NE]
  if ne == 0 or ex < ne then
    S[$NE] = ex
    if ex <= NOW then ADVANCED = false end
  end
  if ex > S[$MX] then S[$MX] = ex end
  return ex
end

-- grant_flags returns, after a grant, room (1 when another call could
-- plausibly be granted now, so a woken waiter passes the wake-up on) and
-- probe (1 when the grant is a half-open block's probe), and claims a
-- credential's probe.
local function grant_flags()
  local S = S -- registers, not upvalues: this is hot
  if CLAIM_CRED then
    local b = {CB[1], NOW + CB[4], CB[3], CB[4], 1}
    CB = b
    call('SET', KEYS[$K_CB], mp_pack(b), 'PX', ceil((block_end(b[2], b[4]) - NOW + $SLACK_US) / 1000))
  end
  local room = slot_free(0)
  for d = 1, $NB do -- unroll
    if S[$CAP + d] > 0 and S[$LV + d] < 1 then room = false end
  end
  return room and 1 or 0, PROBE and 1 or 0
end

-- reserve decides the reserve operation at ARGV[i ..]; own is whether it
-- carries a limits signature of its own.
local function reserve(i, own)
  local S, C, NOW = S, C, NOW -- registers, not upvalues: this is hot
  local sig = own and ARGV[i + 2] or BATCH_SIG
  CALL = ARGV[i]
  BOUND1, BOUND2, ATTEMPT, CLASS, C[1], C[2], C[3], C[4], C[5], C[6], C[7], TTL, DEADLINE, BOOK, SINCE =
    unpack_numbers('<ddddddddddddddd', ARGV[i + 1])
  BOOK = BOOK == 1
  UNDO_SCOPE, PROBE, CLAIM_CRED = nil, false, false

  if S[$STARTED] == 0 or S[$SIG] ~= sig then install_limits(sig) end
  if not ADVANCED then advance() end

  -- A demand that can never fit is refused, never queued.
  for d = 1, $ND do -- unroll
    local c = S[$CAP + d]
    if c > 0 and C[d] > c then return {'x', d - 1, C[d], fstr(c)} end
  end

  -- Idempotency and attempt supersession. A call the batch prefetched
  -- without a lease (RAW false) has none: a grant in the batch would have
  -- stored one there.
  if RAW[CALL] ~= false then
    local le = get_lease(CALL)
    if le then
      if le[1] == ATTEMPT then return append_lease({'G', 0, 0}, le) end
      if le[1] > ATTEMPT then return {'s', le[1]} end
      drop_lease(CALL) -- tokens stay spent
    end
  end

  -- Blocks: the scope's and its credential's; the later end binds.
  local cb = CB and CB[2] > NOW and CB
  if S[$BLK] == 1 and S[$BLK + 2] > NOW then
    if cb and cb[2] > S[$BLK + 2] then return deny($DENY_BLOCKED, 0, cb[2], false, cb) end
    return deny($DENY_BLOCKED, 0, S[$BLK + 2], false, false)
  end
  if cb then return deny($DENY_BLOCKED, 0, cb[2], false, cb) end

  -- A half-open block that has run out lets exactly one call through: the
  -- probe holds the others off for the half-open time. A denied call gives
  -- it back (the credential's is written only on a grant).
  if S[$BLK] == 1 and S[$BLK + 4] > 0 and S[$BLK + 2] <= NOW then
    UNDO_SCOPE = {S[$BLK + 1], S[$BLK + 2], S[$BLK + 3], S[$BLK + 4], S[$BLK + 5]}
    S[$BLK + 2], S[$BLK + 5] = NOW + S[$BLK + 4], 1
    PROBE = true
  end
  if CB and CB[4] > 0 and CB[2] <= NOW then CLAIM_CRED, PROBE = true, true end

  -- A call holding a ticket claims it at its time without competing again.
  local tk = S[$NT] > 0 and get_ticket(CALL)
  if tk then
    if NOW < tk[1] then return deny($DENY_TICKET, 0, tk[1], true) end
    local fl = class_floor(effective_class(tk[3], SINCE))
    local w = ticket_shortfall(tk, fl)
    if w > 0 then
      -- A higher class borrowed this ticket's capacity: it moves later.
      tk[1], tk[2] = NOW + w, NOW + w + GRACE
      call('HSET', KEYS[$K_TICKETS], CALL, mp_pack(tk))
      call('ZADD', KEYS[$K_TEXP], tk[2], CALL)
      call('ZADD', KEYS[$K_TAT], tk[1], CALL)
      note_expiry(tk[2], $TE)
      return deny($DENY_TICKET, 0, tk[1], true)
    end
    if not slot_free(fl) then return deny($DENY_CAPACITY, $INFLIGHT, next_slot_at(), true) end
    unbook(CALL)
    grant(tk, 3)
    local room, probe = grant_flags()
    return append_lease({'G', room, probe}, get_lease(CALL))
  end

  -- The class's floor: the part of every budget it may not consume.
  local class, fl = CLASS, 0
  if S[$AG] > 0 or S[$SF] > 0 or S[$BF] > 0 then -- (no class rules: no calls)
    class = effective_class(CLASS, SINCE)
    fl = class_floor(class)
  end

  -- Per-day counters: a spent day is not booked; it resets at its boundary.
  -- A large call may use a fresh day.
  for j = 1, 2 do -- unroll
    local c = S[$CAP + $NB + j]
    if c > 0 then
      local x = C[$NB + j]
      local room = c
      if fl > 0 then room = c - floor(fl * c) end
      if room < x then room = x end
      if S[$DU + j] + x > room + $EPS then
        return deny($DENY_DAILY, $NB + j - 1, S[$DE], false)
      end
    end
  end

  -- Per-minute buckets (memScope.fitWait): the longest wait binds. A call
  -- leaves its floor untouched and may borrow what lower classes booked.
  -- While tickets hold part of a bucket, a charge larger than the rest waits
  -- at least until the last of them is due.
  local wait, binding = 0, -1
  local rules = S[$SF] > 0 or S[$BF] > 0 -- class_rules()
  local plain = fl == 0 and not rules -- no floor, nothing to borrow
  for d = 1, $NB do -- unroll
    local cap, c = S[$CAP + d], C[d]
    if cap > 0 and c ~= 0 then
      -- The level must hold the charge (never above capacity: see above)
      -- plus the class's floor, less what it may borrow.
      local need, borrow = c - S[$LV + d], 0
      if not plain then
        borrow = rules and borrowable(d, class) or 0
        local want = c + fl * cap
        if want > cap then want = cap end
        need = want - S[$LV + d] - borrow
      end
      if need > $EPS then
        -- In nanoseconds first, as memScope.fitWait does (rounding float
        -- noise away), then up to the microsecond.
        local w = ceil(ceil(need / S[$RATE + d] * 1e9) / 1000)
        if c > cap - (S[$BK + d] - borrow) + $EPS and S[$NT] > 0 then
          local start, found = 0, false
          while not found do
            local ids = call('ZREVRANGE', KEYS[$K_TAT], start, start + 15, 'WITHSCORES')
            if #ids == 0 then break end
            for j = 1, #ids, 2 do
              local t = get_ticket(ids[j])
              if t and t[3 + d] > 0 then
                local at = tonumber(ids[j + 1])
                if at - NOW > w then w = at - NOW end
                found = true
                break
              end
            end
            start = start + 16
          end
        end
        if w > 0 and (w > wait or binding < 0) then wait, binding = w, d - 1 end
      end
    end
  end
  if binding < 0 and slot_free(fl) then
    charge(C)
    grant(C, 0)
    local room, probe = grant_flags()
    return GRANTED[room * 2 + probe + 1]
  end

  local retry = NOW + wait
  if binding < 0 then
    binding = $INFLIGHT
    retry = next_slot_at()
  end
  if DEADLINE > 0 and retry > DEADLINE then
    return deny($DENY_DEADLINE, binding, retry, false)
  end
  if BOOK and binding ~= $INFLIGHT then
    -- Book the future capacity now: the bucket goes negative, so later
    -- callers queue behind this one.
    charge(C)
    local bc = $BC + class_index(CLASS) * $NB
    for d = 1, $NB do
      S[$BK + d] = S[$BK + d] + C[d]
      S[bc + d] = S[bc + d] + C[d]
    end
    local t = {retry, retry + GRACE, CLASS}
    for d = 1, $ND do t[3 + d] = C[d] end
    if S[$NT] == 0 then TICKETS_NEW = true end
    call('HSET', KEYS[$K_TICKETS], CALL, mp_pack(t))
    call('ZADD', KEYS[$K_TEXP], t[2], CALL)
    call('ZADD', KEYS[$K_TAT], retry, CALL)
    S[$NT] = S[$NT] + 1
    note_expiry(t[2], $TE)
    local r = deny($DENY_CAPACITY, binding, retry, true)
    r[5] = 2 -- booked now: charged
    return r
  end
  return deny($DENY_CAPACITY, binding, retry, false)
end

-- settle decides the settle operation at ARGV[i + 1 ..]. On a scope whose
-- state did not exist (before an earlier reserve of the batch made it) it
-- does nothing, as MemoryStore.Settle on an unknown scope.
local function settle(i)
  local S, C = S, C -- registers, not upvalues: this is hot
  if not LOADED then return 'gone' end
  local c = ARGV[i]
  local attempt
  BOUND1, BOUND2, attempt, C[1], C[2], C[3], C[4], C[5], C[6], C[7] = unpack_numbers('<dddddddddd', ARGV[i + 1])
  if not ADVANCED then advance() end
  -- lease_attempt(c), for a prefetched lease not yet decoded: this is hot.
  local v, a = LEASES[c] == nil and RAW[c], nil
  if v then a = sunpack('<d', v) else a = lease_attempt(c) end
  if a and a == attempt then
    -- drop_lease(c), knowing the lease is there: this is hot.
    LEASES[c], DIRTY[c] = false, true
    S[$NL] = S[$NL] - 1
  else
    -- The lease expired: its reservation stays spent; only debt applies.
    for d = 1, $ND do -- unroll
      if C[d] < 0 then C[d] = 0 end
    end
  end
  charge(C)
  if NOW <= S[$WD] then publish() end -- (a waiter may be waiting)
  return 'ok'
end

-- observe applies the observation at ARGV[i + 1] (memScope.observe); the
-- scope's state exists (an observe creates it, as MemoryStore.Observe).
local function observe(i)
  local S = S
  local o = {unpack_numbers('<ddddddddddddddddddddddd', ARGV[i + 1])}
  BOUND1, BOUND2 = o[1], o[2]
  if not ADVANCED then advance() end
  -- A reported limit below the configured one lowers it; a report at or
  -- above it lifts an earlier lowering. Reset values are never used as rates.
  local changed, reported = false, false
  for d = 1, $NB do
    local j = 2 + (d - 1) * 4
    local lim = o[j + 2]
    if o[j + 1] == 1 and lim > 0 then
      local cfg = S[$L + d]
      if cfg == 0 or lim < cfg then
        reported = true
        if S[$LO + d] ~= lim then
          S[$LO + d] = lim
          changed = true
        end
      elseif S[$LO + d] ~= 0 then
        S[$LO + d] = 0
        changed = true
      end
    end
  end
  local lowered = false
  for d = 1, $NB do
    if S[$LO + d] ~= 0 then lowered = true end
  end
  if not lowered then
    S[$LOM] = 0
  elseif reported then
    S[$LOM] = NOW + $LOWERED_MEMORY
  end
  if changed then
    recompute()
    for d = 1, $NB do
      if S[$CAP + d] > 0 then S[$LV + d] = min(S[$LV + d], S[$CAP + d]) end
    end
  end
  -- The level becomes at most the reported remaining minus what was
  -- granted after the observed request left.
  local mark_valid = o[19] == 1
  local inflight = nil
  for d = 1, $NB do
    local j = 2 + (d - 1) * 4
    if o[j + 3] == 1 and S[$CAP + d] > 0 then
      local since
      if mark_valid then
        since = max(0, S[$G + d] - o[19 + d])
      else
        -- Unknown send time: assume everything in flight left after it.
        if not inflight then
          inflight = {0, 0, 0, 0}
          if S[$NL] > 0 then
            flush_leases()
            for _, v in ipairs(call('HVALS', KEYS[$K_LEASES])) do
              local le = decode_lease(v)
              for e = 1, $NB do inflight[e] = inflight[e] + le[4 + e] end
            end
          end
        end
        since = inflight[d]
      end
      S[$LV + d] = min(S[$LV + d], o[j + 4] - since)
    end
  end
  return 'ok'
end

-- One pass checks the operations and collects their calls.
local calls, create = {}, false
local i = 8
while ARGV[i] do
  local n = ARGV[i + 1] and #ARGV[i + 1]
  if n == 120 or n == 128 or n == 184 then
    create = true -- a reserve or an observe creates the scope's state
  elseif n ~= 80 then
    return redis.error_reply('tollgate: malformed operation at argument ' .. i)
  end
  if n ~= 184 then calls[#calls + 1] = ARGV[i] end
  if n == 128 then i = i + 3 else i = i + 2 end
end

-- A settle's result is a string, not a table: one less table to
-- build and to convert to a reply.
local out = {'B', NOW, '', 0, 0, 0, 0, 0, 0, 0, 0, 0}
if not load(create) then
  -- Nothing to settle: the scope's state is gone (expired or lost).
  for j = 1, #calls do out[12 + j] = 'gone' end
  out[3], out[4] = EP, RESET
  return out
end
for d = 1, $ND do out[5 + d] = S[$G + d] end
prefetch_leases(calls)
i = 8
while ARGV[i] do
  local n = #ARGV[i + 1]
  if n == 80 then
    out[#out + 1] = settle(i)
    i = i + 2
  elseif n == 184 then
    out[#out + 1] = observe(i)
    LOADED = true
    i = i + 2
  else
    out[#out + 1] = reserve(i, n == 128)
    LOADED = true
    if n == 128 then i = i + 3 else i = i + 2 end
  end
end
save(LEASES_NEW, TICKETS_NEW)
out[3], out[4], out[5] = EP, RESET, FREED
return out
