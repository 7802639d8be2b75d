-- unblock.lua: Store.Unblock on one scope: its block is lifted and its
-- waiters told.
-- Reply: {'ok' | 'none', now, epoch, reset, freed}

if not load(false) then return {'none', NOW, EP, RESET, FREED} end
if S[$BLK] == 1 then
  S[$BLK], S[$BLK + 1], S[$BLK + 2], S[$BLK + 3], S[$BLK + 4], S[$BLK + 5] = 0, 0, 0, '', 0, 0
  publish()
end
save()
return {'ok', NOW, EP, RESET, FREED}
