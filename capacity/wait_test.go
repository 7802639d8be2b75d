package capacity_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// slowStore answers Reserve as the store it wraps does, but each answer
// takes lag to come back (a slow round trip).
type slowStore struct {
	capacity.Store
	lag time.Duration
}

func (s slowStore) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	r, err := s.Store.Reserve(ctx, req)
	time.Sleep(s.lag)
	return r, err
}

// TestWaitCountsTimeSpentAsking: the time that passes while a denial comes
// back is part of the wait, so Wait never sleeps past RetryAt. It runs in a
// synctest bubble: the store and Wait use the system clock, whose time moves
// only when every goroutine sleeps.
func TestWaitCountsTimeSpentAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := capacity.NewMemoryStore(capacity.MemoryOptions{})
		s := slowStore{Store: mem, lag: time.Second}
		sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "c"}
		l := capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1} // one a second
		charges := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
		_, err := mem.Reserve(context.Background(), capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges})
		require.NoError(t, err)

		// The next slot is a second away, and the denial takes that second
		// to arrive: Wait asks again at once instead of sleeping another
		// second. Two round trips, no sleep.
		start := time.Now()
		res, err := capacity.Wait(context.Background(), s, capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges}, capacity.WaitOptions{MaxWait: time.Minute})
		require.NoError(t, err)
		assert.True(t, res.Granted)
		assert.Equal(t, 2*time.Second, time.Since(start), "Wait slept past RetryAt")
	})
}

// listenStore counts the Reserve calls of a MemoryStore and the Released
// channels a waiter holds.
type listenStore struct {
	*capacity.MemoryStore
	reserves, listening atomic.Int64
}

func (s *listenStore) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	s.reserves.Add(1)
	return s.MemoryStore.Reserve(ctx, req)
}

func (s *listenStore) Released(sc capacity.Scope) (<-chan struct{}, func()) {
	ch, stop := s.MemoryStore.Released(sc)
	s.listening.Add(1)
	var once sync.Once
	return ch, func() {
		once.Do(func() { s.listening.Add(-1) })
		stop()
	}
}

// TestWaitTicketHolderIgnoresReleases: a call that booked a ticket sleeps
// until the ticket's time without listening for releases, so a release does
// not make it ask again to be told "not yet". It runs in a synctest bubble:
// the store and Wait use the bubble's clock.
func TestWaitTicketHolderIgnoresReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &listenStore{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{})}
		ctx := context.Background()
		sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "c"}
		l := capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1} // one a second
		charges := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
		held, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges})
		require.NoError(t, err)
		require.True(t, held.Granted)

		done := make(chan capacity.Reservation, 1)
		go func() {
			res, err := capacity.Wait(ctx, s, capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges, Book: true}, capacity.WaitOptions{})
			assert.NoError(t, err)
			done <- res
		}()
		synctest.Wait() // b booked a ticket and sleeps
		require.Equal(t, int64(2), s.reserves.Load(), "a's reserve and b's booking")
		require.Zero(t, s.listening.Load(), "a ticket holder does not listen for releases")
		require.NoError(t, s.Settle(ctx, held.Lease, charges))
		synctest.Wait()
		require.Equal(t, int64(2), s.reserves.Load(), "the release did not wake the ticket holder")
		res := <-done // at the ticket's time, a second later in the bubble
		require.True(t, res.Granted)
		// The settle charged what a reserved: b's ticket did not move, and
		// the store (a TicketNotifier) said nothing.
		require.Equal(t, int64(3), s.reserves.Load(), "a's reserve, b's booking and b's claim")
	})
}

// TestWaitAnnouncedMoves: a refund moves a booked ticket earlier, and the
// store tells its holder (TicketDue), which then claims it at its new time
// instead of its old one, when the move is more than tuning.AnnounceMove
// and a quarter of the wait left; otherwise the holder comes at the time
// it was told. Output tokens refill at 200 a second (5 ms a token) into a
// bucket of 2000 that a holds whole.
func TestWaitAnnouncedMoves(t *testing.T) {
	for _, tc := range []struct {
		name       string
		booked     int64 // b's charge: due booked/200 s after a's grant
		refund     int64 // what a's settle gives back at once
		wantWaited time.Duration
	}{
		{"a refund that makes the ticket due now is announced", 1600, 1600, 0},
		{"a short move near the end is announced", 60, 40, 100 * time.Millisecond},
		{"a move within tuning.AnnounceMove is not", 60, 1, 300 * time.Millisecond},
		{"a move within a quarter of the wait left is not", 1600, 200, 8 * time.Second},
		{"a move beyond a quarter of the wait left is", 1600, 600, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := capacity.NewMemoryStore(capacity.MemoryOptions{})
				ctx := context.Background()
				sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "c"}
				l := capacity.Limits{OutputTokensPerMinute: 12000, Burst: 10 * time.Second, SafetyMargin: 1}
				charges := func(out int64) capacity.Charges {
					return capacity.Charges{capacity.OutputTokens: out, capacity.InFlight: 1}
				}
				held, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges(2000)})
				require.NoError(t, err)
				require.True(t, held.Granted)

				start := time.Now()
				done := make(chan time.Duration, 1)
				go func() {
					res, err := capacity.Wait(ctx, s, capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges(tc.booked), Book: true}, capacity.WaitOptions{})
					assert.NoError(t, err)
					assert.True(t, res.Granted)
					done <- time.Since(start)
				}()
				synctest.Wait() // b sleeps on its ticket
				require.NoError(t, s.Settle(ctx, held.Lease, charges(2000-tc.refund)))
				assert.Equal(t, tc.wantWaited, <-done)
			})
		})
	}
}

// TestWaitOnKeyCaps: a call whose fairness key used its share of the scope
// (DenyKeyCap) waits for the share to refill, like an unbooked capacity
// denial, while a call whose key spent its tokens for the day
// (DenyKeyQuota) returns at once, even with no MaxWait: nothing before the
// day window's end can admit it. Another key is admitted meanwhile.
func TestWaitOnKeyCaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fairness   capacity.Fairness
		wantReason capacity.DenyReason // of the second call's Wait; 0: granted
		wantWaited time.Duration
	}{
		// 60 RPM in a 2 s burst: a bucket of 2 requests; a half share is 1
		// request refilling at 0.5 a second.
		{"share waits for its refill", capacity.Fairness{Key: "acme", Share: 0.5}, 0, 2 * time.Second},
		{"day's tokens return at once", capacity.Fairness{Key: "acme", TokensPerDay: 150}, capacity.DenyKeyQuota, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &listenStore{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{})}
				ctx := context.Background()
				sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "c"}
				l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 60000, Burst: 2 * time.Second, SafetyMargin: 1}
				charges := capacity.Charges{capacity.Requests: 1, capacity.Tokens: 100, capacity.InFlight: 1}
				req := func(call string, f capacity.Fairness) capacity.Request {
					return capacity.Request{Scope: sc, Limits: l, Call: call, Attempt: 1, Charges: charges, Fairness: f, Book: true}
				}
				first, err := s.Reserve(ctx, req("a", tc.fairness))
				require.NoError(t, err)
				require.True(t, first.Granted)

				start := time.Now()
				res, err := capacity.Wait(ctx, s, req("b", tc.fairness), capacity.WaitOptions{})
				require.NoError(t, err)
				assert.Equal(t, tc.wantWaited, time.Since(start))
				if tc.wantReason == 0 {
					assert.True(t, res.Granted)
				} else {
					assert.False(t, res.Granted)
					assert.Equal(t, tc.wantReason, res.Reason)
					assert.False(t, res.Booked)
					assert.Equal(t, int64(2), s.reserves.Load(), "asked once")
				}
				other, err := s.Reserve(ctx, req("c", capacity.Fairness{Key: "other"}))
				require.NoError(t, err)
				assert.True(t, other.Granted, "the scope is not blocked for other keys")
			})
		})
	}
}
