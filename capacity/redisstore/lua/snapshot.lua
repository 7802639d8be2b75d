-- snapshot.lua: Store.Snapshot. Blocks are as append_block writes them,
-- each in its own array (empty for none).
-- Reply: {'ok' | 'none', now, epoch, reset, freed, credential block,
--   signature, day end, budgets x7 {limited, rate, capacity}, levels x7,
--   leases {{call, lease x18}...}, tickets {{call, ticket x10}...},
--   scope block}

local function cred()
  if CB and CB[2] > NOW then return append_block({}, CB) end
  return {}
end

if not load(false) then return {'none', NOW, EP, RESET, FREED, cred()} end
advance()
save()
local out = {'ok', NOW, EP, RESET, FREED, cred(), S[$SIG], S[$DE]}
local bud, lv = {}, {}
for d = 1, $ND do
  local c = S[$CAP + d]
  bud[d] = {c > 0 and 1 or 0, fstr(d <= $NB and S[$RATE + d] or 0), fstr(c)}
end
for d = 1, $NB do lv[d] = fstr(S[$LV + d]) end
lv[5] = fstr(S[$CAP + 5] - S[$DU + 1])
lv[6] = fstr(S[$CAP + 6] - S[$DU + 2])
lv[7] = fstr(S[$CAP + 7] - S[$NL])
out[9], out[10] = bud, lv
local leases, tickets = {}, {}
if S[$NL] > 0 then
  local all = call('HGETALL', KEYS[$K_LEASES])
  for i = 1, #all, 2 do leases[#leases + 1] = append_lease({all[i]}, decode_lease(all[i + 1])) end
end
if S[$NT] > 0 then
  local all = call('HGETALL', KEYS[$K_TICKETS])
  for i = 1, #all, 2 do
    local r, t = {all[i]}, mp_unpack(all[i + 1])
    for j = 1, 10 do r[1 + j] = t[j] end
    tickets[#tickets + 1] = r
  end
end
out[11], out[12] = leases, tickets
if S[$BLK] == 1 and S[$BLK + 2] > NOW then
  out[13] = append_block({})
else
  out[13] = {}
end
return out
