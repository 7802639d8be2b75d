package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestLibraryCallsShareNothing: the function library's locals outlive its
// calls, so each call must begin anew (begin, resets in lua/state.lua). Two
// scopes use the same call names, one call after the other: what a call of
// one cached (its lease, its ticket, its flow) must not answer for the
// other.
func TestLibraryCallsShareNothing(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t, "")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Options{Engine: EngineScripts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	a := keysScope
	b := keysScope
	b.Credential = "team/b"
	l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second}
	one := capacity.Charges{capacity.Requests: 1}
	reserve := func(sc capacity.Scope, call string) capacity.Reservation {
		t.Helper()
		res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: call, Attempt: 1, Charges: one, Book: true})
		require.NoError(t, err)
		return res
	}

	// Scope a: call "x" holds its one slot's lease, "y" a ticket.
	require.True(t, reserve(a, "x").Granted)
	ya := reserve(a, "y")
	require.False(t, ya.Granted)
	require.True(t, ya.Booked)
	// Scope b: the same names are new calls. "y" is granted its own lease,
	// not refused as a's ticket not yet due; "x" then waits for b's bucket,
	// not answered with a's lease as a repeat.
	yb := reserve(b, "y")
	require.True(t, yb.Granted, "b's y answered with a's ticket")
	require.Equal(t, b, yb.Lease.Scope)
	xb := reserve(b, "x")
	require.False(t, xb.Granted, "b's x answered with a's lease")
	require.True(t, xb.Booked)

	snapA, err := s.Snapshot(ctx, a)
	require.NoError(t, err)
	snapB, err := s.Snapshot(ctx, b)
	require.NoError(t, err)
	require.Len(t, snapA.Leases, 1)
	require.Equal(t, "x", snapA.Leases[0].Call)
	require.Len(t, snapA.Tickets, 1)
	require.Equal(t, "y", snapA.Tickets[0].Call)
	require.Len(t, snapB.Leases, 1)
	require.Equal(t, "y", snapB.Leases[0].Call)
	require.Len(t, snapB.Tickets, 1)
	require.Equal(t, "x", snapB.Tickets[0].Call)
	require.False(t, s.functions.off.Load(), "the calls ran as functions")
}

// TestLibraryLoadedOnceByCallsThatMissItTogether: after Redis lost its
// functions (restarted empty), the calls that find the library missing at
// once load it once between them, not once each.
func TestLibraryLoadedOnceByCallsThatMissItTogether(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t, "")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Options{Engine: EngineScripts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60_000}
	reserve := func(credential string) error { // a scope each: no batch shares a call
		sc := keysScope
		sc.Credential = credential
		_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "c", Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}})
		return err
	}
	require.NoError(t, reserve("first")) // loads the library
	require.NoError(t, rdb.FunctionFlush(ctx).Err())
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { errs <- reserve(fmt.Sprint("herd-", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	require.Equal(t, 1, commandCalls(stats, "function|load"), "FUNCTION LOAD calls:\n%s", stats)
}

// TestRefused: only an error that refuses functions themselves turns the
// library off; a call refused its keys is an error of that call.
func TestRefused(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want bool
	}{
		{"NOPERM this user has no permissions to run the 'fcall' command", true},
		{"NOPERM this user has no permissions to run the 'function|load' command", true},
		{"ERR unknown command 'FCALL', with args beginning with: ", true},
		{"ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'", true},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", false},
		{"ERR Function not found", false},
		{"LOADING Redis is loading the dataset in memory", false},
		{"READONLY You can't write against a read only replica.", false},
	} {
		require.Equal(t, tt.want, refused(replyError(tt.msg)), tt.msg)
	}
	require.False(t, refused(context.DeadlineExceeded), "a timeout is not a refusal")
}

// replyError is an error reply from Redis, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
