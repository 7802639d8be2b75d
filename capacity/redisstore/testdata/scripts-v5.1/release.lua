-- release.lua: Store.Release (MemoryStore.Release). An empty lease id
-- releases the call's ticket, refunding the booked capacity.
-- ARGV from 6: call, lease id.
-- Reply: header('ok' | 'none')

local CALL, ID = ARGV[6], ARGV[7]

if not load(false) then return header('none') end
advance()
if ID == '' then
  local tk = unbook(CALL)
  if tk then
    refund(tk.charge)
    fair.unplace(tk)
    fair.refundKey(tk)
    retime()
    wake()
  end
else
  local le = getLease(CALL)
  if le and CALL .. '#' .. le.attempt == ID then
    dropLease(CALL)
    refund(le.charge)
    fair.settleFlow(le.class, le.key, le.weight, le.charge, zeros(ND), le.granted_at)
    retime()
    wake()
  end
end
save()
return header('ok')
