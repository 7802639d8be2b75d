-- ops.lua: a batch of Reserve, Settle, Observe and Release operations on one scope,
-- decided one after the other exactly as if each ran alone
-- (MemoryStore.Reserve, Settle and Observe in capacity/memstore.go, whose
-- function names these keep): concurrent calls of one store share a round
-- trip, and the state is read and written once.
--
-- ARGV from 6: ticket grace (µs), the limits signature of the batch's
-- reserves, then the operations, each its code, its call ('' for an
-- observe) and OP_FIELDS[code] values in the layout of its kind
-- (LAYOUTS.reserve, .settle, .observe, .release: declared once in wire.go). A
-- reserve's limits signature '' is the batch's; a settle's attempt 0
-- matches no lease.
-- Reply: header('B'), then one result per operation; or header('A') alone
-- when more leases expired, or tickets lapsed, than one script reclaims
-- (WALKS.RECLAIM): it reclaimed that many and decided nothing, and Go sends
-- the batch again (Store.runWith).
-- A reserve's result:
--   {'G', room, probe, lease}       granted: a new lease, a repeat or a
--                                   claimed ticket (lease: its record line)
--   {'d', reason, binding, retry at, booked[, block x6 if blocked]}
--                                   booked: 0, or 1 (holds a ticket)
--   {'x', dimension, charge, capacity, key}  too large, never queued (key:
--                                   1 for the fairness key's daily cap)
--   {'s', live attempt}             an older attempt than the live lease's
-- A settle's: 'ok', or 'gone' when the scope's state did not exist.
-- An observe's: 'ok'. A release's: 'ok' (or 'gone', as a settle's).
--
-- A retime moves only the first RETIME_WINDOW tickets in their order
-- (rules.lua: retime); each other ticket keeps its time until a reserve
-- finds it among the first (S.retime_pending, S.window_current), so that no
-- operation walks the queue. A release, or a settle that refunds, does not
-- retime the tickets itself: it can only bring them forward, so they are
-- retimed once, before the batch's next reserve or observe, or a settle
-- that pushes them back, or at its end. retime derives every ticket's time
-- from the budget and the fair order, and its expiry from that time and the
-- time told, so the tickets end where each operation followed by its own
-- retime would leave them; but for a due ticket's kept time, which is why
-- such a move retimes at once while a ticket's time is past
-- (forward.defer).

-- This file's locals are a block's (do ... end, not indented): in the
-- function library the next file's start where they end, and a Lua
-- function holds at most 200 locals at a time.
do
-- GRACE and BATCH_LIMITS are the batch's ticket grace and limits
-- signature (entries.ops sets them).
local GRACE, BATCH_LIMITS

-- forward holds the batch's moves that only bring tickets forward (one
-- local: a Lua function has at most 200). forward.owed is set by a release
-- or a refund whose retime of the first tickets is still to run.
local forward = {}
resets[#resets + 1] = function() forward.owed = false end

-- forward.retimeDue moves the first tickets if a release or a refund left
-- them to be moved (MemoryStore.Release and Settle: retime), and, on a
-- retime-pending scope, those a reserve finds among the first once a
-- ticket left them (MemoryStore.Reserve).
function forward.retimeDue()
  if forward.owed or S.retime_pending == 1 and S.window_current == 0 then
    forward.owed = false
    retime()
  end
end

-- forward.defer leaves the retime that a release or a refund owes to
-- retimeDue: such a move only brings tickets forward, so one retime after
-- several gives each ticket the time a retime after each would. Not while
-- a ticket's time is past and the first tickets were not retimed since
-- the batch's last other operation (index.retimed): a due ticket keeps the
-- time it came due at only while every retime finds it due, and a time
-- kept from before the budget last fell (a claim ahead of it) may be pushed
-- back by the next retime and brought forward to now by the one after.
-- Then the move retimes at once, as MemoryStore.Release and Settle do; the
-- moves after it in the batch find the first tickets retimed and defer.
function forward.defer()
  if not index.retimed and S.tickets > 0 then
    flushTickets()
    if #call('ZRANGEBYSCORE', KEYS[K.TICKET_TIMES], '-inf', '(' .. NOW, 'LIMIT', 0, 1) > 0 then
      forward.owed = false
      retime()
      return
    end
  end
  forward.owed = true
end

-- deny returns a denial as the reply holds it (Redis only); blk is the
-- block in force ({} for none). A caller
-- whose ticket holds a bucket's capacity for retry waits for that time
-- alone; any other may come back on a release before retry, so releases
-- are announced until then (wake).
local function deny(reason, binding, retry, booked, blk)
  if not booked or binding == IN_FLIGHT - 1 then S.notify_until = max(S.notify_until, retry) end
  local r = {'d', reason, binding, retry, booked and 1 or 0}
  for _, v in ipairs(blk or {}) do r[#r + 1] = v end
  return r
end

-- granted returns a grant of lease le as the reply holds it (Redis only):
-- room is 1 when another call could
-- plausibly be granted now, so a woken waiter passes the wake-up on.
local function granted(le, probe)
  local room = slotFree(0)
  for d = 1, NB do
    if S.capacity[d] > 0 and S.level[d] < 1 then room = false end
  end
  return {'G', room and 1 or 0, probe and 1 or 0, encodeRecord(le, LEASE_FIELDS)}
end

-- claimProbe claims the probe of the scope's and its credential's due
-- half-open blocks, holding the others off for the half-open time. It
-- returns whether it claimed one and how to undo the scope's claim. The
-- credential's claim is written only on a grant (claimCredentialProbe).
local function claimProbe()
  local undo, probe = nil, false
  if S.block_half_open > 0 and S.block_until > 0 and S.block_until <= NOW then
    undo = {S.block_until, S.block_probing}
    S.block_until, S.block_probing = NOW + S.block_half_open, 1
    probe = true
  end
  if CB and CB[4] > 0 and CB[2] <= NOW then probe = true end
  return probe, undo
end

local function undoProbe(undo)
  if undo then S.block_until, S.block_probing = undo[1], undo[2] end
end

-- claimCredentialProbe writes the credential's claimed probe (Redis only:
-- the memory store's claimProbe writes it at once and undoes it).
local function claimCredentialProbe()
  if CB and CB[4] > 0 and CB[2] <= NOW then
    CB = {CB[1], NOW + CB[4], CB[3], CB[4], 1}
    local stop = CB[2] + CB[4] + HALF_OPEN_MEMORY
    write('SET', KEYS[K.CRED_BLOCK], cmsgpack.pack(CB), 'PX', ceil((stop - NOW + SLACK) / 1000))
  end
end

-- grantTicket grants the call holding a due ticket its lease: the ticket's
-- charges were taken when it was booked.
local function grantTicket(req)
  local tk = unbook(req.call)
  fair.serve(tk.class, tk.key, tk.rank, tk.start, tk.charge)
  req.class, req.key = tk.class, tk.key
  return grantLease(tk.charge, false, req, tk.weight)
end

-- claimTicket decides a call that holds ticket tk: it claims it at its
-- time without competing again.
local function claimTicket(req, tk)
  local beyond, last = beyondFirst(req.call)
  if (beyond or NOW < tk.at) and takeOverdue(req.call, tk) then
    tk = getTicket(req.call)
    beyond, last = beyondFirst(req.call)
  end
  if beyond then
    -- Further back than the first tickets, its time may be early: it is
    -- due no earlier than the last of them.
    local told = max(tk.at, last)
    if tk.told ~= told then
      tk.told = told
      putTicket(req.call, tk)
    end
    return deny(DENY.TICKET, 0, told, true)
  end
  if NOW < tk.at then
    if tk.told ~= tk.at then
      tk.told = tk.at
      putTicket(req.call, tk)
    end
    return deny(DENY.TICKET, 0, tk.at, true)
  end
  local fl = req.floor
  local w = ticketShortfall(tk, fl)
  if w > 0 then
    -- A higher class borrowed this ticket's capacity: it moves later.
    tk.at, tk.expires = NOW + w, NOW + w + GRACE
    tk.told = tk.at
    putTicket(req.call, tk)
    return deny(DENY.TICKET, 0, tk.at, true)
  end
  if not slotFree(fl) then return deny(DENY.CAPACITY, IN_FLIGHT - 1, nextSlotAt(), true) end
  return grantTicket(req)
end

-- dailyDenial returns the denial of a call that does not fit today's
-- counters (a spent day is not booked: it resets at its boundary), or nil.
-- A large call may use a fresh day.
local function dailyDenial(req, fl)
  for d = REQUESTS_PER_DAY, TOKENS_PER_DAY do
    local cap, x = S.capacity[d], req.charges[d]
    if cap > 0 then
      local allowance = max(cap - floor(fl * cap), x)
      if S.day_used[d] + x > allowance + EPSILON then
        return deny(DENY.DAILY_QUOTA, d - 1, S.day_end, false)
      end
    end
  end
  return nil
end

-- keyCapDenial returns the denial of a call its key's caps stop, or nil:
-- the day's tokens, then the key's share of every per-minute bucket,
-- where it waits without booking (memScope.keyCapDenial).
local function keyCapDenial(req)
  if req.share <= 0 and req.tokens_per_day <= 0 then return nil end
  local k = fair.refreshKey(req.key, req.share)
  if req.tokens_per_day > 0 and k.day_used + fair.keyTokens(req.charges) > req.tokens_per_day + EPSILON then
    return deny(DENY.KEY_QUOTA, TOKENS_PER_DAY - 1, k.day_end, false)
  end
  if req.share > 0 then
    local wait, binding = 0, -1
    for d = 1, NB do
      local cap, c = S.capacity[d], req.charges[d]
      if cap > 0 and c ~= 0 then
        local need = min(c, req.share * cap) - k.share[d]
        if need > EPSILON then
          local w = waitFor(need, req.share * rate(d))
          if w > wait or binding < 0 then wait, binding = w, d - 1 end
        end
      end
    end
    if binding >= 0 then return deny(DENY.KEY_CAP, binding, NOW + wait, false) end
  end
  return nil
end

-- bucketWait returns how long the call must wait for the per-minute
-- buckets (the longest wait binds) and the binding dimension (0-based, -1:
-- none).
local function bucketWait(req, fl)
  local wait, binding = 0, -1
  for d = 1, NB do
    local c = req.charges[d]
    if S.capacity[d] > 0 and c ~= 0 then
      local w = fitWait(d, c, fl, borrowable(d, req.rank))
      if w > 0 and (w > wait or binding < 0) then wait, binding = w, d - 1 end
    end
  end
  return wait, binding
end

-- admit decides a request that no block stops.
local function admit(req)
  local tk = getTicket(req.call)
  if tk then return claimTicket(req, tk) end

  -- The class's rule: its rank, and its floor, the part of every budget
  -- it may not consume. The key's caps bind first.
  local fl = req.floor
  local capped = keyCapDenial(req)
  if capped then return capped end
  local daily = dailyDenial(req, fl)
  if daily then return daily end

  local wait, binding = bucketWait(req, fl)
  if fair.gathering(req) then
    -- The first keyed calls on a scope at rest wait together.
    wait = max(wait, S.fair_start_until - NOW)
    if binding < 0 then binding = fair.gatherBinding(req.charges) end
  end
  if binding < 0 and slotFree(fl) then
    local borrowed = borrows(req.charges)
    local start = fair.place(req, req.charges)
    fair.serve(req.class, req.key, req.rank, start, req.charges)
    fair.chargeKey(req, req.charges)
    local le = grantLease(req.charges, true, req, req.weight)
    if borrowed then retime() end -- the lower ranks' tickets move back, in their order
    return le
  end

  local retry = NOW + wait
  if binding < 0 then binding, retry = IN_FLIGHT - 1, nextSlotAt() end
  if req.deadline > 0 and retry > req.deadline then return deny(DENY.DEADLINE, binding, retry, false) end
  if req.book and binding ~= IN_FLIGHT - 1 and wait < MAX_BLOCK then
    -- Book the future capacity now (x/time/rate's Reserve): the bucket
    -- goes negative, so later callers queue behind this one. A wait at
    -- the bound is not booked: the call asks again then.
    local start, finish = fair.place(req, req.charges)
    if soleFlow(req.class, req.key) and finish < S.last_finish[req.rank] then
      -- Every ticket booked is its own flow's, whose refunds moved the
      -- flow back (settleFlow): it goes after them, in the order its flow
      -- booked, and no ticket moves.
      start, finish = S.last_finish[req.rank], S.last_finish[req.rank] + (finish - start)
    end
    -- A ticket of its rank booked before it but finishing later, or any
    -- ticket of a lower rank, is due after it.
    local behind = finish < S.last_finish[req.rank] or bookedBelow(req.rank)
    local t = newRecord(TICKET_FIELDS)
    t.at, t.expires, t.class, t.told = retry, retry + GRACE, req.class, retry
    t.key, t.rank, t.floor, t.weight, t.start, t.finish = req.key, req.rank, req.floor, req.weight, start, finish
    for d = 1, ND do t.charge[d] = req.charges[d] end
    book(req.call, t)
    fair.chargeKey(req, req.charges)
    if behind then
      -- Its place in the fair order is ahead of tickets booked before it,
      -- which it pushes back: among the first tickets, they follow at once
      -- and it may be due at once; further back, none of the first moves.
      -- The others follow as they come among the first (beyondFirst).
      if index.place(req.call, req.rank) < RETIME_WINDOW then
        retime()
      else
        S.retime_pending = 1
      end
      retry = getTicket(req.call).at
      if retry <= NOW and not beyondFirst(req.call) and slotFree(fl) then return grantTicket(req) end
    end
    return deny(DENY.CAPACITY, binding, retry, true)
  end
  return deny(DENY.CAPACITY, binding, retry, false)
end

-- blockDenial returns the denial of a blocked scope, or nil: the scope's
-- block and its credential's; the later end binds.
local function blockDenial()
  local cb = CB and CB[2] > NOW and CB
  if activeBlock() then
    if cb and cb[2] > S.block_until then return deny(DENY.BLOCKED, 0, cb[2], false, blockReply(cb)) end
    return deny(DENY.BLOCKED, 0, S.block_until, false, blockReply())
  end
  if cb then return deny(DENY.BLOCKED, 0, cb[2], false, blockReply(cb)) end
  return nil
end

-- reserve decides one request (MemoryStore.Reserve).
local function reserve(req)
  setLimits(req.limits)
  advance()
  forward.retimeDue() -- a release or a refund moved only the first tickets
  -- A demand that can never fit is refused, never queued.
  for d = 1, ND do
    local most = admissible(d)
    if most > 0 and req.charges[d] > most then return {'x', d - 1, req.charges[d], fmt(most), 0} end
  end
  -- A call larger than its key's daily cap: no day admits it (keyTooLarge).
  local tok = fair.keyTokens(req.charges)
  if req.tokens_per_day > 0 and tok > req.tokens_per_day then
    return {'x', TOKENS_PER_DAY - 1, tok, fmt(req.tokens_per_day), 1}
  end
  -- Idempotency and attempt supersession.
  local le = getLease(req.call)
  if le then
    if le.attempt == req.attempt then return {'G', 0, 0, encodeRecord(le, LEASE_FIELDS)} end
    if le.attempt > req.attempt then return {'s', le.attempt} end
    lapse(req.call) -- its tokens stay spent
  end
  local blocked = blockDenial()
  if blocked then return blocked end
  -- A half-open block that has run out lets exactly one call through.
  local probe, undo = claimProbe()
  local res = admit(req)
  if res[1] == 'd' then
    undoProbe(undo)
    return res
  end
  if probe then claimCredentialProbe() end
  return granted(res, probe)
end

-- settle ends a lease with its final charges (MemoryStore.Settle): delta is
-- final (never negative) minus reserved. On a scope whose state did not
-- exist it does nothing; a lease settles once.
local function settle(c, attempt, delta, lease)
  if not LOADED then return 'gone' end
  advance()
  delta = boundDebt(delta)
  local le = getLease(c)
  if le and le.attempt == attempt then
    dropLease(c)
  elseif takeLapsed(c .. '#' .. attempt) then
    -- The lease expired or was superseded: its reservation stays spent;
    -- only debt applies, once.
    for d = 1, ND do delta[d] = max(delta[d], 0) end
  else
    return 'ok' -- settled or released already (once only), or unknown
  end
  local moves = chargeMovesTickets(delta)
  charge(delta)
  dispatched(delta)
  local final = {}
  for d = 1, ND do final[d] = (lease.reserved[d] or 0) + delta[d] end
  fair.settleFlow(lease.class, lease.key, lease.weight, lease.reserved, final, lease.granted_at)
  local back = false
  for d = 1, NB do back = back or delta[d] > 0 end
  if moves and back then
    -- A debt: the first tickets may be due later, at once.
    if forward.owed then forward.retimeDue() end
    retime()
  elseif moves then
    forward.defer() -- a refund only brings tickets forward
  end
  wake()
  return 'ok'
end

-- reserveOp reads the reserve at ARGV[i] (LAYOUTS.reserve; Redis only, as
-- the rest of this file below).
local function reserveOp(c, i)
  local m = readLayout(LAYOUTS.reserve, ARGV, i)
  local req = {
    call = c, attempt = m.attempt, class = m.class, charges = m.charges,
    ttl = m.ttl, deadline = m.deadline, book = m.book == 1, since = m.since,
    rank = m.rank, floor = m.floor, weight = m.weight, key = m.key,
    share = m.share, tokens_per_day = m.tokens_per_day, fair_start = m.fair_start, limits = m.limits,
  }
  if req.limits == '' then req.limits = BATCH_LIMITS end
  BOUND1, BOUND2 = m.day_boundary, m.next_boundary
  return req
end

-- observeOp reads the observation at ARGV[i] (LAYOUTS.observe).
local function observeOp(i)
  local m = readLayout(LAYOUTS.observe, ARGV, i)
  local o = {hasLimit = {}, limit = {}, hasRemaining = {}, remaining = {}, markValid = m.mark_valid == 1,
    mark = m.mark, seq = m.mark_seq, excluded = {}, inflight = m.inflight}
  for d = 1, NB do
    local b = DIMENSIONS[d]
    o.hasLimit[d], o.limit[d] = m['has_limit.' .. b] == 1, m['limit.' .. b]
    o.hasRemaining[d], o.remaining[d] = m['has_remaining.' .. b] == 1, m['remaining.' .. b]
    o.excluded[d] = m.excluded[d] == 1
  end
  BOUND1, BOUND2 = m.day_boundary, m.next_boundary
  return o
end

-- forward.release releases call c's lease with id, or its ticket when id
-- is '' (MemoryStore.Release), refunding what it holds; the tickets'
-- retime is left to retimeDue.
function forward.release(c, id)
  advance()
  if id == '' then
    local tk = unbook(c)
    if tk then
      refund(tk.charge)
      fair.unplace(tk)
      fair.refundKey(tk)
      forward.defer()
      wake()
    end
    return 'ok'
  end
  local le = getLease(c)
  if le and c .. '#' .. le.attempt == id then
    dropLease(c)
    refund(le.charge)
    fair.settleFlow(le.class, le.key, le.weight, le.charge, zeros(ND), le.granted_at)
    forward.defer()
    wake()
  end
  return 'ok'
end

-- run decides the operation with code at ARGV[i] and returns its result.
local function run(code, c, i)
  -- A reserve or an observe may leave a kept time early without a retime
  -- (forward.defer).
  if code ~= OP.RELEASE and code ~= OP.SETTLE then index.retimed = false end
  if code == OP.RELEASE then
    local m = readLayout(LAYOUTS.release, ARGV, i)
    BOUND1, BOUND2 = m.day_boundary, m.next_boundary
    return forward.release(c, m.id)
  end
  if code == OP.RESERVE then
    local res = reserve(reserveOp(c, i))
    LOADED = true
    return res
  end
  if code == OP.SETTLE then
    local m = readLayout(LAYOUTS.settle, ARGV, i)
    BOUND1, BOUND2 = m.day_boundary, m.next_boundary
    local r = m.reserved
    local lease = {class = m.class, key = m.key, weight = m.weight, reserved = {r[1], r[2], r[3], r[4], 0, 0, 0},
      granted_at = m.granted_at}
    return settle(c, m.attempt, m.delta, lease)
  end
  advance()
  if forward.owed then forward.retimeDue() end
  observe(observeOp(i))
  LOADED = true
  return 'ok'
end

-- entries.ops runs a batch: keys and args are the script's KEYS and ARGV.
function entries.ops(keys, args)
  begin(keys, args)
  GRACE, BATCH_LIMITS = tonumber(ARGV[6]), ARGV[7]
  -- One pass checks the operations; a reserve or an observe creates the
  -- scope's state.
  local create, i = false, 8
  while ARGV[i] do
    local code = tonumber(ARGV[i])
    if not OP_FIELDS[code] or not ARGV[i + 1 + OP_FIELDS[code]] then
      return redis.error_reply('tollgate: malformed operation at argument ' .. i)
    end
    create = create or code == OP.RESERVE or code == OP.OBSERVE
    i = i + 2 + OP_FIELDS[code]
  end

  if not load(create) then
    -- Nothing to settle: the scope's state is gone (expired or lost).
    local out = header('B')
    i = 8
    while ARGV[i] do
      out[#out + 1] = 'gone'
      i = i + 2 + OP_FIELDS[tonumber(ARGV[i])]
    end
    return out
  end
  S.ticket_grace = GRACE
  if index.reclaimDue() then
    -- More expired than one script reclaims: reclaim some, decide nothing.
    advance()
    save()
    return header('A')
  end
  local results = {}
  i = 8
  while ARGV[i] do
    local code = tonumber(ARGV[i])
    results[#results + 1] = run(code, ARGV[i + 1], i + 2)
    i = i + 2 + OP_FIELDS[code]
  end
  if forward.owed then forward.retimeDue() end
  save()
  local out = header('B')
  for _, r in ipairs(results) do out[#out + 1] = r end
  return out
end
end

if EVAL_KEYS then return entries.ops(EVAL_KEYS, EVAL_ARGV) end
