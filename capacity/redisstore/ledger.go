package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/internal/redisscan"
)

var _ ledger.Ledger = (*Store)(nil)

// The cost ledger (ledger.Ledger) is kept in three keys per day, and a
// key per lease recorded, under the day's own hash tag, so a record is one
// script on one slot and a day's spend is read in one round trip:
//
//	{P:ledger:DAY}:rows           the day's rows: ROW|calls, ROW|unpriced, ROW|in, ROW|cin,
//	                              ROW|out (integers), ROW|cost (a decimal), and t, the last
//	                              record's time in unix µs; TTL: ledger.Retention after it
//	{P:ledger:DAY}:tenants        each tenant's cost that day; TTL: likewise
//	{P:ledger:DAY}:conns          each connection's (Scope.CredentialKey) cost that day; TTL: likewise
//	{P:ledger:DAY}:lease:LEASE    when the lease was recorded (unix µs); TTL: ledger.LeaseRetention
//
// ROW is scope-key|tenant|workflow-type: the scope key is path-escaped, a
// tenant passes capacity.ValidateFairnessKey and a workflow type
// capacity.ValidateKind, so none holds '|', and none is a secret. DAY is a
// ledger.DayLayout date. LEASE is the gate's lease id (a hash of
// the call's identity, and its attempt). The lease keys hold about an hour
// of calls; the rest is a few fields per row.
const (
	ledgerInfix   = ":ledger:"
	ledgerRows    = ":rows"
	ledgerTenants = ":tenants"
	ledgerConns   = ":conns"
	ledgerLease   = ":lease:"
	ledgerTime    = "t"
)

// Row fields, after ROW|.
const (
	colCalls    = "calls"
	colUnpriced = "unpriced"
	colInput    = "in"
	colCached   = "cin"
	colOutput   = "out"
	colCost     = "cost"
)

// recordScript is Ledger.Record: one round trip that forgets a day last
// recorded more than its memory ago, then, unless the lease was recorded
// less than its memory ago, adds the lease's figures to its row and to its
// tenant's and connection's cost.
var recordScript = redis.NewScript(`
-- KEYS: 1 rows, 2 tenants, 3 connections, 4 the lease's key.
-- ARGV: 1 now in µs ('' = TIME), 2 memory in µs, 3 lease memory in µs,
--       4 TTL in ms, 5 lease TTL in ms, 6 row, 7 tenant, 8 connection,
--       9 input, 10 cached input, 11 output, 12 cost, 13 unpriced (1 or 0).
local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = t[1] * 1000000 + t[2]
end
local MEMORY, LEASE_MEMORY = tonumber(ARGV[2]), tonumber(ARGV[3])

local recorded = tonumber(redis.call('GET', KEYS[4]))
if recorded and NOW - recorded <= LEASE_MEMORY then return 0 end
redis.call('SET', KEYS[4], string.format('%.0f', NOW), 'PX', ARGV[5])

local last = tonumber(redis.call('HGET', KEYS[1], 't'))
if last and NOW - last > MEMORY then redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) end
local row = ARGV[6] .. '|'
redis.call('HINCRBY', KEYS[1], row .. 'calls', 1)
redis.call('HINCRBY', KEYS[1], row .. 'unpriced', ARGV[13])
redis.call('HINCRBY', KEYS[1], row .. 'in', ARGV[9])
redis.call('HINCRBY', KEYS[1], row .. 'cin', ARGV[10])
redis.call('HINCRBY', KEYS[1], row .. 'out', ARGV[11])
redis.call('HINCRBYFLOAT', KEYS[1], row .. 'cost', ARGV[12])
redis.call('HSET', KEYS[1], 't', string.format('%.0f', NOW))
redis.call('HINCRBYFLOAT', KEYS[2], ARGV[7], ARGV[12])
redis.call('HINCRBYFLOAT', KEYS[3], ARGV[8], ARGV[12])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
return 1
`)

// ledgerKeys returns the names of day's rows, tenants and connections and,
// with a lease, the lease's key.
func (s *Store) ledgerKeys(day, lease string) []string {
	tag := "{" + s.opts.Prefix + ledgerInfix + day + "}"
	keys := []string{tag + ledgerRows, tag + ledgerTenants, tag + ledgerConns}
	if lease != "" {
		keys = append(keys, tag+ledgerLease+lease)
	}
	return keys
}

// ledgerRow returns the ROW of a row's fields.
func ledgerRow(sc capacity.Scope, tenant, wf string) string {
	return sc.Key() + "|" + tenant + "|" + wf
}

// Record implements ledger.Ledger: one script, one round trip.
func (s *Store) Record(ctx context.Context, e ledger.Entry) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := e.Validate(); err != nil {
		return false, err
	}
	if err := s.down("record"); err != nil {
		return false, err
	}
	unpriced := 0
	if e.Unpriced {
		unpriced = 1
	}
	args := []any{s.nowArg(), ledger.Retention.Microseconds(), ledger.LeaseRetention.Microseconds(),
		(ledger.Retention + slack).Milliseconds(), (ledger.LeaseRetention + slack).Milliseconds(),
		ledgerRow(e.Scope, e.Tenant, e.WorkflowType), e.Tenant, e.Scope.CredentialKey(),
		e.Tokens.Input, e.Tokens.CachedInput, e.Tokens.Output, strconv.FormatFloat(e.Cost, 'g', -1, 64), unpriced}
	n, err := recordScript.Run(ctx, s.rdb, s.ledgerKeys(e.Day, e.Lease), args...).Int64()
	if err != nil {
		return false, s.failed(ctx, "record", err)
	}
	s.up()
	return n == 1, nil
}

// Spent implements ledger.Ledger: three reads of one slot in one
// pipeline.
func (s *Store) Spent(ctx context.Context, day, tenant, connection string) (ledger.Spend, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Spend{}, err
	}
	if err := ledger.ValidateDay(day); err != nil {
		return ledger.Spend{}, err
	}
	if err := s.down("spent"); err != nil {
		return ledger.Spend{}, err
	}
	keys := s.ledgerKeys(day, "")
	var last, tc, cc *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		last = p.HGet(ctx, keys[0], ledgerTime)
		tc = p.HGet(ctx, keys[1], tenant)
		cc = p.HGet(ctx, keys[2], connection)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return ledger.Spend{}, s.failed(ctx, "spent", err)
	}
	s.up()
	if ok, err := s.dayKept(last.Val()); err != nil || !ok {
		return ledger.Spend{}, err
	}
	var sp ledger.Spend
	if sp.Tenant, err = parseCost(tc.Val()); err == nil {
		sp.Connection, err = parseCost(cc.Val())
	}
	if err != nil {
		return ledger.Spend{}, fmt.Errorf("%w: spent on %s: %v", ErrBadReply, day, err)
	}
	return sp, nil
}

// dayKept reports whether a day whose t field is v is still kept (not past
// ledger.Retention); false for a day never recorded.
func (s *Store) dayKept(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil || us < 0 {
		return false, fmt.Errorf("%w: ledger field t is %q, want unix microseconds", ErrBadReply, v)
	}
	return s.localNow().Sub(fromMicros(us)) <= ledger.Retention, nil
}

// LedgerRows implements ledger.Ledger. With no day it scans (SCAN, on
// every master of a cluster) for the days kept, so it is for operators and
// tools (`tollgate cost`), not for the admission path.
func (s *Store) LedgerRows(ctx context.Context, day string) ([]ledger.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if day != "" {
		if err := ledger.ValidateDay(day); err != nil {
			return nil, err
		}
	}
	if err := s.down("ledger rows"); err != nil {
		return nil, err
	}
	days := []string{day}
	if day == "" {
		var err error
		if days, err = s.ledgerDays(ctx); err != nil {
			return nil, err
		}
	}
	rows := []ledger.Row{}
	for _, d := range days {
		fields, err := s.rdb.HGetAll(ctx, s.ledgerKeys(d, "")[0]).Result()
		if err != nil {
			return nil, s.failed(ctx, "ledger rows", err)
		}
		if ok, err := s.dayKept(fields[ledgerTime]); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		dr, err := parseLedgerRows(d, fields)
		if err != nil {
			return nil, fmt.Errorf("%w: ledger of %s: %v", ErrBadReply, d, err)
		}
		rows = append(rows, dr...)
	}
	s.up()
	ledger.SortRows(rows)
	return rows, nil
}

// ledgerDays lists the days that have rows under the store's prefix.
func (s *Store) ledgerDays(ctx context.Context) ([]string, error) {
	prefix := "{" + s.opts.Prefix + ledgerInfix
	match := prefix + "*}" + ledgerRows
	seen := map[string]bool{}
	err := redisscan.Keys(ctx, s.rdb, match, 0, func(key string) {
		day, ok := strings.CutPrefix(key, prefix)
		if !ok {
			return
		}
		day, ok = strings.CutSuffix(day, "}"+ledgerRows)
		if ok && ledger.ValidateDay(day) == nil {
			seen[day] = true
		}
	})
	if err != nil {
		return nil, s.failed(ctx, "ledger days", err)
	}
	days := make([]string, 0, len(seen))
	for d := range seen {
		days = append(days, d)
	}
	return days, nil
}

// parseLedgerRows reads a day's rows from its hash's fields (an HGETALL
// reply). Fields it does not know are ignored (the format only grows); a
// known field that is not a number >= 0, or a row whose scope key does not
// parse, is an error.
func parseLedgerRows(day string, fields map[string]string) ([]ledger.Row, error) {
	byRow := map[string]*ledger.Row{}
	for f, v := range fields {
		i := strings.LastIndexByte(f, '|')
		if i < 0 {
			continue // t, or a field of a later format
		}
		row, col := f[:i], f[i+1:]
		parts := strings.Split(row, "|")
		if len(parts) != 3 {
			continue
		}
		r := byRow[row]
		if r == nil {
			sc, err := capacity.ParseScopeKey(parts[0])
			if err != nil {
				return nil, fmt.Errorf("field %s: %v", f, err)
			}
			r = &ledger.Row{Day: day, Scope: sc, Tenant: parts[1], WorkflowType: parts[2]}
			byRow[row] = r
		}
		var dst *int64
		switch col {
		case colCalls:
			dst = &r.Calls
		case colUnpriced:
			dst = &r.Unpriced
		case colInput:
			dst = &r.Input
		case colCached:
			dst = &r.CachedInput
		case colOutput:
			dst = &r.Output
		case colCost:
			c, err := parseCost(v)
			if err != nil {
				return nil, fmt.Errorf("field %s: %v", f, err)
			}
			r.Cost = c
			continue
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("field %s is %q, want an integer >= 0", f, v)
		}
		*dst = n
	}
	rows := make([]ledger.Row, 0, len(byRow))
	for _, r := range byRow {
		rows = append(rows, *r)
	}
	return rows, nil
}

// parseCost reads a cost ("" is zero): a finite number >= 0.
func parseCost(v string) (float64, error) {
	if v == "" {
		return 0, nil
	}
	c, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
		return 0, fmt.Errorf("cost is %q, want a finite number >= 0", v)
	}
	return c, nil
}
