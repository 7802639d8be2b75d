package redisstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

var _ capacity.Learner = (*Store)(nil)

// What a store learns (capacity.Learner) is kept in three keys per scope,
// beside its state and under the same hash tag:
//
//	{P:C}:learn:K:KIND   a kind's histograms (out, in, max); TTL: learn.Memory after its last sample
//	{P:C}:learnin:K      the scope's input ratio histogram (ratio); TTL: likewise
//	{P:C}:learnkinds:K   the scope's kinds by their last sample's time (sorted set)
//
// A histogram H of a hash is its fields H.n (the count, for the cap),
// H.s (the sum) and H.<bucket> (the count in learn.Histogram's bucket),
// all decimal numbers; t is the last sample's time in unix microseconds.
// KIND passes capacity.ValidateKind (no ':'), so a kind's key names one
// scope and one kind.
const (
	learnInfix      = ":learn:"
	learnRatioInfix = ":learnin:"
	learnKindsInfix = ":learnkinds:"
)

// Histogram field prefixes.
const (
	histOutput = "out"
	histInput  = "in"
	histMax    = "max"
	histRatio  = "ratio"
)

// learnScript is Learner.Learn: one round trip that adds a sample to the
// kind's histograms and, with a ratio, to the scope's, halving a histogram
// whose count passes the cap as learn.Histogram.Add does.
var learnScript = redis.NewScript(`
-- KEYS: 1 the kind's hash, 2 the scope's ratio hash, 3 the scope's kinds.
-- ARGV: 1 now in µs ('' = TIME), 2 memory in µs, 3 key TTL in ms, 4 cap,
--       5 kind, then (histogram, bucket, value) triples: three for the
--       kind, and a fourth for the ratio if the sample has one.
local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = t[1] * 1000000 + t[2]
end
local MEMORY, TTL, CAP, KIND = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local FORGET = 1 / 64 -- capacity.histogramForget

-- What a hash learned is forgotten MEMORY after its last sample.
local function forget_if_old(key)
  local t = tonumber(redis.call('HGET', key, 't'))
  if t and NOW - t > MEMORY then redis.call('DEL', key) end
end

-- halve halves every bucket and the sum of histogram h, drops buckets left
-- at or below FORGET, and sets the count to what is left.
local function halve(key, h)
  local fields = redis.call('HGETALL', key)
  local n = 0
  for i = 1, #fields, 2 do
    local f, v = fields[i], tonumber(fields[i + 1]) or 0
    if f == h .. '.s' then
      redis.call('HSET', key, f, string.format('%.17g', v / 2))
    elseif f ~= h .. '.n' and string.sub(f, 1, #h + 1) == h .. '.' then
      if v / 2 <= FORGET then
        redis.call('HDEL', key, f)
      else
        redis.call('HSET', key, f, string.format('%.17g', v / 2))
        n = n + v / 2
      end
    end
  end
  redis.call('HSET', key, h .. '.n', string.format('%.17g', n))
end

local function add(key, h, bucket, value)
  redis.call('HINCRBYFLOAT', key, h .. '.' .. bucket, 1)
  redis.call('HINCRBYFLOAT', key, h .. '.s', value)
  if tonumber(redis.call('HINCRBYFLOAT', key, h .. '.n', 1)) > CAP then halve(key, h) end
end

local function learn(key, first, last)
  forget_if_old(key)
  for i = first, last, 3 do add(key, ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
  redis.call('HSET', key, 't', string.format('%.0f', NOW))
  redis.call('PEXPIRE', key, TTL)
end

learn(KEYS[1], 6, 14)
if #ARGV >= 17 then learn(KEYS[2], 15, 17) end
redis.call('ZADD', KEYS[3], NOW, KIND)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. string.format('%.0f', NOW - MEMORY))
redis.call('PEXPIRE', KEYS[3], TTL)
return 1
`)

// learnKeys returns the names of the kind's hash, the scope's ratio hash
// and the scope's kinds.
func (k *scopeKeys) learnKeys(prefix, kind string) []string {
	tag := "{" + prefix + ":" + k.credKey + "}"
	return []string{tag + learnInfix + k.scopeKey + ":" + kind, tag + learnRatioInfix + k.scopeKey, tag + learnKindsInfix + k.scopeKey}
}

// histArgs appends the (histogram, bucket, value) triple of v.
func histArgs(args []any, h string, v float64) ([]any, error) {
	i, err := learn.BucketOf(v)
	if err != nil {
		return nil, err
	}
	return append(args, h, i, strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// Learn implements capacity.Learner: one script, one round trip.
func (s *Store) Learn(ctx context.Context, sc capacity.Scope, kind string, smp learn.Sample) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
		return err
	}
	if err := capacity.ValidateKind(kind); err != nil {
		return err
	}
	if err := smp.Validate(); err != nil {
		return err
	}
	if err := s.down("learn"); err != nil {
		return err
	}
	ttl := (learn.Memory + slack).Milliseconds()
	args := []any{s.nowArg(), learn.Memory.Microseconds(), ttl, learn.DefaultCap, kind}
	var err error
	for _, hv := range []struct {
		h string
		v int64
	}{{histOutput, smp.OutputTokens}, {histInput, smp.InputTokens}, {histMax, smp.MaxTokens}} {
		if args, err = histArgs(args, hv.h, float64(hv.v)); err != nil {
			return err
		}
	}
	if r, ok := smp.InputRatio(); ok {
		if args, err = histArgs(args, histRatio, r); err != nil {
			return err
		}
	}
	if err := learnScript.Run(ctx, s.rdb, s.keysFor(sc).learnKeys(s.opts.Prefix, kind), args...).Err(); err != nil {
		return s.failed(ctx, "learn", err)
	}
	s.up()
	return nil
}

// Learned implements capacity.Learner: two reads in one pipeline.
func (s *Store) Learned(ctx context.Context, sc capacity.Scope, kind string) (learn.Learned, error) {
	if err := ctx.Err(); err != nil {
		return learn.Learned{}, err
	}
	if err := sc.Validate(); err != nil {
		return learn.Learned{}, err
	}
	if err := capacity.ValidateKind(kind); err != nil {
		return learn.Learned{}, err
	}
	if err := s.down("learned"); err != nil {
		return learn.Learned{}, err
	}
	keys := s.keysFor(sc).learnKeys(s.opts.Prefix, kind)
	var kindCmd, ratioCmd *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		kindCmd = p.HGetAll(ctx, keys[0])
		ratioCmd = p.HGetAll(ctx, keys[1])
		return nil
	})
	if err != nil {
		return learn.Learned{}, s.failed(ctx, "learned", err)
	}
	s.up()
	l, err := parseLearned(kindCmd.Val(), ratioCmd.Val(), s.localNow())
	if err != nil {
		return learn.Learned{}, fmt.Errorf("%w: learned %s %s: %v", ErrBadReply, sc.Key(), kind, err)
	}
	return l, nil
}

// LearnedKinds implements capacity.Learner.
func (s *Store) LearnedKinds(ctx context.Context, sc capacity.Scope) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := s.down("learnedkinds"); err != nil {
		return nil, err
	}
	key := s.keysFor(sc).learnKeys(s.opts.Prefix, "_")[2]
	since := s.localNow().Add(-learn.Memory).UnixMicro()
	kinds, err := s.rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: strconv.FormatInt(since, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, s.failed(ctx, "learnedkinds", err)
	}
	s.up()
	kinds = slices.DeleteFunc(kinds, func(k string) bool { return capacity.ValidateKind(k) != nil })
	slices.Sort(kinds)
	return kinds, nil
}

// LearnedScopes lists the scopes that learned something under the store's
// prefix within learn.Memory, sorted by key. Like Scopes it scans, so it
// is for operators and tools (`tollgate advise`).
func (s *Store) LearnedScopes(ctx context.Context) ([]capacity.Scope, error) {
	return s.scanScopes(ctx, learnKindsInfix, "learned scopes")
}

// parseLearned reads what a kind's hash and its scope's ratio hash hold
// (HGETALL replies) as of now: a hash whose last sample is older than
// learn.Memory reads as empty. Fields it does not know are ignored (the
// format only grows); a known field that is not a number, a bucket out of
// range or a negative count is an error.
func parseLearned(kind, ratio map[string]string, now time.Time) (learn.Learned, error) {
	var l learn.Learned
	if t, ok, err := learnedAt(kind, now); err != nil {
		return learn.Learned{}, err
	} else if ok {
		l.Updated = t
		for _, h := range []struct {
			name string
			dst  *learn.Histogram
		}{{histOutput, &l.Output}, {histInput, &l.Input}, {histMax, &l.MaxTokens}} {
			if *h.dst, err = parseHistogram(kind, h.name); err != nil {
				return learn.Learned{}, err
			}
		}
	}
	if _, ok, err := learnedAt(ratio, now); err != nil {
		return learn.Learned{}, err
	} else if ok {
		if l.InputRatio, err = parseHistogram(ratio, histRatio); err != nil {
			return learn.Learned{}, err
		}
	}
	return l, nil
}

// learnedAt returns when a hash last learned, and false if it never did or
// it is forgotten at now.
func learnedAt(fields map[string]string, now time.Time) (time.Time, bool, error) {
	v, ok := fields["t"]
	if !ok {
		return time.Time{}, false, nil
	}
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil || us < 0 {
		return time.Time{}, false, fmt.Errorf("field t is %q, want unix microseconds", v)
	}
	t := fromMicros(us)
	return t, now.Sub(t) <= learn.Memory, nil
}

// parseHistogram reads histogram h from a hash's fields. Its count is the
// sum of its buckets (h.n is the script's running count).
func parseHistogram(fields map[string]string, h string) (learn.Histogram, error) {
	var out learn.Histogram
	for f, v := range fields {
		name, ok := strings.CutPrefix(f, h+".")
		if !ok || name == "n" {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return learn.Histogram{}, fmt.Errorf("field %s is %q, want a finite number >= 0", f, v)
		}
		if name == "s" {
			if err := out.AddSum(x); err != nil {
				return learn.Histogram{}, err
			}
			continue
		}
		i, err := strconv.Atoi(name)
		if err != nil {
			continue // a field of a later format
		}
		if err := out.AddBucket(i, x, 0); err != nil {
			return learn.Histogram{}, fmt.Errorf("field %s: %w", f, err)
		}
	}
	return out, nil
}
