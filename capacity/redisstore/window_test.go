package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestWindowRetimedOnlyWhenATicketLeft: after a refund moved the first
// tickets of a scope with more booked, a reserve reads them again only
// once a ticket left them (memScope.windowCurrent); a booking before that
// reads none. The ticket reads a call made, counted on a server of its
// own (INFO commandstats), tell the two apart.
func TestWindowRetimedOnlyWhenATicketLeft(t *testing.T) {
	srv := testenv.StartRedisServer(t, "")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := capacitytest.NewManualClock(time.Unix(1_800_000_000, 0))
	s, err := New(rdb, Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6_000_000, SafetyMargin: 1, Burst: time.Second} // 1 request/s
	charges := capacity.Charges{capacity.Requests: 1, capacity.Tokens: 1000}
	req := func(call string) capacity.Request {
		return capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: charges, Book: true}
	}
	first, err := s.Reserve(ctx, req("first"))
	require.NoError(t, err)
	require.True(t, first.Granted)
	n := tuning.ReleaseRetime + 8
	for i := range n {
		res, err := s.Reserve(ctx, req(fmt.Sprint("t", i)))
		require.NoError(t, err)
		require.True(t, res.Booked)
	}
	used := charges
	used[capacity.Tokens] = 100
	require.NoError(t, s.Settle(ctx, first.Lease, used)) // a refund: the first tickets move

	ticketReads := func(t *testing.T, call string) int {
		t.Helper()
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		_, err := s.Reserve(ctx, req(call))
		require.NoError(t, err)
		stats, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(stats, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_hget:calls="); ok {
				calls, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				require.NoError(t, err)
				return calls
			}
		}
		return 0
	}
	require.Less(t, ticketReads(t, "late"), tuning.ReleaseRetime, "a booking while the first tickets are current")
	// The head ticket's call claims it at its time, and the next reserve
	// retimes the first again.
	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	clock.Advance(snap.Tickets[0].At.Sub(clock.Now()))
	claim, err := s.Reserve(ctx, req(snap.Tickets[0].Call))
	require.NoError(t, err)
	require.True(t, claim.Granted)
	require.GreaterOrEqual(t, ticketReads(t, "later"), tuning.ReleaseRetime, "a booking after a ticket left the first")
}
