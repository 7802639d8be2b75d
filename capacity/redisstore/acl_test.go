package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// aclRules is the least a store's Redis user needs (see the package doc);
// aclFunctions lets it load and call the scripts' function library.
const (
	aclRules = "on >s3cret resetkeys ~{tollgate:* resetchannels &{tollgate:* -@all " +
		"+evalsha +eval +evalsha_ro +eval_ro +ssubscribe +sunsubscribe +ping +hello +del +exists " +
		"+time +get +mget +set +hget +hmget +hset +hdel +hgetall +hincrby +hincrbyfloat +pexpire " +
		"+zadd +zrem +zscore +zremrangebyscore +zrange +zrevrange +zrangebyscore +zcard +zcount +spublish +rpush +lrange +ltrim"
	aclFunctions = "+fcall +fcall_ro +function|load"
)

// TestACLUser: a store works as a Redis user restricted to its prefix and
// the commands the package doc lists: with EVALSHA alone, and with the
// function library where the user may load it.
func TestACLUser(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, rules string
		functions   bool
	}{
		{"least", aclRules, false},
		{"functions", aclRules + " " + aclFunctions, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testACLUser(t, tt.rules, tt.functions)
		})
	}
}

// lapses grants and books more calls than one script reclaims, and lets
// them lapse: the reclaim in several scripts, and the links it keeps,
// run as the user too.
func lapses(t *testing.T, rdb *redis.Client) {
	clock := capacitytest.NewManualClock(time.Now())
	s, err := New(rdb, Options{Engine: EngineScripts, Clock: clock})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "lapses"}
	l := capacity.Limits{RequestsPerMinute: 1200}
	for i := range 300 {
		_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: strconv.Itoa(i), Attempt: 1, Charges: oneCharge(), Book: true,
			TTL: time.Second, Fairness: capacity.Fairness{Key: "k" + strconv.Itoa(i%3)}})
		require.NoError(t, err)
	}
	clock.Advance(time.Hour)
	_, err = s.Summary(ctx, sc, "")
	require.NoError(t, err)
	_, err = s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "next", Attempt: 1, Charges: oneCharge(), Book: true})
	require.NoError(t, err)
	require.Positive(t, s.Stats().ReclaimScripts)
}

func testACLUser(t *testing.T, rules string, functions bool) {
	srv := testenv.StartRedisServer(t, "")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, append([]any{"ACL", "SETUSER", "tollgate"}, toAny(strings.Fields(rules))...)...).Err())

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tollgate", Password: "s3cret"})
	defer rdb.Close()
	s, err := New(rdb, Options{Engine: EngineScripts})
	require.NoError(t, err)
	defer s.Close()
	ch, stop := s.Released(keysScope)
	defer stop()
	l := capacity.Limits{RequestsPerMinute: 60, RequestsPerDay: 100, MaxInFlight: 1}
	res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge(), Book: true})
	require.NoError(t, err)
	require.True(t, res.Granted)
	denied, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge(), Book: true})
	require.NoError(t, err)
	require.False(t, denied.Granted)
	_, err = s.Renew(ctx, res.Lease, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Observe(ctx, keysScope, capacity.Observation{}))
	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	<-ch
	require.NoError(t, s.Release(ctx, capacity.Lease{Scope: keysScope, Call: "b"}))
	require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Second)}))
	require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Second), Credential: true}))
	require.NoError(t, s.Unblock(ctx, keysScope, true))
	require.NoError(t, s.Unblock(ctx, keysScope, false))
	_, err = s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	lapses(t, rdb)
	_, err = s.AddFailure(ctx, keysScope, "a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Learn(ctx, keysScope, "k", learn.Sample{OutputTokens: 1}))
	_, err = s.Learned(ctx, keysScope, "k")
	require.NoError(t, err)
	_, err = s.Record(ctx, ledger.Entry{Lease: "a#1", Day: "2026-10-15", Scope: keysScope, Cost: 1})
	require.NoError(t, err)
	_, err = s.Spent(ctx, "2026-10-15", "", keysScope.CredentialKey())
	require.NoError(t, err)
	_, err = s.LedgerRows(ctx, "2026-10-15")
	require.NoError(t, err)
	stats, err := admin.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	// The learned reservations and the ledger are scripts of their own,
	// sent with EVALSHA either way; a refused FCALL counts as rejected.
	require.Equal(t, functions, commandCalls(stats, "fcall") > 0, "FCALL ran:\n%s", stats)
	require.Equal(t, functions, commandCalls(stats, "fcall_ro") > 0, "FCALL_RO ran (Snapshot):\n%s", stats)
	require.Equal(t, !functions, commandCalls(stats, "evalsha_ro") > 0, "EVALSHA_RO ran (Snapshot):\n%s", stats)
	require.Equal(t, !functions, s.functions.off.Load(), "functions turned off")
	// Outside its prefix the user can do nothing.
	other, err := New(rdb, Options{Engine: EngineScripts, Prefix: "other"})
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "c", Attempt: 1, Charges: oneCharge()})
	require.ErrorContains(t, err, "NOPERM")
}

// commandCalls is the calls of command that ran, from INFO commandstats.
func commandCalls(stats, command string) int {
	_, rest, ok := strings.Cut(stats, "cmdstat_"+command+":calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
