-- renew.lua: Store.Renew (MemoryStore.Renew).
-- ARGV from 6: call, lease id, ttl.
-- Reply: {'G', now, epoch, reset, freed, lease x18} or {'none', now, epoch, reset, freed}

local CALL, ID, TTL = ARGV[6], ARGV[7], tonumber(ARGV[8])

if not load(false) then return {'none', NOW, EP, RESET, FREED} end
advance()
local le = get_lease(CALL)
if not le or CALL .. '#' .. le[1] ~= ID then
  save()
  return {'none', NOW, EP, RESET, FREED}
end
le[4] = NOW + TTL
put_lease(CALL, le)
note_expiry(le[4], $NE)
save()
return append_lease({'G', NOW, EP, RESET, FREED}, le)
