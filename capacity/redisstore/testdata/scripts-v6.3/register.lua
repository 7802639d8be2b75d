-- register.lua: the last file of the function library (scripts.go):
-- registers each entry as LIBRARY_<name>. A snapshot writes nothing, so it
-- may run as FCALL_RO. (Loading has no ipairs: see state.lua.)
local names = {'ops', 'renew', 'block', 'snapshot', 'unblock', 'blockcred', 'failure'}
for i = 1, #names do
  local flags = {}
  if names[i] == 'snapshot' then flags = {'no-writes'} end
  api().register_function{function_name = LIBRARY .. '_' .. names[i], callback = entries[names[i]], flags = flags}
end
