-- library.lua: the first file of the function library (scripts.go), after
-- the two lines Go writes: the library's name and LIBRARY, that name.
-- Every script file follows; each defines its entry, entries.<name>, which
-- register.lua registers as LIBRARY_<name>. There is no EVAL_KEYS here, so
-- no file calls its entry when the library is loaded.
local EVAL_KEYS, EVAL_ARGV, entries = nil, nil, {}
