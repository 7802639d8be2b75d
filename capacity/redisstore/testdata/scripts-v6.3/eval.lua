-- eval.lua: the first file of a script sent with EVALSHA (scripts.go).
-- Each script file defines its entry, entries.<name>, and ends by calling
-- it with the script's KEYS and ARGV, kept here as EVAL_KEYS and EVAL_ARGV.
-- (In the function library, library.lua takes this file's place: the entries
-- are registered, not called.)
local EVAL_KEYS, EVAL_ARGV, entries = KEYS, ARGV, {}
