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

// windowScope is a store on a server of its own, on a manual clock, with a
// scope that granted one call (first) and then booked 8 more tickets than
// tuning.RetimeWindow, one a second: 1 request/s, tokens to spare.
type windowScope struct {
	s     *Store
	rdb   *redis.Client
	clock *capacitytest.ManualClock
	first capacity.Lease
}

var windowCharges = capacity.Charges{capacity.Requests: 1, capacity.Tokens: 1000}

func newWindowScope(t *testing.T) *windowScope {
	srv := testenv.StartRedisServer(t, "")
	w := &windowScope{rdb: redis.NewClient(&redis.Options{Addr: srv.Addr()}), clock: capacitytest.NewManualClock(time.Unix(1_800_000_000, 0))}
	t.Cleanup(func() { _ = w.rdb.Close() })
	var err error
	w.s, err = New(w.rdb, Options{Engine: EngineScripts, Clock: w.clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.s.Close() })
	first, err := w.s.Reserve(context.Background(), w.req("first"))
	require.NoError(t, err)
	require.True(t, first.Granted)
	w.first = first.Lease
	for i := range tuning.RetimeWindow + 8 {
		res, err := w.s.Reserve(context.Background(), w.req(fmt.Sprint("t", i)))
		require.NoError(t, err)
		require.True(t, res.Booked)
	}
	return w
}

func (w *windowScope) req(call string) capacity.Request {
	l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6_000_000, SafetyMargin: 1, Burst: time.Second}
	return capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: windowCharges, Book: true}
}

// ticketReads runs op and returns the HGETs the server ran for it: the
// tickets a script read one by one, and a lease or two.
func (w *windowScope) ticketReads(t *testing.T, op func() error) int {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, w.rdb.ConfigResetStat(ctx).Err())
	require.NoError(t, op())
	stats, err := w.rdb.Info(ctx, "commandstats").Result()
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

func (w *windowScope) reserve(call string) func() error {
	return func() error { _, err := w.s.Reserve(context.Background(), w.req(call)); return err }
}

// TestWindowRetimedOnlyWhenATicketLeft: after a refund moved the first
// tickets of a scope with more booked, a reserve reads them again only
// once a ticket left them (memScope.windowCurrent); a booking before that
// reads none.
func TestWindowRetimedOnlyWhenATicketLeft(t *testing.T) {
	w := newWindowScope(t)
	ctx := context.Background()
	used := windowCharges
	used[capacity.Requests] = 0 // the provider did not count it: a refund in the bucket the tickets wait on
	require.Greater(t, w.ticketReads(t, func() error { return w.s.Settle(ctx, w.first, used) }), tuning.RetimeWindow-1, "the refund moves the first")
	require.Less(t, w.ticketReads(t, w.reserve("late")), tuning.RetimeWindow, "a booking while the first tickets are current")
	// The head ticket's call claims it at its time, and the next reserve
	// retimes the first again.
	snap, err := w.s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	w.clock.Advance(snap.Tickets[0].At.Sub(w.clock.Now()))
	claim, err := w.s.Reserve(ctx, w.req(snap.Tickets[0].Call))
	require.NoError(t, err)
	require.True(t, claim.Granted)
	require.GreaterOrEqual(t, w.ticketReads(t, w.reserve("later")), tuning.RetimeWindow, "a booking after a ticket left the first")
}

// TestChargeThatMovesNoTicketReadsNone: a refund or a debt in a bucket
// whose level holds every ticket before and after (tokens, here: the
// tickets wait on requests) moves none, and reads none of them
// (memScope.chargeMovesTickets). Until scripts 5.5 every debt read them.
func TestChargeThatMovesNoTicketReadsNone(t *testing.T) {
	for _, tokens := range []int64{100, 2000} {
		t.Run(fmt.Sprint("tokens used ", tokens, " of ", windowCharges[capacity.Tokens]), func(t *testing.T) {
			w := newWindowScope(t)
			used := windowCharges
			used[capacity.Tokens] = tokens
			require.Less(t, w.ticketReads(t, func() error { return w.s.Settle(context.Background(), w.first, used) }), tuning.RetimeWindow)
		})
	}
}

// TestMovesBackReadOnlyTheFirstTickets: a move that pushes the tickets
// back (debt, a lower reported level, a lower limit) reads the first
// tuning.RetimeWindow tickets, not all of them (memScope.retime). Until
// scripts 5.5 each read every ticket.
func TestMovesBackReadOnlyTheFirstTickets(t *testing.T) {
	ctx := context.Background()
	booked := tuning.RetimeWindow + 8
	for _, c := range []struct {
		name string
		move func(w *windowScope) error
	}{
		{"debt", func(w *windowScope) error {
			used := windowCharges
			used[capacity.Requests] = 3 // the provider counted two retries
			return w.s.Settle(ctx, w.first, used)
		}},
		{"lower report", func(w *windowScope) error {
			var o capacity.Observation
			o.Dims[capacity.Requests] = capacity.DimensionObservation{HasLimit: true, Limit: 30, HasRemaining: true, Remaining: 0}
			o.Mark = w.first.Mark
			return w.s.Observe(ctx, keysScope, o)
		}},
		{"lower limit", func(w *windowScope) error {
			r := w.req("lowered")
			r.Limits.RequestsPerMinute = 30
			_, err := w.s.Reserve(ctx, r)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWindowScope(t)
			reads := w.ticketReads(t, func() error { return c.move(w) })
			require.GreaterOrEqual(t, reads, tuning.RetimeWindow, "the first tickets move")
			require.Less(t, reads, booked, "the others keep their times")
		})
	}
}
