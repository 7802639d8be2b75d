-- exchange.lua: the one script of the records engine (Options.Engine
-- EngineRecords; recengine.go, decision 0008). It writes the records a
-- worker's copy of a scope changed if the scope is still at the copy's
-- version; else it returns what the copy missed. It never decides anything:
-- the rules are the memory store's, in Go.
--
-- KEYS: 1 the scope's records (hash: v its version, b its blob, t the time
-- of its last write in unix ns, and the records by name), 2 its log (list:
-- the last writes' records, one entry a write), 3 the credential's block
-- (hash: v its version, b the block), 4 the scope's channel, 5 the scope's
-- state of the scripts (keys.go): a scope has one state, so while it has
-- that one and no records, the exchange replies {'scripts'} and the worker
-- runs the operation with the scripts (recroute.go).
--
-- ARGV: 1 the version of the scope the copy holds (-1: none), 2 the
-- version of the credential's block it holds, 3 'read', 'reload' (a read
-- that always returns the blob), 'cred' (the credential's block alone: 15 is
-- all the rest it reads) or, to write, the decision's time (unix ns),
-- 4 how many writes the log keeps at least, 5 the most records one script
-- reads, 6 how many records a scope holds for each write its log keeps (a
-- scope of n records keeps the last max(ARGV[4], n / ARGV[6]) writes, and
-- up to TRIM_AFTER more, so that a copy of a large scope seldom reads it
-- whole), 7 how long after its
-- decision a write still applies (ms), 8 how long the credential's block
-- lives if this writes it (ms); to write, then: 9 when the copy decided, in
-- Redis time as it estimated it (unix ms: a write that reaches Redis more
-- than ARGV[7] later, as after a pause, is refused like one that missed
-- writes, and decided again at Redis's time, so that no lease it grants has
-- already run out), 10 the blob, 11 the log entry, 12 how long the scope's
-- keys live (ms), 13 the release to announce on the scope's channel and 14
-- the tickets come due to announce on it ('' for none: notify.go reads
-- them), 15 the credential's block ('' unchanged, '-' deleted, else '+' and
-- the block), 16 on: names and values of the changed records ('' deletes).
--
-- Reply to a write that applied: {'ok', the scope's version, the block's}.
-- Else: {'missed', TIME s, TIME µs, the scope's version, its last write's
-- time, the mode, the blob ('' for a read of a current copy), the block's
-- version, the block ('' for none), n, then n entries or names and values,
-- then the values of the names the write gave ('' for none)}. The mode is
-- 'same' (the copy is current), 'log' (the log's entries after the copy's
-- version follow), 'all' (every record follows, names and values) or 'far'
-- (the copy is further behind than the log and the scope holds more
-- records than one script reads: the engine reads them with HSCAN).

local have, credHave, what = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local logLength, readAtOnce, recordsPerWrite = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local writeMaxAge, credTTL, decided = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
local blob, entry, ttl, release, due, cred = ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]
local FIRST_RECORD = 16 -- the changed records' names and values follow
-- TRIM_AFTER is how many writes past those it keeps the log holds before
-- it is trimmed: a write of a small scope then counts and trims its log
-- once in five, not every time (two commands fewer).
local TRIM_AFTER = 4

-- nextVersion is the version a write after version cur gives: cur + 1, or
-- for the first write since the keys expired (cur 0) Redis time in
-- microseconds, so that a copy of the keys before they expired never finds
-- its version again: no scope is written once a microsecond, so the
-- versions of its keys before they expired stay below that time.
local function nextVersion(cur)
  if cur > 0 then return cur + 1 end
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end

-- num gives version n as Redis and the worker read it: every digit
-- (tostring, and Redis for a number it is given, keep 14).
local function num(n) return string.format('%d', n) end

-- writeCredential sets the credential's block as cred says, and returns
-- its new version.
local function writeCredential(cv)
  if cred == '' then return cv end
  cv = nextVersion(cv)
  redis.call('HSET', KEYS[3], 'v', num(cv))
  if cred == '-' then
    redis.call('HDEL', KEYS[3], 'b')
  else
    redis.call('HSET', KEYS[3], 'b', string.sub(cred, 2))
  end
  redis.call('PEXPIRE', KEYS[3], credTTL)
  return cv
end

local credStored = redis.call('HMGET', KEYS[3], 'v', 'b')
local cv, block = tonumber(credStored[1] or '0'), credStored[2] or ''
if what == 'cred' then
  -- The credential's block alone, whichever engine holds the scope: written
  -- if the copy's version is current, else {'cred', TIME s, TIME µs, the
  -- version, the block ('' for none)}.
  if credHave == cv then return {'ok', '0', num(writeCredential(cv))} end
  local t = redis.call('TIME')
  return {'cred', t[1], t[2], num(cv), block}
end
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v == 0 and redis.call('EXISTS', KEYS[5]) == 1 then return {'scripts'} end
local write = what ~= 'read' and what ~= 'reload'

-- decidedLately reports whether a write reaches Redis within writeMaxAge
-- of its decision (both ms).
local function decidedLately()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000) - decided <= writeMaxAge
end

if write and have == v and credHave == cv and decidedLately() then
  v = nextVersion(v)
  local set, del = {'v', num(v), 'b', blob, 't', what}, {}
  for i = FIRST_RECORD, #ARGV, 2 do
    if ARGV[i + 1] == '' then
      del[#del + 1] = ARGV[i]
    else
      set[#set + 1] = ARGV[i]
      set[#set + 1] = ARGV[i + 1]
    end
  end
  redis.call('HSET', KEYS[1], unpack(set))
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
  local logged = redis.call('RPUSH', KEYS[2], entry)
  if logged > logLength + TRIM_AFTER then
    local keep = math.max(logLength, math.floor(redis.call('HLEN', KEYS[1]) / recordsPerWrite))
    if logged > keep + TRIM_AFTER then redis.call('LTRIM', KEYS[2], -keep, -1) end
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  -- The log's life is renewed once in TRIM_AFTER + 1 writes, not each
  -- time: a log that goes before the records only makes copies read them
  -- whole, and one that stays after holds the writes before them at its
  -- head, which no copy reads (a version of the records' next life is
  -- Redis time, further from any before than the log is long).
  if logged % (TRIM_AFTER + 1) == 1 then redis.call('PEXPIRE', KEYS[2], ttl) end
  cv = writeCredential(cv)
  if release ~= '' then redis.call('SPUBLISH', KEYS[4], release) end
  if due ~= '' then redis.call('SPUBLISH', KEYS[4], due) end
  return {'ok', num(v), num(cv)}
end

local t = redis.call('TIME')
local fields = {'b', 't'}
for i = FIRST_RECORD, #ARGV, 2 do fields[#fields + 1] = ARGV[i] end
local got = redis.call('HMGET', KEYS[1], unpack(fields))

-- missedWrites returns the log's entries of the writes after the copy's
-- version, nil if the log no longer holds them all: a copy a few writes
-- behind reads them at once, one further behind counts the log first.
local function missedWrites()
  local behind = v - have
  if have < 0 or behind <= 0 then return nil end
  if behind > logLength + TRIM_AFTER and behind > redis.call('LLEN', KEYS[2]) then return nil end
  local entries = redis.call('LRANGE', KEYS[2], -behind, -1)
  if #entries < behind then return nil end
  return entries
end

local mode, body = 'same', {}
if have ~= v then
  local entries = missedWrites()
  if entries then
    mode, body = 'log', entries
  elseif redis.call('HLEN', KEYS[1]) > readAtOnce then
    mode = 'far'
  else
    mode = 'all'
    local all = redis.call('HGETALL', KEYS[1])
    for i = 1, #all, 2 do
      local name = all[i]
      if name ~= 'v' and name ~= 'b' and name ~= 't' then
        body[#body + 1] = name
        body[#body + 1] = all[i + 1]
      end
    end
  end
end
local storedBlob = got[1] or ''
if mode == 'same' and what == 'read' then storedBlob = '' end -- current: nothing to apply
local out = {'missed', t[1], t[2], num(v), got[2] or '0', mode, storedBlob, num(cv), block, tostring(#body)}
for _, x in ipairs(body) do out[#out + 1] = x end
for i = 3, #got do out[#out + 1] = got[i] or '' end
return out
