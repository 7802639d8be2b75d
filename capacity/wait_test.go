package capacity_test

import (
	"context"
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
