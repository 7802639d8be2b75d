-- observe.lua: Store.Observe (memScope.observe).
-- ARGV from 6: for each bucket d (4 groups of 4 from 6): has limit, limit,
-- has remaining, remaining; then mark valid (22), mark granted x4 (23..26).
-- Reply: {'ok', now, epoch, reset, freed}

load(true)
advance()

-- A reported limit below the configured one lowers it; a report at or above
-- it lifts an earlier lowering. Reset values are never used as rates.
local changed, reported = false, false
for d = 1, $NB do
  local i = 6 + (d - 1) * 4
  local lim = tonumber(ARGV[i + 1])
  if ARGV[i] == '1' and lim > 0 then
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

-- The level becomes at most the reported remaining minus what was granted
-- after the observed request left.
local mark_valid = ARGV[22] == '1'
local inflight = nil
for d = 1, $NB do
  local i = 6 + (d - 1) * 4
  if ARGV[i + 2] == '1' and S[$CAP + d] > 0 then
    local since
    if mark_valid then
      since = max(0, S[$G + d] - tonumber(ARGV[22 + d]))
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
    S[$LV + d] = min(S[$LV + d], tonumber(ARGV[i + 3]) - since)
  end
end
save()
return {'ok', NOW, EP, RESET, FREED}
