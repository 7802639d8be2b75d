package capacity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// slowStore answers Reserve as the memory store does, but the clock moves
// by lag while each call is in flight (a slow round trip, or a test that
// advances time while a waiter is between its answer and its sleep).
type slowStore struct {
	capacity.Store
	clock *storetest.Clock
	lag   time.Duration
}

func (s slowStore) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	r, err := s.Store.Reserve(ctx, req)
	s.clock.Advance(s.lag)
	return r, err
}

// TestWaitCountsTimeSpentAsking: the time that passes while a denial comes
// back is part of the wait, so Wait never sleeps past RetryAt.
func TestWaitCountsTimeSpentAsking(t *testing.T) {
	clock := storetest.NewClock()
	mem := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock.Now})
	s := slowStore{Store: mem, clock: clock, lag: time.Second}
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "c"}
	l := capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1} // one a second
	charges := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
	_, err := mem.Reserve(context.Background(), capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges})
	require.NoError(t, err)

	// The next slot is a second away, and the denial takes that second to
	// arrive: Wait asks again at once instead of sleeping another second
	// (with a manual clock, a sleep would never end).
	done := make(chan capacity.Reservation, 1)
	go func() {
		res, err := capacity.Wait(context.Background(), s, capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges}, capacity.WaitOptions{Clock: clock, MaxWait: time.Minute})
		assert.NoError(t, err)
		done <- res
	}()
	select {
	case res := <-done:
		require.True(t, res.Granted)
	case <-time.After(10 * time.Second):
		t.Fatal("Wait slept past RetryAt")
	}
}
