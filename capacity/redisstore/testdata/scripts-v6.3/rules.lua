-- rules.lua: the admission rules on a scope's state (state.lua), each a
-- transcription of the function of capacity/memscope.go or
-- capacity/limits.go with the same name.

-- Budgets -------------------------------------------------------------------

-- charge takes c from every budget (c may be negative: a refund, capped at
-- capacity, or at the level a provider's report raised it to).
charge = function(c)
  for d = 1, NB do
    if c[d] ~= 0 and S.capacity[d] > 0 then
      local top = max(S.capacity[d] - S.booked[d], S.level[d])
      S.level[d] = min(top, S.level[d] - c[d])
    end
  end
  for d = REQUESTS_PER_DAY, TOKENS_PER_DAY do
    if S.capacity[d] > 0 then S.day_used[d] = max(0, S.day_used[d] + c[d]) end
  end
end

-- dispatched records c in the grant history (Mark): a lease granted (fresh
-- or a claimed ticket) or a settle's debt; never a booking.
dispatched = function(c)
  for d = 1, ND do
    if c[d] > 0 then S.granted[d] = S.granted[d] + c[d] end
  end
end

-- boundDebt bounds what a settle may charge beyond its reservation: no call
-- uses more than the whole limit of a dimension, whatever its usage says.
local function boundDebt(delta)
  for d = 1, ND do
    if S.limit[d] > 0 and delta[d] > S.limit[d] then delta[d] = S.limit[d] end
  end
  return delta
end

-- refund gives back charges c but the in-flight slot.
local function refund(c)
  local neg = {}
  for d = 1, ND do neg[d] = -c[d] end
  neg[IN_FLIGHT] = 0
  charge(neg)
end

-- borrowable is what a call of rank r may take, in bucket d, from the
-- capacity that lower ranks booked: their tickets are late by as much.
local function borrowable(d, r)
  local sum = 0
  for lower = 0, r - 1 do sum = sum + S.booked_rank[lower][d] end
  return sum
end

-- borrows reports whether a grant of c takes capacity that tickets
-- booked: more than some bucket's level (memScope.borrows).
local function borrows(c)
  for d = 1, NB do
    if S.capacity[d] > 0 and S.booked[d] > 0 and c[d] > S.level[d] + EPSILON then return true end
  end
  return false
end

-- bookedBelow reports whether tickets of ranks below r hold capacity: a
-- ticket of rank r booked now is due before them.
local function bookedBelow(r)
  for lower = 0, r - 1 do
    for d = 1, NB do
      if S.booked_rank[lower][d] > 0 then return true end
    end
  end
  return false
end

-- admissible is the largest charge a call may have in dimension d (0:
-- any), from the configured limits (Limits.Admissible): what a provider
-- reported never makes a call inadmissible.
local function admissible(d)
  local cap = S.configured[d]
  if cap == 0 then return 0 end
  if d <= NB then return max(cap, S.limit[d]) end
  return cap
end

-- slotFree reports whether a call whose class may not consume fl (a
-- fraction) of the in-flight slots finds one free.
local function slotFree(fl)
  local cap = S.capacity[IN_FLIGHT]
  return cap == 0 or S.leases < cap - floor(fl * cap)
end

-- rate is bucket d's refill rate now: its budget's, less the cut
-- (memScope.rate).
local function rate(d) return S.rate[d] * (1 - S.cut) end

-- waitFor is how long (µs) a bucket refilling at rate takes to gain need:
-- in nanoseconds first, as memScope computes a time.Duration, then up to
-- the microsecond; at most MAX_BLOCK (memScope's waitFor).
local function waitFor(need, perSecond)
  local w = ceil(ceil(need / perSecond * 1e9) / 1000)
  if w >= MAX_BLOCK or w ~= w then return MAX_BLOCK end -- NaN too
  return w
end

-- Fair queuing ------------------------------------------------------------
-- (capacity/memfair.go.) Flows live in a hash (class/key -> "rank finish
-- granted"), read and written through a cache like the leases: FLOWS[id]
-- is {rank, finish, granted}, or false for none. Key caps live in a hash
-- (key -> "frac last day_used day_end share x NB").

-- fair holds the fair-queuing functions (one local: a script has at most
-- 200).
local fair = {}
local FLOWS, FLOWS_DIRTY
-- PAST is S.past read: PAST[rank] lists {t, v} points, oldest first.
local PAST
-- KEY_CAPS caches the key caps read or written (key -> counters, or false).
local KEY_CAPS
resets[#resets + 1] = function() FLOWS, FLOWS_DIRTY, PAST, KEY_CAPS = {}, {}, nil, {} end

-- keyTokens is a charge's tokens, what it costs a key's daily token cap:
-- its combined tokens, or input plus output where no combined charge is
-- made (capacity.chargedTokens).
function fair.keyTokens(c)
  if c[TOKENS] ~= 0 then return c[TOKENS] end
  return c[INPUT_TOKENS] + c[OUTPUT_TOKENS]
end

-- fairCost is what a charge costs in fair queuing: its tokens, or its
-- requests on a charge of no tokens (capacity.fairCost).
function fair.fairCost(c)
  local tok = fair.keyTokens(c)
  if tok ~= 0 then return tok end
  return c[REQUESTS]
end

fair.flowID = flowID

-- decodeFlow reads a flow as the hash holds it: "rank finish granted".
function fair.decodeFlow(v)
  local n = {}
  for x in string.gmatch(v, '%S+') do n[#n + 1] = tonumber(x) or 0 end
  return {rank = n[1] or 0, finish = n[2] or 0, granted = n[3] or 0}
end

function fair.getFlow(id)
  local f = FLOWS[id]
  if f == nil then
    f = false
    if S.flows > 0 then
      local v = call('HGET', KEYS[K.FLOWS], id)
      if v then f = fair.decodeFlow(v) end
    end
    FLOWS[id] = f
  end
  return f
end

function fair.putFlow(id, f)
  if not fair.getFlow(id) then S.flows = S.flows + 1 end
  FLOWS[id], FLOWS_DIRTY[id] = f, true
end

flushFlows = function()
  for id in pairs(FLOWS_DIRTY) do
    local f = FLOWS[id]
    if f then
      write('HSET', KEYS[K.FLOWS], id, fmt(f.rank) .. ' ' .. fmt(f.finish) .. ' ' .. fmt(f.granted))
    else
      write('HDEL', KEYS[K.FLOWS], id)
    end
  end
  FLOWS_DIRTY = {}
end

-- allFlows returns every flow as {id, flow}, the cache over the hash (a
-- read-only script writes nothing).
function fair.allFlows()
  local out = {}
  if S.flows == 0 then return out end
  local all = call('HGETALL', KEYS[K.FLOWS])
  for i = 1, #all, 2 do fair.getFlow(all[i]) end
  for id, f in pairs(FLOWS) do
    if f then out[#out + 1] = {id, f} end
  end
  return out
end

-- forgetIdleFlows, once a scope holds WALKS.MAX_IDLE_FLOWS flows, looks at the
-- next WALKS.FLOWS_SCAN flows of the hash (HSCAN from S.flows_cursor,
-- wrapping around) and drops those not ahead of their rank's virtual time
-- (memScope.forgetIdleFlows): the flows stay bounded, and no placement
-- reads them all (until scripts 6.2 every placement did, past
-- WALKS.MAX_IDLE_FLOWS).
function fair.forgetIdleFlows()
  if S.flows < WALKS.MAX_IDLE_FLOWS then return end
  local cursor = S.flows_cursor
  if cursor == '' then cursor = '0' end
  local got = call('HSCAN', KEYS[K.FLOWS], cursor, 'COUNT', WALKS.FLOWS_SCAN)
  S.flows_cursor = got[1]
  for i = 1, #got[2], 2 do
    local id = got[2][i]
    if FLOWS[id] == nil then FLOWS[id] = fair.decodeFlow(got[2][i + 1]) end
    local f = FLOWS[id]
    if f and f.finish <= S.virtual[f.rank] then
      FLOWS[id], FLOWS_DIRTY[id] = false, true
      S.flows = S.flows - 1
    end
  end
end

-- past returns the log of each rank's virtual time (PAST), read from
-- S.past once.
function fair.past()
  if not PAST then
    PAST = {}
    for r = 0, NRANKS - 1 do PAST[r] = {} end
    local n = {}
    for x in string.gmatch(S.past, '%S+') do n[#n + 1] = tonumber(x) or 0 end
    for i = 1, #n - 2, 3 do
      local log = PAST[n[i]]
      if log then log[#log + 1] = {n[i + 1], n[i + 2]} end
    end
  end
  return PAST
end

-- logVirtual records rank's virtual time at NOW in its log, at most a
-- point every VIRTUAL_LOG_STEP (memScope.logVirtual).
function fair.logVirtual(rank)
  local log = fair.past()[rank]
  S.last_served[rank] = NOW
  if #log > 0 and NOW - log[#log][1] < VIRTUAL_LOG_STEP then return end
  if #log == VIRTUAL_LOG_LENGTH then table.remove(log, 1) end
  log[#log + 1] = {NOW, S.virtual[rank]}
  local out = {}
  for r = 0, NRANKS - 1 do
    for _, p in ipairs(PAST[r]) do out[#out + 1] = r .. ' ' .. fmt(p[1]) .. ' ' .. fmt(p[2]) end
  end
  S.past = table.concat(out, ' ')
end

-- virtualAt is rank's virtual time as it was at t (µs, 0: unknown)
-- (memScope.virtualAt).
function fair.virtualAt(rank, t)
  if t == 0 or t >= S.last_served[rank] then return S.virtual[rank] end -- the log unread
  local log = fair.past()[rank]
  if #log == 0 then return S.virtual[rank] end
  for i = #log, 1, -1 do
    if log[i][1] <= t then return log[i][2] end
  end
  return log[1][2]
end

-- place gives a call of req's flow its virtual start and finish, and moves
-- the flow's finish there: it starts at the flow's finish or at its rank's
-- virtual time when it was scheduled, whichever is later (memScope.place).
function fair.place(req, c)
  local id = fair.flowID(req.class, req.key)
  local f = fair.getFlow(id) or {rank = 0, finish = 0, granted = 0}
  local start = max(f.finish, fair.virtualAt(req.rank, req.since))
  local finish = start + fair.fairCost(c) / req.weight
  fair.putFlow(id, {rank = req.rank, finish = finish, granted = f.granted})
  fair.forgetIdleFlows()
  return start, finish
end

-- serve records that a call of flow (class, key) starting at start was
-- granted c.
function fair.serve(class, key, rank, start, c)
  S.virtual[rank] = start
  fair.logVirtual(rank)
  local id = fair.flowID(class, key)
  local f = fair.getFlow(id)
  if f then fair.putFlow(id, {rank = f.rank, finish = f.finish, granted = f.granted + fair.fairCost(c)}) end
end

-- unplace gives a booked ticket that was never served its place back: if
-- it is its flow's last, the flow finishes where it started. It returns
-- false when the flow finishes later (another ticket of it is booked after
-- it). With chained (a reclaim of tickets that lapsed together, in several
-- scripts: fair.unplaceAll), the flow then follows the links that earlier
-- scripts of the reclaim kept, as if their tickets were unplaced now.
function fair.unplace(tk, chained)
  local id = fair.flowID(tk.class, tk.key)
  local f = fair.getFlow(id)
  if not f then return true end
  if f.finish ~= tk.finish then return false end
  local finish = tk.start
  while chained do
    local link = id .. ' ' .. fmt(finish)
    local start = call('HGET', KEYS[K.LAPSING], link)
    if not start then break end
    write('HDEL', KEYS[K.LAPSING], link)
    finish = tonumber(start)
  end
  fair.putFlow(id, {rank = f.rank, finish = finish, granted = f.granted})
  return true
end

-- unplaceAll gives tickets that lapsed together ({call, ticket}) their
-- places back, the latest of a flow first, and their charges to their
-- keys' caps (memScope.unplaceAll). When more lapsed with them than one
-- script reclaims (more, or a reclaim already under way: S.lapsing), a
-- ticket that is not its flow's last is kept as a link, its flow and
-- finish to its start, in KEYS[K.LAPSING], for the script that unplaces
-- the flow's later ones: the flow ends where one unplaceAll of them all
-- would leave it, whichever script each was reclaimed in. The last script
-- of the reclaim deletes the links left.
function fair.unplaceAll(lapsed, more)
  table.sort(lapsed, function(a, b)
    if a[2].finish ~= b[2].finish then return a[2].finish > b[2].finish end
    return a[1] < b[1]
  end)
  local chained = more or S.lapsing == 1
  for _, e in ipairs(lapsed) do
    local tk = e[2]
    if not fair.unplace(tk, chained) and more and tk.start < tk.finish then
      write('HSET', KEYS[K.LAPSING], fair.flowID(tk.class, tk.key) .. ' ' .. fmt(tk.finish), fmt(tk.start))
      S.lapsing = 1
    end
    fair.refundKey(tk)
  end
  if not more and S.lapsing == 1 then
    write('DEL', KEYS[K.LAPSING])
    S.lapsing = 0
  end
end

-- gathering reports whether req, a keyed call, arrives while the first
-- keyed calls on the scope gather, opening the gathering if it is the
-- first since the scope was at rest (memScope.gathering).
function fair.gathering(req)
  if req.key == '' then return false end
  local d = req.fair_start
  if S.keyed == 0 then
    S.keyed = 1
    if d > 0 then S.fair_start_from, S.fair_start_until = NOW, NOW + d end
    return NOW < S.fair_start_until
  end
  if NOW < S.fair_start_until and d > 0 and not fair.getFlow(fair.flowID(req.class, req.key)) then
    S.fair_start_until = min(max(S.fair_start_until, NOW + d), S.fair_start_from + MAX_FAIR_START)
  end
  return NOW < S.fair_start_until
end

-- gatherBinding is the dimension (0-based) a gathering call waits on: the
-- first limited bucket it charges (-1: none).
function fair.gatherBinding(c)
  for d = 1, NB do
    if S.capacity[d] > 0 and c[d] > 0 then return d - 1 end
  end
  return -1
end

-- forgetIdle starts fair queuing afresh when the scope is idle: nothing
-- booked or in flight and every bucket full. Key caps are kept.
function fair.forgetIdle()
  if S.flows == 0 and S.keyed == 0 or S.tickets > 0 or S.leases > 0 then return end
  for d = 1, NB do
    if S.capacity[d] > 0 and S.level[d] < S.capacity[d] then return end
  end
  write('DEL', KEYS[K.FLOWS])
  FLOWS, FLOWS_DIRTY, S.flows, S.flows_cursor = {}, {}, 0, ''

  for r = 0, NRANKS - 1 do S.virtual[r], S.last_finish[r] = 0, 0 end
  S.past, PAST = '', nil
  S.keyed, S.fair_start_until, S.fair_start_from = 0, 0, 0
  for r = 0, NRANKS - 1 do S.last_served[r] = 0 end
end

-- getKey reads a key's cap counters (a copy), or nil.
function fair.getKey(key)
  local k = KEY_CAPS[key]
  if k == nil then
    k = false
    local v = S.keys_until > 0 and call('HGET', KEYS[K.KEY_CAPS], key)
    if v then
      local n = {}
      for x in string.gmatch(v, '%S+') do n[#n + 1] = tonumber(x) or 0 end
      k = {frac = n[1] or 0, last = n[2] or 0, day_used = n[3] or 0, day_end = n[4] or 0, share = {},
        day_start = n[5 + NB] or 0}
      for d = 1, NB do k.share[d] = n[4 + d] or 0 end
    end
    KEY_CAPS[key] = k
  end
  return k and copyField(k) or nil
end

-- putKey writes a key's cap counters; the state lives until they are at
-- rest (Redis only: keys_until).
function fair.putKey(key, k)
  local out = {fmt(k.frac), fmt(k.last), fmt(k.day_used), fmt(k.day_end)}
  local rest = NOW
  if k.day_used > 0 then rest = max(rest, k.day_end) end
  for d = 1, NB do
    out[#out + 1] = fmt(k.share[d])
    local top, r = k.frac * S.capacity[d], k.frac * rate(d)
    if k.share[d] < top and r > 0 then rest = max(rest, NOW + ceil((top - k.share[d]) / r * 1e6)) end
  end
  out[#out + 1] = fmt(k.day_start)
  write('HSET', KEYS[K.KEY_CAPS], key, table.concat(out, ' '))
  KEY_CAPS[key] = copyField(k)
  S.keys_until = max(S.keys_until, rest)
end

-- refreshKey refills key's share buckets to NOW and rolls its day window
-- (memScope.refreshKey); share is the key's Fairness.Share.
function fair.refreshKey(key, share)
  local k = fair.getKey(key)
  if not k then
    k = {frac = 0, last = NOW, day_used = 0, day_end = 0, day_start = 0, share = {}}
    for d = 1, NB do k.share[d] = share * S.capacity[d] end
  end
  local us = NOW - k.last
  if us > 0 then
    local sec = floor(us / 1e6)
    local dt = sec + (us - sec * 1e6) * 1000 / 1e9
    for d = 1, NB do
      local top = share * S.capacity[d]
      if k.share[d] < top then k.share[d] = min(top, k.share[d] + share * rate(d) * dt) end
    end
    k.last = NOW
  end
  if NOW >= k.day_end then k.day_used, k.day_end, k.day_start = 0, S.day_end, NOW end
  return k
end

-- chargeKeyState takes c from k's share buckets, if it has a share (a
-- refund if negative: up to the share's capacity), and day tokens from its
-- day counter (memScope.chargeKeyState).
function fair.chargeKeyState(k, c, day)
  if k.frac > 0 then
    for d = 1, NB do
      local top = max(k.frac * S.capacity[d], k.share[d])
      k.share[d] = min(top, k.share[d] - c[d])
    end
  end
  k.day_used = max(0, k.day_used + day)
  return k
end

-- chargeKey takes c from req's key caps (a grant or a booking).
function fair.chargeKey(req, c)
  if req.share <= 0 and req.tokens_per_day <= 0 then return end
  local k = fair.refreshKey(req.key, req.share)
  k.frac = req.share
  fair.putKey(req.key, fair.chargeKeyState(k, c, fair.keyTokens(c)))
end

-- refundKey gives a booked ticket that was never served back to its key's
-- caps.
function fair.refundKey(tk)
  local k = fair.getKey(tk.key)
  if k then
    local neg = {}
    for d = 1, ND do neg[d] = -tk.charge[d] end
    fair.putKey(tk.key, fair.chargeKeyState(k, neg, -fair.keyTokens(tk.charge)))
  end
end

-- settleFlow charges a lease's flow and key the difference between what
-- the call cost (final) and what it was granted at (reserved), at
-- granted_at: a call charged to an earlier day window corrects no day
-- counter.
function fair.settleFlow(class, key, weight, reserved, final, granted_at)
  local delta = fair.fairCost(final) - fair.fairCost(reserved)
  local id = fair.flowID(class, key)
  local f = fair.getFlow(id)
  if f and weight > 0 then
    fair.putFlow(id, {rank = f.rank, finish = f.finish + delta / weight, granted = max(0, f.granted + delta)})
  end
  local k = fair.getKey(key)
  if k then
    local diff, nonneg = {}, {}
    for d = 1, ND do
      nonneg[d] = max(final[d], 0)
      diff[d] = nonneg[d] - reserved[d]
    end
    local day = fair.keyTokens(nonneg) - fair.keyTokens(reserved)
    if granted_at < k.day_start then day = 0 end
    fair.putKey(key, fair.chargeKeyState(k, diff, day))
  end
end

-- retime moves the first RETIME_WINDOW booked tickets, in their fair order
-- (index.orderFirst), to the time the provider's bucket (level + booked) holds its charges and those
-- of every ticket due before it, above its class's floor: tickets follow
-- the budget. A ticket lapses the ticket grace after its time or, if
-- later, the time its call was last told (memScope.ticketExpiry). The
-- others keep their times: they are not claimed before they are among the
-- first (beyondFirst), and a reserve retimes the first again, once a
-- ticket left them (S.window_current), while there are more
-- (S.retime_pending; memScope.retime).
local function retime()
  S.retime_pending = S.tickets > RETIME_WINDOW and 1 or 0
  S.window_current = 1
  index.retimed = true -- at NOW, this call (forward.defer)
  if S.tickets == 0 then return end
  local ahead = zeros(NB) -- the charges of the tickets due so far
  local gathered = 0 -- the tickets due at the gathering's end so far
  for _, e in ipairs(index.orderFirst(RETIME_WINDOW)) do
    local c, tk = e[1], e[2]
    do
      local fl, w = tk.floor, 0
      for d = 1, NB do
        local cap, x = S.capacity[d], tk.charge[d]
        if cap > 0 and x ~= 0 then
          ahead[d] = ahead[d] + x
          local need = ahead[d] + fl * cap - (S.level[d] + S.booked[d])
          if need > EPSILON then w = max(w, waitFor(need, rate(d))) end
        end
      end
      local at = NOW + w
      if w == 0 and tk.at < NOW then at = tk.at end -- due: it keeps the time it came due at
      if tk.key ~= '' and S.fair_start_until ~= 0 and at <= S.fair_start_until then
        -- Released together, gathered calls are due in their fair order,
        -- GATHER_SPACING apart (tuning.GatherSpacing).
        at = S.fair_start_until + gathered * GATHER_SPACING
        gathered = gathered + 1
      end
      local expires = max(at, tk.told) + S.ticket_grace -- memScope.ticketExpiry
      -- announceDue, when its call would come late (broughtForward).
      local early = tk.told - at
      if tk.told > NOW and early > ANNOUNCE_MOVE and early > floor((tk.told - NOW) / 4) then DUE[#DUE + 1] = c end
      if at ~= tk.at or expires ~= tk.expires then
        tk.at, tk.expires = at, expires
        putTicket(c, tk)
      end
    end
  end
end

-- beyondFirst reports whether call c's ticket is further back in the order
-- than the first RETIME_WINDOW tickets of a retime-pending scope, and if
-- so the time of the last of them (memScope.beyondFirst). It reads the
-- order sets and that one ticket, not the first tickets.
local function beyondFirst(c)
  if S.retime_pending ~= 1 then return false, 0 end
  local tk = getTicket(c)
  if not tk or index.place(c, tk.rank) < RETIME_WINDOW then return false, 0 end
  return true, getTicket(index.nth(RETIME_WINDOW - 1)).at
end

-- takeOverdue gives call c's ticket (mine) the place of the earliest ticket
-- of its rank OVERDUE_TICKET past its time, and moves that one to c's old
-- time (their places in the fair order too); then the tickets are retimed.
-- On a retime-pending scope only the first tickets may be overdue: further
-- back a time is kept, not current, and may be early. It reports whether
-- it found one (memScope.takeOverdue, eachOverdue).
local function takeOverdue(c, mine)
  flushTickets()
  local function swap(id, tk)
    mine.at, tk.at = tk.at, mine.at
    mine.start, tk.start = tk.start, mine.start
    mine.finish, tk.finish = tk.finish, mine.finish
    tk.expires = max(tk.at, tk.told) + S.ticket_grace
    putTicket(c, mine)
    putTicket(id, tk)
    index.orderPut(c, mine)
    index.orderPut(id, tk)
    retime()
    return true
  end
  if #call('ZRANGEBYSCORE', KEYS[K.TICKET_TIMES], '-inf', NOW - OVERDUE_TICKET, 'LIMIT', 0, 1) == 0 then
    return false -- no ticket is overdue
  end
  if S.retime_pending == 1 then
    local first = index.orderFirst(RETIME_WINDOW)
    table.sort(first, function(a, b)
      if a[2].at ~= b[2].at then return a[2].at < b[2].at end
      return a[1] < b[1]
    end)
    for _, e in ipairs(first) do
      if e[2].at > NOW - OVERDUE_TICKET then return false end -- the rest are not overdue either
      if e[1] ~= c and e[2].rank == mine.rank then return swap(e[1], e[2]) end
    end
    return false
  end
  local start = 0
  while true do -- the overdue tickets by time, 16 at a time
    local ids = call('ZRANGEBYSCORE', KEYS[K.TICKET_TIMES], '-inf', NOW - OVERDUE_TICKET, 'LIMIT', start, 16)
    if #ids == 0 then return false end
    for _, id in ipairs(ids) do
      local tk = id ~= c and getTicket(id)
      if tk and tk.rank == mine.rank then return swap(id, tk) end
    end
    start = start + 16
  end
end

-- nextBoundary is the first day boundary after NOW that Go passed, or 0
-- when it passed none (the window's end is then pending).
local function nextBoundary()
  if BOUND1 > NOW then return BOUND1 end
  if BOUND2 > NOW then return BOUND2 end
  return 0
end

-- clampLevels keeps every bucket's level at or below its capacity, after
-- the capacity changed.
local function clampLevels()
  for d = 1, NB do
    if S.capacity[d] > 0 then S.level[d] = min(S.level[d], S.capacity[d]) end
  end
end

-- setLimits installs the limits of signature sig (limits.go) unless they
-- are installed. A new scope starts each bucket at its burst capacity; a
-- changed limit keeps levels, clamped to the new capacity.
local function setLimits(sig)
  if S.limits == sig then return end
  local f = {}
  for v in string.gmatch(sig .. '|', '([^|]*)|') do f[#f + 1] = v end
  local m = readLayout(LAYOUTS.limits, f, 1)
  for d = 1, ND do S.limit[d] = m.limit[d] end
  S.burst, S.token_burst, S.margin = m.burst, m.token_burst, m.margin
  S.standard_floor, S.bulk_floor, S.aging_after = m.standard_floor, m.bulk_floor, m.aging_ns / 1000
  local first = S.limits == ''
  S.limits = sig
  local was = {capacity = S.capacity, rate = S.rate}
  recompute()
  if first then
    S.last = NOW
    for d = 1, NB do S.level[d] = S.capacity[d] end
    S.day_end = nextBoundary()
    return
  end
  clampLevels()
  for d = 1, NB do
    if was.capacity[d] > 0 and (S.capacity[d] == 0 or S.rate[d] > was.rate[d] or S.capacity[d] > was.capacity[d]) then
      retime() -- a larger budget brings tickets forward
      return
    end
  end
  retime()
end

-- reclaimLeases (memScope.reclaim, for leases) drops expired leases (their
-- slots come back, their tokens stay spent), found by their expiry (the
-- lease expiries), and returns the earliest live expiry (0: none), which
-- becomes the exact next expiry. It drops at most index.reclaimLimit: when
-- more expired, the next expiry is NOW, so the next script goes on
-- (index.reclaimMore), and NOW is returned.
local function reclaimLeases()
  local dead, renewed = 0, 0
  local expired, more = index.expired(KEYS[K.LEASE_EXPIRIES])
  for _, c in ipairs(expired) do
    local le = getLease(c)
    if le and le.expires <= NOW then
      lapse(c)
      dead = dead + 1
    elseif le then
      index.expiryPut(c, le.expires) -- renewed by scripts that keep no index
      renewed = renewed + 1
    else
      index.expiryDrop(c)
    end
  end
  -- Once the lease keys' TTL has passed (save keeps it past every lease's
  -- expiry), the keys may be gone with their leases: a Redis paused that
  -- long comes back with no lease listed. The leases are then counted from
  -- the sorted set (as reclaimTickets counts tickets), so every slot is
  -- free again.
  if not more and S.lease_key_expiry > 0 and NOW >= S.lease_key_expiry then
    local live = call('ZCOUNT', KEYS[K.LEASE_EXPIRIES], '(' .. fmt(NOW), '+inf') + renewed
    if S.leases > live then
      dead = dead + S.leases - live
      S.leases = live
      if live == 0 then index.liveEmptied() end
    end
  end
  if more then
    S.next_lease_expiry = NOW
  else
    local first = call('ZRANGEBYSCORE', KEYS[K.LEASE_EXPIRIES], '(' .. fmt(NOW), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    S.next_lease_expiry = tonumber(first[2]) or 0
  end
  if dead > 0 then
    FREED = FREED + dead
    wake()
  end
  return S.next_lease_expiry
end

-- reclaimTickets (memScope.reclaim, for tickets) drops lapsed tickets:
-- their charge never reached the provider, so it goes back (a due ticket's
-- claim checks the provider's bucket, level + booked). It drops at most
-- index.reclaimLimit, the latest to lapse first: a flow's tickets lapse in
-- the order they were placed, so its later ones come first, as
-- fair.unplaceAll unplaces them, and few links are kept.
local function reclaimTickets()
  local lapsed = {}
  flushTickets()
  local calls, more = index.expired(KEYS[K.TICKET_EXPIRIES], true)
  for _, c in ipairs(calls) do
    local tk = unbook(c)
    if tk then
      refund(tk.charge)
      lapsed[#lapsed + 1] = {c, tk}
    else
      -- Listed without a record (its keys expired apart): the next script
      -- must not find it again.
      write('ZREM', KEYS[K.TICKET_EXPIRIES], c)
      write('ZREM', KEYS[K.TICKET_TIMES], c)
    end
  end
  fair.unplaceAll(lapsed, more)
  flushTickets()
  if more then
    S.next_ticket_expiry = NOW
    return
  end
  -- Counted from the sorted set (the live ones: a snapshot removes
  -- nothing), so keys that expired leave no trace.
  S.tickets = call('ZCOUNT', KEYS[K.TICKET_EXPIRIES], '(' .. fmt(NOW), '+inf')
  if S.tickets == 0 then
    for d = 1, NB do
      S.booked[d] = 0
      for r = 0, NRANKS - 1 do S.booked_rank[r][d] = 0 end
    end
  end
  local first = call('ZRANGEBYSCORE', KEYS[K.TICKET_EXPIRIES], '(' .. fmt(NOW), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  S.next_ticket_expiry = tonumber(first[2]) or 0
end

-- advance refills the buckets to NOW, rolls the day window and reclaims
-- expired leases and lapsed tickets. Time never runs backwards here.
local function advance()
  if S.limits == '' then return end
  -- Elapsed seconds as Go's Duration.Seconds computes them (whole seconds
  -- plus nanoseconds / 1e9), so both stores refill to the same bit.
  local us = NOW - S.last
  if us > 0 then
    local sec = floor(us / 1e6)
    local dt = sec + (us - sec * 1e6) * 1000 / 1e9
    for d = 1, NB do
      local top = S.capacity[d] - S.booked[d]
      if S.capacity[d] > 0 and S.level[d] < top then S.level[d] = min(top, S.level[d] + rate(d) * dt) end
    end
    S.cut = max(0, S.cut - RATE_RECOVERY * dt)
    S.last = NOW
  end
  if S.day_end == 0 or NOW >= S.day_end then
    if S.day_end ~= 0 then S.day_used[REQUESTS_PER_DAY], S.day_used[TOKENS_PER_DAY] = 0, 0 end
    S.day_end = nextBoundary()
  end
  if S.lowered_until ~= 0 and NOW >= S.lowered_until then
    -- Evidence, not law: a lowered limit not reported again is forgotten.
    for d = 1, NB do S.lowered[d], S.lowered_mark[d] = 0, 0 end
    S.lowered_until = 0
    recompute()
  end
  if S.next_lease_expiry ~= 0 and NOW >= S.next_lease_expiry then reclaimLeases() end
  if S.next_ticket_expiry ~= 0 and NOW >= S.next_ticket_expiry then reclaimTickets() end
  fair.forgetIdle()
end

-- activeBlock reports whether the scope's own block is in force.
local function activeBlock() return S.block_until > NOW end

-- nextSlotAt is the latest time a slot frees without any settle: the
-- earliest live lease expiry.
local function nextSlotAt()
  local t = reclaimLeases()
  if t == 0 then return NOW end
  return t
end

-- lastTicketAt is the time of the latest ticket that charges bucket d (0:
-- none), among the latest WALKS.LAST_TICKETS: past them, the time of the
-- last it read, which is no earlier (the loop over tickets in
-- memScope.fitWait, on the sorted set of ticket times; Redis only).
local function lastTicketAt(d)
  local start, n, last = 0, 1, 0 -- the latest ticket most often charges d: read it alone first
  flushTickets()
  while start < WALKS.LAST_TICKETS do
    local ids = call('ZREVRANGE', KEYS[K.TICKET_TIMES], start, min(start + n, WALKS.LAST_TICKETS) - 1, 'WITHSCORES')
    if #ids == 0 then return 0 end
    for j = 1, #ids, 2 do
      local tk = getTicket(ids[j])
      last = tonumber(ids[j + 1])
      if tk and tk.charge[d] > 0 then return last end
    end
    start, n = start + n, 16
  end
  return last
end

-- fitWait returns how long (µs) until charge c fits in bucket d with no
-- other traffic, leaving fl (a fraction of the bucket) untouched and
-- borrowing borrow from lower classes' tickets — or, for a charge larger
-- than the rest of the bucket, until the bucket is full. While tickets
-- hold part of the bucket, a charge larger than the rest waits at least
-- until the last of them is due.
local function fitWait(d, c, fl, borrow)
  local cap = S.capacity[d]
  local need = min(c + fl * cap, cap) - S.level[d] - borrow
  if need <= EPSILON then return 0 end
  local w = waitFor(need, rate(d))
  if c > cap - (S.booked[d] - borrow) + EPSILON and S.tickets > 0 then
    w = max(w, lastTicketAt(d) - NOW)
  end
  return w
end

-- chargeMovesTickets reports whether charging delta (a settle's debt, or a
-- refund where negative) can move a booked ticket: only where the bucket's
-- level, before or after, is below the tickets' highest floor
-- (memScope.chargeMovesTickets). It is called before the charge.
local function chargeMovesTickets(delta)
  if S.tickets == 0 then return false end
  for d = 1, NB do
    if delta[d] ~= 0 and S.capacity[d] > 0 and min(S.level[d], S.level[d] - delta[d]) < S.booked_floor * S.capacity[d] then
      return true
    end
  end
  return false
end

-- ticketShortfall is how long (µs) a due ticket must still wait because a
-- higher class borrowed its capacity: the provider's bucket, level +
-- booked, must hold its charges above its class's floor fl.
local function ticketShortfall(tk, fl)
  local w = 0
  for d = 1, NB do
    local cap, c = S.capacity[d], tk.charge[d]
    if cap > 0 and c ~= 0 then
      local short = min(c + fl * cap, cap) - (S.level[d] + S.booked[d])
      if short > EPSILON then w = max(w, waitFor(short, rate(d))) end
    end
  end
  return w
end


-- boundReported is a reported limit below the configured limit cfg (0:
-- none configured), raised to a tenth of cfg at the least.
local function boundReported(reported, cfg)
  return max(reported, ceil(cfg * MIN_REPORTED_FRACTION))
end

-- lowerLimits applies the limits of observation o: a reported limit below
-- the configured one lowers it, to a tenth of it at the least, and a report
-- at or above it lifts an earlier lowering, unless it predates the report
-- that lowered it: o.predates[d] (set here; memScope.predates) says o is
-- of a call granted before the one whose report lowered bucket d's limit,
-- so it tells of the provider before the limit fell and neither lifts the
-- lowering nor raises the level (observe). A lowering is forgotten
-- LOWERED_LIMIT_MEMORY after the last report of one (advance). It reports
-- whether the budgets changed.
local function lowerLimits(o)
  local changed, reported, lowered = false, false, false
  o.predates = {}
  for d = 1, NB do
    o.predates[d] = S.lowered[d] ~= 0 and o.markValid and o.mark[d] < S.lowered_mark[d]
    if o.hasLimit[d] and o.limit[d] > 0 then
      local cfg, was = S.limit[d], S.lowered[d]
      if cfg == 0 or o.limit[d] < cfg then
        reported, S.lowered[d] = true, boundReported(o.limit[d], cfg)
        if o.markValid then S.lowered_mark[d] = max(S.lowered_mark[d], o.mark[d]) end
      elseif not o.predates[d] then
        S.lowered[d], S.lowered_mark[d] = 0, 0
      end
      changed = changed or S.lowered[d] ~= was
    end
    lowered = lowered or S.lowered[d] ~= 0
  end
  if not lowered then
    S.lowered_until = 0
  elseif reported then
    S.lowered_until = NOW + LOWERED_LIMIT_MEMORY
  end
  if changed then
    recompute()
    clampLevels()
  end
  return changed
end

-- follows reports whether bucket d's level may follow report o up: only
-- when o is the remaining of a budget no larger than the configured limit;
-- the remaining of a larger pool only lowers the level.
local function follows(o, d)
  local cfg = S.limit[d]
  return o.hasLimit[d] and o.limit[d] > 0 and (cfg == 0 or o.limit[d] <= cfg)
end

-- ceiling is the most a provider's report may raise bucket d to: its
-- per-minute limit (as lowered by reports), or its capacity if larger.
local function ceiling(d)
  local lim, lo = S.limit[d], S.lowered[d]
  if lo > 0 and (lim == 0 or lo < lim) then lim = lo end
  return max(S.capacity[d], lim)
end

-- observe applies a provider report: lowered limits (lowerLimits), and the
-- level of each reported bucket moves as far as the report proves
-- (memScope.observe): the provider's bucket (level + booked) lies between
-- the remaining (less, where the remaining does not count calls in flight,
-- what the leases granted before it and still live hold) and that less
-- everything granted after the observed call and what the calls granted
-- before it held in flight (those still live, and the mark's in flight,
-- Mark.InFlight); a bucket below that range is raised to
-- its bottom (only where the report is of the configured budget, follows,
-- and does not predate a lowered limit, o.predates),
-- one above it lowered to its top; the top at most the ceiling, the
-- bottom at most memScope.raiseTo, and no raise from a remaining of 0 (a
-- bucket in debt is reported as 0). Booked tickets then follow the new
-- levels (retime). Reset values are never used as rates.
local function observe(o)
  local moved = lowerLimits(o)
  local margin = S.margin
  if margin == 0 then margin = DEFAULT_MARGIN end
  -- What the live leases granted before the observed one hold, and what
  -- it holds if live, read once: every live lease, for a mark that is not
  -- valid or has no grant number (index.liveBefore).
  local earlier, own
  for d = 1, NB do
    if o.hasRemaining[d] and S.capacity[d] > 0 then
      -- uncounted: what the provider surely had not counted; since: what
      -- it may or may not have; before: calls granted before the observed
      -- one (a lower grant number) and still in flight (memScope.observe).
      local uncounted, before, since = 0, 0
      if not earlier then
        local n = o.seq
        if not o.markValid or n <= 0 then n = S.grants + 1 end
        earlier, own = index.liveBefore(n)
      end
      if not o.markValid then
        since = earlier[d]
      else
        since = max(0, S.granted[d] - o.mark[d])
        if o.excluded[d] then
          uncounted = earlier[d] + own[d] -- a later grant is counted in since
        else
          before = earlier[d]
        end
      end
      -- The calls in flight at its grant, answered since, are in neither
      -- the live leases nor since.
      if o.markValid then before = max(before, o.inflight[d] - uncounted) end
      local top = o.remaining[d] - uncounted
      local bucket = min(S.level[d] + S.booked[d], min(top, ceiling(d)))
      if follows(o, d) and not o.predates[d] and o.remaining[d] > 0 then
        -- A raise follows what the report proves up to the capacity, and
        -- beyond it keeps the margin's part of the capacity; while a 429
        -- has cut the rate, it stops short by the cut's share of
        -- REORDER_WINDOW's refill (memScope.raiseTo).
        local c = S.capacity[d]
        local proven = top - since - before - S.cut * S.rate[d] * (REORDER_WINDOW / 1e6)
        bucket = max(bucket, min(max(min(proven, c), proven - (1 - margin) * c), ceiling(d)))
      end
      -- The provider's bucket holds what booked tickets will claim: what
      -- a new call may take is the rest.
      local level = bucket - S.booked[d]
      if math.abs(level - S.level[d]) > RETIME_MOVE * S.capacity[d] then
        moved = true
      end
      S.level[d] = level
    end
  end
  if moved then retime() end
end

-- cooldown applies a provider's 429 that pauses the scope for w (µs)
-- (memScope.cooldown): each bucket is taken to be w of refill short of
-- empty, so the calls booked behind the pause go at the rate after it, and
-- the rate is cut.
local function cooldown(w)
  if S.limits == '' or w <= 0 then return end
  S.cut = 1 - max(MIN_RATE_FACTOR, (1 - S.cut) * COOLDOWN_CUT)
  local sec = floor(w / 1e6)
  local secs = sec + (w - sec * 1e6) * 1000 / 1e9
  for d = 1, NB do
    if S.capacity[d] > 0 then S.level[d] = min(S.level[d], -S.booked[d] - rate(d) * secs) end
  end
  retime()
end
