-- block.lua: Store.Block on one scope. A later block never shortens an
-- earlier one; a cooldown that begins a pause applies cooldown.
-- ARGV from 6: reason, how long it lasts from now (µs, at most MAX_BLOCK),
-- detail, half open (µs), probing (0/1).
-- Reply: header('ok'); or header('A'), as the ops script's.

-- entries.block runs the script: keys and args are its KEYS and ARGV.
function entries.block(keys, args)
  begin(keys, args)
  local UNTIL, HALF_OPEN = boundBlock(tonumber(ARGV[7]), tonumber(ARGV[9]))
  load(true)
  if UNTIL > S.block_until and tonumber(ARGV[6]) == COOLDOWN and S.block_until <= NOW then
    advance() -- the cooldown below cuts the rate as of now
    if index.reclaimMore then
      save()
      return header('A')
    end
  end
  if UNTIL > S.block_until then
    local paused = S.block_until > NOW
    S.block_reason, S.block_until, S.block_detail = tonumber(ARGV[6]), UNTIL, ARGV[8]
    S.block_half_open, S.block_probing = HALF_OPEN, tonumber(ARGV[10])
    if S.block_reason == COOLDOWN and not paused then
      -- One cut per pause: the 429s of calls sent before it began arrive
      -- during it (MemoryStore.Block).
      advance()
      cooldown(UNTIL - NOW)
    end
  end
  save()
  return header('ok')
end

if EVAL_KEYS then return entries.block(EVAL_KEYS, EVAL_ARGV) end
