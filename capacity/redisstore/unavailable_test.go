package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// closedClient returns a client pointed at a port nothing listens on.
func closedClient(t *testing.T) *redis.Client {
	t.Helper()
	rdb, _ := countingClosedClient(t)
	return rdb
}

// countingClosedClient returns a client pointed at a port nothing listens
// on, and the number of commands (or pipelines) it was asked to send.
func countingClosedClient(t *testing.T) (*redis.Client, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: 1})
	tries := new(atomic.Int64)
	rdb.AddHook(commandCounter{tries})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, tries
}

// commandCounter counts the commands and pipelines a client is asked to
// send: what the store tries, unlike dials, which go-redis also makes in
// the background to probe a failed address.
type commandCounter struct{ n *atomic.Int64 }

func (c commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

var unavailableScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "down"}

func unavailableReq(call string, l capacity.Limits) capacity.Request {
	var c capacity.Charges
	c[capacity.Requests], c[capacity.RequestsPerDay], c[capacity.InFlight] = 1, 1, 1
	c[capacity.InputTokens], c[capacity.Tokens] = 100, 100
	return capacity.Request{Scope: unavailableScope, Limits: l, Call: call, Attempt: 1, Charges: c}
}

// TestFailClosed: with Redis unreachable every operation returns an error
// wrapping capacity.ErrStoreUnavailable, nothing is granted, and calls after
// the first fail at once until the next probe.
func TestFailClosed(t *testing.T) {
	t.Parallel()
	rdb, sent := countingClosedClient(t)
	s, err := New(rdb, Options{Engine: EngineScripts, ProbeInterval: time.Minute})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 600}

	res, err := s.Reserve(ctx, unavailableReq("a", l))
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.False(t, res.Granted)
	var netErr net.Error
	require.True(t, errors.As(err, &netErr), "the cause is kept: %v", err)

	// Failing at once is counted, not timed: the first call tried Redis,
	// the calls after it (ProbeInterval is a minute) send it nothing.
	tried := sent.Load()
	require.Positive(t, tried, "the first call tried Redis")
	_, err = s.Reserve(ctx, unavailableReq("b", l))
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.Equal(t, tried, sent.Load(), "nothing sent until the next probe")

	le := capacity.Lease{Scope: unavailableScope, ID: "a#1", Call: "a", Attempt: 1}
	for name, err := range map[string]error{
		"settle":  s.Settle(ctx, le, le.Charges),
		"release": s.Release(ctx, le),
		"observe": s.Observe(ctx, unavailableScope, capacity.Observation{}),
		"block":   s.Block(ctx, unavailableScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Second)}),
		"unblock": s.Unblock(ctx, unavailableScope, false),
	} {
		require.ErrorIs(t, err, capacity.ErrStoreUnavailable, name)
	}
	_, err = s.Renew(ctx, le, time.Minute)
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	_, err = s.Snapshot(ctx, unavailableScope)
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	_, err = s.AddFailure(ctx, unavailableScope, "a", time.Minute)
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)

	// Waiting is not a way around it.
	_, err = capacity.Wait(ctx, s, unavailableReq("c", l), capacity.WaitOptions{MaxWait: time.Second})
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.Positive(t, s.Stats().Unavailable)
	require.Equal(t, tried, sent.Load(), "every operation failed without trying Redis")
}

// TestFallbackLocal: with Redis unreachable, a FallbackLocal store admits
// from a local budget with every limit scaled by FallbackFraction, and its
// leases settle locally.
func TestFallbackLocal(t *testing.T) {
	t.Parallel()
	s, err := New(closedClient(t), Options{Engine: EngineScripts, OnUnavailable: FallbackLocal, FallbackFraction: 0.1})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	// 600/min with margin 1 and a 5 s burst: 50 at once; a tenth of it: 5.
	l := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second}

	var leases []capacity.Lease
	for i := range 5 {
		res, err := s.Reserve(ctx, unavailableReq("call-"+string(rune('a'+i)), l))
		require.NoError(t, err)
		require.True(t, res.Granted, "grant %d", i)
		leases = append(leases, res.Lease)
	}
	res, err := s.Reserve(ctx, unavailableReq("call-z", l))
	require.NoError(t, err)
	require.False(t, res.Granted, "the local budget is a tenth of the shared one")
	require.Equal(t, capacity.DenyCapacity, res.Reason)
	require.Equal(t, 5, s.Stats().FallbackLeases)

	require.NoError(t, s.Settle(ctx, leases[0], leases[0].Charges))
	require.NoError(t, s.Release(ctx, leases[1]))
	_, err = s.Renew(ctx, leases[2], time.Minute)
	require.NoError(t, err)
	require.Equal(t, 3, s.Stats().FallbackLeases)

	// Larger than the local bucket but within the local limit: it waits
	// for a full local bucket.
	big := unavailableReq("big", l)
	big.Charges[capacity.InputTokens], big.Charges[capacity.Tokens] = 4000, 4000 // > 500 local bucket, < 6000 local limit
	res, err = s.Reserve(ctx, big)
	require.NoError(t, err)
	require.False(t, res.Granted)
	// Beyond the local limit but not the shared one: a wait (unavailable),
	// never a terminal DemandTooLargeError.
	big.Charges[capacity.InputTokens], big.Charges[capacity.Tokens] = 7000, 7000 // > 6000 local limit, < 60000 shared
	_, err = s.Reserve(ctx, big)
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.NotErrorIs(t, err, capacity.ErrDemandTooLarge)
	// Beyond the shared limit too: terminal.
	big.Charges[capacity.InputTokens], big.Charges[capacity.Tokens] = 60001, 60001
	_, err = s.Reserve(ctx, big)
	require.ErrorIs(t, err, capacity.ErrDemandTooLarge)

	// Blocks and failure counts are kept locally meanwhile.
	require.NoError(t, s.Block(ctx, unavailableScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Minute)}))
	res, err = s.Reserve(ctx, unavailableReq("blocked", l))
	require.NoError(t, err)
	require.Equal(t, capacity.DenyBlocked, res.Reason)
	n, err := s.AddFailure(ctx, unavailableScope, "call-a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestScaleLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want capacity.Limits
		frac     float64
	}{
		{"tenth", capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 30000, RequestsPerDay: 1000, MaxInFlight: 40, TokenBurst: 8000},
			capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 3000, RequestsPerDay: 100, MaxInFlight: 4, TokenBurst: 800}, 0.1},
		{"at least one", capacity.Limits{RequestsPerMinute: 5, MaxInFlight: 2}, capacity.Limits{RequestsPerMinute: 1, MaxInFlight: 1}, 0.1},
		{"unlimited stays unlimited", capacity.Limits{}, capacity.Limits{}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, scaleLimits(tc.in, tc.frac))
		})
	}
}

func TestOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero value", Options{}, true},
		{"fallback", Options{OnUnavailable: FallbackLocal, FallbackFraction: 0.25}, true},
		{"brace in prefix", Options{Prefix: "a{b"}, false},
		{"fallback without fraction", Options{OnUnavailable: FallbackLocal}, false},
		{"fraction above one", Options{OnUnavailable: FallbackLocal, FallbackFraction: 1.5}, false},
		{"fraction without fallback", Options{FallbackFraction: 0.5}, false},
		{"unknown policy", Options{OnUnavailable: 7}, false},
		{"negative probe", Options{ProbeInterval: -time.Second}, false},
		{"negative grace", Options{TicketGrace: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(rdb, tc.opts)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidOptions)
			}
		})
	}
	_, err := New(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestUnreachableErrorsOfAnyType: Redis found unreachable first with one
// kind of error and then with another (a dial timeout, then an i/o timeout
// on a pooled connection, as a loaded machine gives) is reported, never a
// panic: the last cause is kept whatever its type.
func TestUnreachableErrorsOfAnyType(t *testing.T) {
	t.Parallel()
	s, err := New(closedClient(t), Options{Engine: EngineScripts, ProbeInterval: time.Minute})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	first := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	second := fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
	for _, cause := range []error{first, second} {
		require.NotPanics(t, func() {
			require.ErrorIs(t, s.failed(ctx, "batch", cause), capacity.ErrStoreUnavailable)
		})
	}
	err = s.down("batch")
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the last cause: %v", err)
}
