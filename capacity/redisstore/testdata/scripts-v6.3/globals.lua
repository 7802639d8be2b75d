-- globals.lua: the globals the scripts use, as locals. Redis runs a
-- function library with its globals behind a metatable, so each global
-- read is two lookups; these locals are one. useGlobals sets them at the
-- start of each call (begin, and blockcred and failure): a library is
-- loaded with no globals but redis, so they cannot be set when it loads.
-- globals and api are defined before the locals of the same names, so they
-- read the globals: api is the global redis, what loading a library may
-- use (register.lua).
local function api() return redis end
local function globals()
  return redis, tonumber, ipairs, pairs, type, unpack, rawget, rawset, setmetatable, error,
    string, table, math, cmsgpack
end
local redis, tonumber, ipairs, pairs, type, unpack, rawget, rawset, setmetatable, error
local string, table, math, cmsgpack

local function useGlobals()
  redis, tonumber, ipairs, pairs, type, unpack, rawget, rawset, setmetatable, error,
    string, table, math, cmsgpack = globals()
end
