-- block.lua: Store.Block on one scope. A later block never shortens an
-- earlier one.
-- ARGV from 6: reason, until, detail, half-open, probing.
-- Reply: {'ok', now, epoch, reset, freed}

local UNTIL = tonumber(ARGV[7])
load(true)
if S[$BLK] == 0 or UNTIL > S[$BLK + 2] then
  S[$BLK], S[$BLK + 1], S[$BLK + 2], S[$BLK + 3], S[$BLK + 4], S[$BLK + 5] =
    1, tonumber(ARGV[6]), UNTIL, ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
end
save()
return {'ok', NOW, EP, RESET, FREED}
