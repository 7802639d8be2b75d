-- failure.lua: Store.AddFailure. One hash per call: count and when it is
-- forgotten; its TTL is that time.
-- KEYS: 1 failure key, 2 the scope's records (keys.go): a scope the
-- records engine holds counts its failures there (TGRECORDS).
-- ARGV: now ('' = TIME), ttl.
-- Reply: count

-- entries.failure runs the script: keys and args are its KEYS and ARGV.
function entries.failure(keys, args)
  useGlobals()
  if redis.call('EXISTS', keys[2]) == 1 then
    error({err = 'TGRECORDS the records engine holds this scope'})
  end
  local now
  if args[1] ~= '' then
    now = tonumber(args[1])
  else
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local TTL = tonumber(args[2])
  local v = redis.call('HMGET', keys[1], 'c', 'e')
  local c, e = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  if now >= e then c = 0 end
  c = c + 1
  redis.call('HSET', keys[1], 'c', c, 'e', now + TTL)
  redis.call('PEXPIRE', keys[1], math.ceil(TTL / 1000) + SLACK / 1000)
  return c
end

if EVAL_KEYS then return entries.failure(EVAL_KEYS, EVAL_ARGV) end
