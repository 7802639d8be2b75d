-- snapshot.lua: Store.Snapshot (memScope.snapshot), read-only: the state is
-- advanced to now in the script's memory and nothing is written (run as
-- FCALL_RO or EVALSHA_RO). Blocks are as blockReply writes them, each in
-- its own array (empty for none).
-- Reply: header('ok' | 'none'), credential block, then with 'ok': limits
--   signature, day end, budgets x7 {limited, rate, capacity}, levels x7,
--   leases {{call, record line}...}, tickets {{call, record line}...},
--   scope block, flows {{class/key, "rank finish granted"}...}, the virtual
--   time of each rank, keys {{key, "frac last day_used day_end share x NB"}...}
--   (each key's counters refreshed to now with its last share).
-- ARGV from 6: 'summary' for a summary (Store.Summary), then a call: the
-- leases, tickets, flows and keys are left empty, and a last element is
-- {leases in flight, tickets booked, 1 if the call holds a ticket else 0},
-- so that its cost does not grow with them.

-- This file's locals are a block's (do ... end, not indented): in the
-- function library the next file's start where they end, and a Lua
-- function holds at most 200 locals at a time.
do
local function credentialBlock()
  if CB and CB[2] > NOW then return blockReply(CB) end
  return {}
end

-- entries.snapshot runs the script: keys and args are its KEYS and ARGV.
function entries.snapshot(keys, args)
  begin(keys, args)
  READ_ONLY = true
  if not load(false) then
    local out = header('none')
    out[6] = credentialBlock()
    return out
  end
  -- A snapshot lists every lease and ticket, so it reclaims, in its
  -- memory, every one expired; a summary at most WALKS.RECLAIM (the rest
  -- still hold their slots and charges in it).
  if ARGV[6] ~= 'summary' then index.reclaimLimit = false end
  advance()
  if S.retime_pending == 1 and S.window_current == 0 then retime() end -- as the next reserve would
  local out = header('ok')
  out[6], out[7], out[8] = credentialBlock(), S.limits, S.day_end
  local budget, level = {}, {}
  for d = 1, ND do
    local cap = S.capacity[d]
    budget[d] = {cap > 0 and 1 or 0, fmt(S.rate[d]), fmt(cap)}
    level[d] = fmt(cap - S.leases) -- in flight: the free slots
    if d <= NB then level[d] = fmt(S.level[d]) end
    if d == REQUESTS_PER_DAY or d == TOKENS_PER_DAY then level[d] = fmt(cap - S.day_used[d]) end
  end
  out[9], out[10] = budget, level
  if ARGV[6] == 'summary' then
    local tk = ARGV[7] ~= '' and getTicket(ARGV[7])
    out[11], out[12], out[14], out[15], out[16] = {}, {}, {}, {}, {}
    out[13] = activeBlock() and blockReply() or {}
    out[17] = {S.leases, S.tickets, (tk and tk.expires > NOW) and 1 or 0}
    return out
  end
  local leases, tickets = {}, {}
  for c, le in pairs(allLeases()) do leases[#leases + 1] = {c, encodeRecord(le, LEASE_FIELDS)} end
  for _, e in ipairs(allTickets()) do
    if e[2].expires > NOW then tickets[#tickets + 1] = {e[1], encodeRecord(e[2], TICKET_FIELDS)} end
  end
  out[11], out[12] = leases, tickets
  out[13] = activeBlock() and blockReply() or {}
  local flows, caps, virtual = {}, {}, {}
  for _, e in ipairs(fair.allFlows()) do
    local f = e[2]
    flows[#flows + 1] = {e[1], fmt(f.rank) .. ' ' .. fmt(f.finish) .. ' ' .. fmt(f.granted)}
  end
  for r = 0, NRANKS - 1 do virtual[#virtual + 1] = fmt(S.virtual[r]) end
  if S.keys_until > 0 then
    local all = call('HGETALL', KEYS[K.KEY_CAPS])
    for i = 1, #all, 2 do
      local k = fair.refreshKey(all[i], fair.getKey(all[i]).frac)
      local v = {fmt(k.frac), fmt(k.last), fmt(k.day_used), fmt(k.day_end)}
      for d = 1, NB do v[#v + 1] = fmt(k.share[d]) end
      caps[#caps + 1] = {all[i], table.concat(v, ' ')}
    end
  end
  out[14], out[15], out[16] = flows, virtual, caps
  return out
end
end

if EVAL_KEYS then return entries.snapshot(EVAL_KEYS, EVAL_ARGV) end
