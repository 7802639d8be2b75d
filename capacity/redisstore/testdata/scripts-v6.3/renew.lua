-- renew.lua: Store.Renew (MemoryStore.Renew).
-- ARGV from 6: call, lease id, ttl (µs).
-- Reply: header('G') and the lease's record line, or header('none'); or
-- header('A'), as the ops script's.

-- entries.renew runs the script: keys and args are its KEYS and ARGV.
function entries.renew(keys, args)
  begin(keys, args)
  local CALL, ID, TTL = ARGV[6], ARGV[7], tonumber(ARGV[8])

  if not load(false) then return header('none') end
  advance()
  if index.reclaimMore then
    save()
    return header('A')
  end
  local le = getLease(CALL)
  if not le or CALL .. '#' .. le.attempt ~= ID then
    save()
    return header('none')
  end
  le.expires = NOW + TTL
  putLease(CALL, le)
  index.expiryPut(CALL, le.expires)
  noteExpiry(le.expires, 'next_lease_expiry')
  save()
  local out = header('G')
  out[#out + 1] = encodeRecord(le, LEASE_FIELDS)
  return out
end

if EVAL_KEYS then return entries.renew(EVAL_KEYS, EVAL_ARGV) end
