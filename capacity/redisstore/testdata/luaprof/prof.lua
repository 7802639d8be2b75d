-- prof.lua replays the FCALLs of a MONITOR capture on the scripts' function
-- library in a plain Lua 5.1 interpreter, with an in-memory stand-in for the
-- Redis commands the scripts use, and reports what the Lua costs per call.
-- With "profile" it samples the running line every 20 VM instructions and
-- reports the time between samples by function (self and inclusive) and by
-- line. See README.md here for how to capture the input.
--
--   lua5.1 prof.lua LIBRARY MONITOR [time|profile] [REPEATS] [MIN_ARGUMENTS|call=N]
--
-- MIN_ARGUMENTS profiles only the calls with at least that many arguments
-- (the large batches), call=N only the Nth (the longest is named by
-- "time"), while every call is replayed.
--
-- The stand-in is not Redis: its commands cost Lua time (reported apart as
-- "mock"), cmsgpack is a registry of tables (free here, about 28 µs a call
-- in Redis for a many-scopes state), and time samples land on whatever
-- allocates when the collector runs. Use it to find where the Lua goes,
-- then time the candidates in Redis.

local libfile, monfile, mode, repeats = arg[1], arg[2], arg[3] or 'time', tonumber(arg[4] or '1')
-- arg[5]: profile only the calls with at least this many arguments, or
-- with call=N only the Nth call (the longest call's number is reported).
local minArgs, onlyCall = tonumber(arg[5] or '0'), nil
if arg[5] and arg[5]:match('^call=') then minArgs, onlyCall = 0, tonumber(arg[5]:sub(6)) end

-- Data: key -> {s = string} | {h = hash} | {z = member -> score} | {l = list}
local db = {}
local now = 0 -- the replayed call's MONITOR time, seconds

local function str(v)
  if type(v) == 'number' then return string.format('%.17g', v) end
  return v
end

local function ok() return {ok = 'OK'} end

local function index(i, n)
  i = tonumber(i)
  if i < 0 then i = n + i end
  return i
end

-- slice returns list[s..e] (0-based, inclusive, negatives from the end).
local function slice(list, s, e)
  local n = #list
  s, e = math.max(index(s, n), 0), math.min(index(e, n), n - 1)
  local out = {}
  for i = s, e do out[#out + 1] = list[i + 1] end
  return out
end

local function hash(k)
  if not db[k] then db[k] = {h = {}} end
  return db[k].h
end

local function zset(k)
  if not db[k] then db[k] = {z = {}} end
  return db[k].z
end

-- before orders a sorted set's {member, score} pairs by score, then member.
local function before(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[1] < b[1]
end

-- sorted returns a sorted set's {member, score} pairs by score, then member,
-- kept until the set changes (changed), so that a long queue's reads do
-- not sort it again each time.
local function sorted(k)
  if not db[k] then return {} end
  if db[k].sorted then return db[k].sorted end
  local out = {}
  for m, sc in pairs(db[k].z) do out[#out + 1] = {m, sc} end
  table.sort(out, before)
  db[k].sorted = out
  return out
end

-- ranks returns a sorted set's member -> place (from 0), kept as sorted's.
local function ranks(k)
  if not db[k] then return {} end
  if not db[k].ranks then
    local r = {}
    for i, p in ipairs(sorted(k)) do r[p[1]] = i - 1 end
    db[k].ranks = r
  end
  return db[k].ranks
end

-- changed drops the sorted forms of sorted set k.
local function changed(k)
  if db[k] then db[k].sorted, db[k].ranks = nil, nil end
end

-- place returns where pair p is, or goes, in a sorted list (binary search).
local function place(list, p)
  local lo, hi = 1, #list + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(list[mid], p) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- zput and zdrop keep sorted set k's sorted list, if it has one, as member
-- m is added at score sc or removed (ranks are dropped).
local function zdrop(k, m)
  local e = db[k]
  if not e or e.z[m] == nil then return end
  e.ranks = nil
  if e.sorted then table.remove(e.sorted, place(e.sorted, {m, e.z[m]})) end
end
local function zput(k, m, sc)
  local e = db[k]
  e.ranks = nil
  if e.sorted then table.insert(e.sorted, place(e.sorted, {m, sc}), {m, sc}) end
end

-- bound reads a score bound: its value and whether it is exclusive.
local function bound(s)
  s = tostring(s)
  if s == '-inf' then return -math.huge, false end
  if s == '+inf' or s == 'inf' then return math.huge, false end
  if s:sub(1, 1) == '(' then return tonumber(s:sub(2)), true end
  return tonumber(s), false
end

local function within(x, lo, hi)
  if lo[2] and x <= lo[1] or not lo[2] and x < lo[1] then return false end
  if hi[2] and x >= hi[1] or not hi[2] and x > hi[1] then return false end
  return true
end

local function members(pairsList, withScores)
  local out = {}
  for _, p in ipairs(pairsList) do
    out[#out + 1] = p[1]
    if withScores then out[#out + 1] = str(p[2]) end
  end
  return out
end

local commands = {}
function commands.TIME()
  local sec = math.floor(now)
  return {tostring(sec), tostring(math.floor((now - sec) * 1e6))}
end
function commands.GET(k) return db[k] and db[k].s or false end
function commands.SET(k, v) db[k] = {s = v}; return ok() end
function commands.MGET(...)
  local out = {}
  for i, k in ipairs({...}) do out[i] = commands.GET(k) end
  return out
end
function commands.HGET(k, f) return db[k] and db[k].h[f] or false end
function commands.HMGET(k, ...)
  local out = {}
  for i, f in ipairs({...}) do out[i] = commands.HGET(k, f) end
  return out
end
function commands.HGETALL(k)
  local out = {}
  for f, v in pairs(db[k] and db[k].h or {}) do
    out[#out + 1], out[#out + 2] = f, v
  end
  return out
end
function commands.HSET(k, ...)
  local h, args, added = hash(k), {...}, 0
  for i = 1, #args, 2 do
    if h[args[i]] == nil then added = added + 1 end
    h[args[i]] = args[i + 1]
  end
  return added
end
function commands.HDEL(k, ...)
  if not db[k] then return 0 end
  local n = 0
  for _, f in ipairs({...}) do
    if db[k].h[f] ~= nil then n, db[k].h[f] = n + 1, nil end
  end
  if next(db[k].h) == nil then db[k] = nil end
  return n
end
function commands.DEL(...)
  local n = 0
  for _, k in ipairs({...}) do
    if db[k] then n, db[k] = n + 1, nil end
  end
  return n
end
function commands.PEXPIRE(k) return db[k] and 1 or 0 end
function commands.ZADD(k, ...)
  local z, args, added = zset(k), {...}, 0
  for i = 1, #args, 2 do
    if z[args[i + 1]] == nil then added = added + 1 end
    zdrop(k, args[i + 1])
    z[args[i + 1]] = tonumber(args[i])
    zput(k, args[i + 1], z[args[i + 1]])
  end
  return added
end
function commands.ZREM(k, ...)
  if not db[k] then return 0 end
  local n = 0
  for _, m in ipairs({...}) do
    zdrop(k, m)
    if db[k].z[m] ~= nil then n, db[k].z[m] = n + 1, nil end
  end
  if next(db[k].z) == nil then db[k] = nil end
  return n
end
function commands.ZCARD(k)
  local n = 0
  for _ in pairs(db[k] and db[k].z or {}) do n = n + 1 end
  return n
end
function commands.ZSCORE(k, m) return db[k] and db[k].z[m] and str(db[k].z[m]) or false end
function commands.ZRANK(k, m) return ranks(k)[m] or false end
function commands.ZCOUNT(k, lo, hi)
  local n, l, h = 0, {bound(lo)}, {bound(hi)}
  for _, p in ipairs(sorted(k)) do
    if within(p[2], l, h) then n = n + 1 end
  end
  return n
end
function commands.ZRANGE(k, s, e, ...)
  local opts = {...}
  if opts[1] ~= 'BYSCORE' then return members(slice(sorted(k), s, e), opts[1] == 'WITHSCORES') end
  -- ZRANGE k hi lo BYSCORE REV [LIMIT offset count], the form the scripts
  -- send (index.expired): the highest scores first.
  assert(opts[2] == 'REV', 'luaprof: ZRANGE BYSCORE without REV')
  local list, l, h, hits = sorted(k), {bound(e)}, {bound(s)}, {}
  for i = #list, 1, -1 do
    if within(list[i][2], l, h) then hits[#hits + 1] = list[i] end
  end
  local offset, count = 0, -1
  if opts[3] == 'LIMIT' then offset, count = tonumber(opts[4]), tonumber(opts[5]) end
  local last = #hits - 1
  if count >= 0 then last = offset + count - 1 end
  return members(slice(hits, offset, math.min(last, #hits - 1)), false)
end
function commands.ZREVRANGE(k, s, e, opt)
  local list, rev = sorted(k), {}
  s, e = tonumber(s), tonumber(e)
  if s < 0 then s = #list + s end
  if e < 0 then e = #list + e end
  for i = #list - s, math.max(1, #list - e), -1 do rev[#rev + 1] = list[i] end
  return members(rev, opt == 'WITHSCORES')
end
function commands.ZRANGEBYSCORE(k, lo, hi, ...)
  local opts, withScores, offset, count = {...}, false, 0, -1
  local i = 1
  while i <= #opts do
    if opts[i] == 'WITHSCORES' then
      withScores, i = true, i + 1
    else -- LIMIT offset count
      offset, count, i = tonumber(opts[i + 1]), tonumber(opts[i + 2]), i + 3
    end
  end
  local l, h, hits = {bound(lo)}, {bound(hi)}, {}
  for _, p in ipairs(sorted(k)) do
    if within(p[2], l, h) then hits[#hits + 1] = p end
  end
  local last = #hits - 1
  if count >= 0 then last = offset + count - 1 end
  return members(slice(hits, offset, math.min(last, #hits - 1)), withScores)
end
function commands.ZREMRANGEBYSCORE(k, lo, hi)
  local n, l, h = 0, {bound(lo)}, {bound(hi)}
  changed(k)
  for m, sc in pairs(db[k] and db[k].z or {}) do
    if within(sc, l, h) then n, db[k].z[m] = n + 1, nil end
  end
  return n
end
function commands.RPUSH(k, ...)
  if not db[k] then db[k] = {l = {}} end
  for _, v in ipairs({...}) do table.insert(db[k].l, v) end
  return #db[k].l
end
function commands.LRANGE(k, s, e) return slice(db[k] and db[k].l or {}, s, e) end
function commands.LTRIM(k, s, e)
  if db[k] then db[k].l = slice(db[k].l, s, e) end
  if db[k] and #db[k].l == 0 then db[k] = nil end
  return ok()
end
function commands.SPUBLISH() return 0 end

-- inCommands is the time spent in the stand-in's commands, which is not
-- the scripts' Lua (Redis runs its commands in C): "time" reports without it.
local counts, functions, inCommands, commandTime = {}, {}, 0, {}
redis = {
  call = function(name, ...)
    local began = os.clock()
    name = string.upper(name)
    counts[name] = (counts[name] or 0) + 1
    local fn = assert(commands[name], 'no stand-in for ' .. name)
    local args = {...}
    for i = 1, #args do args[i] = str(args[i]) end
    local reply = fn(unpack(args))
    local spent = os.clock() - began
    inCommands, commandTime[name] = inCommands + spent, (commandTime[name] or 0) + spent
    return reply
  end,
  register_function = function(t) functions[t.function_name] = t.callback end,
  error_reply = function(msg) return {err = msg} end,
}

local packed = {}
cmsgpack = {
  pack = function(...)
    packed[#packed + 1] = {...}
    return 'mp:' .. #packed
  end,
  unpack = function(s) return unpack(packed[tonumber(s:sub(4))]) end,
}

local source = assert(io.open(libfile)):read('*a')
local library = source:match('^#!lua name=(%S+)')
local body = source:gsub('^#![^\n]*\n', '')
assert(loadstring(body, '=lib'))()

-- readMonitor returns a MONITOR line's time and its quoted arguments.
local function readMonitor(line)
  local escapes = {n = '\n', r = '\r', t = '\t', a = '\a', b = '\b'}
  local args, i = {}, line:find('"')
  while i do
    local j, buf = i + 1, {}
    while line:sub(j, j) ~= '"' do
      local ch = line:sub(j, j)
      if ch == '\\' and line:sub(j + 1, j + 1) == 'x' then
        buf[#buf + 1], j = string.char(tonumber(line:sub(j + 2, j + 3), 16)), j + 4
      elseif ch == '\\' then
        local nx = line:sub(j + 1, j + 1)
        buf[#buf + 1], j = escapes[nx] or nx, j + 2
      else
        buf[#buf + 1], j = ch, j + 1
      end
    end
    args[#args + 1] = table.concat(buf)
    i = line:find('"', j + 1)
  end
  return tonumber(line:match('^(%d+%.%d+)')), args
end

local calls = {}
for line in io.lines(monfile) do
  if line:find('"fcall"', 1, true) and line:find(library, 1, true) then
    local at, args = readMonitor(line)
    local nkeys = tonumber(args[3])
    local c = {at = at, name = args[2], keys = {}, args = {}}
    for k = 1, nkeys do c.keys[k] = args[3 + k] end
    for k = 4 + nkeys, #args do c.args[#c.args + 1] = args[k] end
    calls[#calls + 1] = c
  end
end
assert(#calls > 0, 'no FCALL of ' .. library .. ' in ' .. monfile)

-- The profile: seconds by function (its first line), by line, and in all.
local self, inclusive, lines, total = {}, {}, {}, 0
local last
local function sample()
  local t = os.clock()
  local dt = t - last
  last, total = t, total + dt
  local info = debug.getinfo(2, 'Sl')
  if info.source ~= '=lib' then
    self.mock = (self.mock or 0) + dt
  else
    self[info.linedefined] = (self[info.linedefined] or 0) + dt
    lines[info.currentline] = (lines[info.currentline] or 0) + dt
  end
  local seen, level = {}, 2
  local fi = debug.getinfo(level, 'S')
  while fi do
    if fi.source == '=lib' and not seen[fi.linedefined] then
      seen[fi.linedefined] = true
      inclusive[fi.linedefined] = (inclusive[fi.linedefined] or 0) + dt
    end
    level = level + 1
    fi = debug.getinfo(level, 'S')
  end
end

local byName, began = {}, os.clock()
local longest = {t = 0} -- the call whose Lua took longest: its time and arguments
local tookBy = {} -- each call's Lua time in the first replay
for r = 1, repeats do
  db = {}
  for i, c in ipairs(calls) do
    now = c.at + (r - 1) * 1000
    if mode == 'profile' and #c.args >= minArgs and (not onlyCall or onlyCall == i) then
      last = os.clock()
      debug.sethook(sample, '', 20)
    end
    local t, commandsBefore = os.clock(), inCommands
    local okCall, err = pcall(functions[c.name], c.keys, c.args)
    local took = os.clock() - t - (inCommands - commandsBefore)
    byName[c.name] = (byName[c.name] or 0) + took
    if took > longest.t then longest = {t = took, name = c.name, args = #c.args, i = i} end
    if r == 1 then tookBy[#tookBy + 1] = {i = i, t = took, args = #c.args} end
    debug.sethook()
    assert(okCall, err)
  end
end

local n = #calls * repeats
print(string.format('%d calls x %d: %.1f µs of Lua a call (%.1f µs more in the stand-in\'s commands)',
  #calls, repeats, (os.clock() - began - inCommands) / n * 1e6, inCommands / n * 1e6))
for name, t in pairs(byName) do print(name, string.format('%.1f µs a call', t / n * 1e6)) end
print(string.format('longest call: %.2f ms (call=%d, %s, %d arguments)',
  longest.t * 1e3, longest.i or 0, tostring(longest.name), longest.args or 0))
table.sort(tookBy, function(a, b) return a.t > b.t end)
local top = {}
for k = 1, math.min(8, #tookBy) do
  top[k] = string.format('call=%d %.2f ms (%d arguments)', tookBy[k].i, tookBy[k].t * 1e3, tookBy[k].args)
end
print('longest calls: ' .. table.concat(top, ', '))
local perCall = {}
for name, c in pairs(counts) do perCall[#perCall + 1] = string.format('%s=%.2f', name, c / n) end
table.sort(perCall)
print('commands a call: ' .. table.concat(perCall, ' '))
local mockTime = {}
for name, t in pairs(commandTime) do mockTime[#mockTime + 1] = string.format('%s=%.1f', name, t / n * 1e6) end
table.sort(mockTime)
print('stand-in µs a call by command: ' .. table.concat(mockTime, ' '))
if mode ~= 'profile' then return end

local text = {}
for l in (body .. '\n'):gmatch('([^\n]*)\n') do text[#text + 1] = l end
local function label(where)
  if type(where) ~= 'number' then return where end
  return where .. ' ' .. (text[where] or ''):gsub('^%s+', ''):sub(1, 70)
end
local function report(title, t, rows)
  local list = {}
  for k, v in pairs(t) do list[#list + 1] = {k, v} end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  print('== ' .. title)
  for i = 1, math.min(rows, #list) do
    print(string.format('%5.1f%%  %s', list[i][2] / total * 100, label(list[i][1])))
  end
end
report('self, by function (line defined)', self, 30)
report('inclusive', inclusive, 30)
report('lines', lines, 30)
