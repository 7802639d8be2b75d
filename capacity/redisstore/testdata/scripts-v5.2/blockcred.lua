-- blockcred.lua: Store.Block with Block.Credential: one key per credential,
-- read by every scope script on it, holding {reason, until, detail,
-- half-open, probing}. A later block never shortens an earlier one. Its TTL
-- is the block's end (for a half-open block, HALF_OPEN_MEMORY after its
-- half-open time: it ends with a probe, not on its own); one that already
-- ended is kept for the slack, so a shorter one just after it is refused.
-- KEYS: 1 credential block. ARGV: now ('' = TIME), reason, how long it
-- lasts from now (µs, at most MAX_BLOCK), detail, half-open, probing.
-- Reply: now

local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = t[1] * 1000000 + t[2]
end
-- Held to MAX_BLOCK, as MemoryStore.Block (boundBlock in state.lua).
local ends = NOW + math.min(tonumber(ARGV[3]), MAX_BLOCK)
local b = {tonumber(ARGV[2]), ends, ARGV[4], math.min(math.max(tonumber(ARGV[5]), 0), MAX_BLOCK), tonumber(ARGV[6])}
local cur = redis.call('GET', KEYS[1])
if cur and b[2] <= cmsgpack.unpack(cur)[2] then return NOW end
local stop = b[2]
if b[4] > 0 then stop = stop + b[4] + HALF_OPEN_MEMORY end
redis.call('SET', KEYS[1], cmsgpack.pack(b), 'PX', math.ceil(math.max(0, stop - NOW) / 1000) + SLACK / 1000)
return NOW
