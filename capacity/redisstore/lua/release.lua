-- release.lua: Store.Release (MemoryStore.Release). An empty lease id
-- releases the call's ticket, refunding the booked capacity.
-- ARGV from 6: call, lease id.
-- Reply: {'ok' | 'none', now, epoch, reset, freed}

local CALL, ID = ARGV[6], ARGV[7]

if not load(false) then return {'none', NOW, EP, RESET, FREED} end
advance()
if ID == '' then
  local tk = unbook(CALL)
  if tk then
    refund(tk, 3)
    publish()
  end
else
  local le = get_lease(CALL)
  if le and CALL .. '#' .. le[1] == ID then
    drop_lease(CALL)
    refund(le, 4)
    publish()
  end
end
save()
return {'ok', NOW, EP, RESET, FREED}
