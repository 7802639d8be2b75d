-- failure.lua: Store.AddFailure. One hash per call: count and when it is
-- forgotten; its TTL is that time.
-- KEYS: 1 failure key. ARGV: now ('' = TIME), ttl.
-- Reply: count

local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = t[1] * 1000000 + t[2]
end
local TTL = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'c', 'e')
local c, e = tonumber(v[1]) or 0, tonumber(v[2]) or 0
if NOW >= e then c = 0 end
c = c + 1
redis.call('HSET', KEYS[1], 'c', c, 'e', NOW + TTL)
redis.call('PEXPIRE', KEYS[1], math.ceil(TTL / 1000) + SLACK / 1000)
return c
