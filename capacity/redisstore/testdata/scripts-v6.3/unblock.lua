-- unblock.lua: Store.Unblock on one scope: its block is lifted and its
-- waiters told.
-- Reply: header('ok' | 'none')

-- entries.unblock runs the script: keys and args are its KEYS and ARGV.
function entries.unblock(keys, args)
  begin(keys, args)
  if not load(false) then return header('none') end
  if S.block_until > 0 then
    S.block_reason, S.block_until, S.block_detail, S.block_half_open, S.block_probing = 0, 0, '', 0, 0
    wake()
  end
  save()
  return header('ok')
end

if EVAL_KEYS then return entries.unblock(EVAL_KEYS, EVAL_ARGV) end
