-- blockcred.lua: Store.Block with Block.Credential: one key per credential,
-- read by every scope script on it, holding {reason, until, detail,
-- half-open, probing}. A later block never shortens an earlier one. Its TTL
-- is the block's end (for a half-open block, HALF_OPEN_MEMORY after its
-- half-open time: it ends with a probe, not on its own); one that already
-- ended is kept for the slack, so a shorter one just after it is refused.
-- KEYS: 1 credential block. ARGV: now ('' = TIME), reason, how long it
-- lasts from now (µs, at most MAX_BLOCK), detail, half-open, probing.
-- Reply: now

-- entries.blockcred runs the script: keys and args are its KEYS and ARGV.
function entries.blockcred(keys, args)
  useGlobals()
  local now
  if args[1] ~= '' then
    now = tonumber(args[1])
  else
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  -- Held to MAX_BLOCK, as MemoryStore.Block (boundBlock in state.lua).
  local ends = now + math.min(tonumber(args[3]), MAX_BLOCK)
  local b = {tonumber(args[2]), ends, args[4], math.min(math.max(tonumber(args[5]), 0), MAX_BLOCK), tonumber(args[6])}
  local cur = redis.call('GET', keys[1])
  if cur and b[2] <= cmsgpack.unpack(cur)[2] then return now end
  local stop = b[2]
  if b[4] > 0 then stop = stop + b[4] + HALF_OPEN_MEMORY end
  redis.call('SET', keys[1], cmsgpack.pack(b), 'PX', math.ceil(math.max(0, stop - now) / 1000) + SLACK / 1000)
  return now
end

if EVAL_KEYS then return entries.blockcred(EVAL_KEYS, EVAL_ARGV) end
