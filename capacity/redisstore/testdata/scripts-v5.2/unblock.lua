-- unblock.lua: Store.Unblock on one scope: its block is lifted and its
-- waiters told.
-- Reply: header('ok' | 'none')

if not load(false) then return header('none') end
if S.block_until > 0 then
  S.block_reason, S.block_until, S.block_detail, S.block_half_open, S.block_probing = 0, 0, '', 0, 0
  wake()
end
save()
return header('ok')
