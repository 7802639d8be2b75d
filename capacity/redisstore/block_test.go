package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// skewedClock is the system clock off by a fixed amount.
type skewedClock struct{ by time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.by) }
func (c skewedClock) NewTimer(d time.Duration) capacity.Timer {
	return capacity.SystemClock{}.NewTimer(d)
}

// TestBlockFromASlowWorkerClock: a worker whose clock is 3 s behind Redis
// blocks a scope for the 10 s it means, in Redis time, not for the 7 s left
// of an instant its clock names (failure 7 of issue 13: a cooldown written
// by a slow worker had already ended).
func TestBlockFromASlowWorkerClock(t *testing.T) {
	t.Parallel()
	for _, credential := range []bool{false, true} {
		s, rdb := newTestStore(t, Options{})
		s.local = skewedClock{by: -3 * time.Second}
		ctx := context.Background()
		l := capacity.Limits{RequestsPerMinute: 60}
		_, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge()})
		require.NoError(t, err)
		require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.Cooldown, Until: s.localNow().Add(10 * time.Second), Credential: credential}))
		res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge()})
		require.NoError(t, err)
		require.Equal(t, capacity.DenyBlocked, res.Reason)
		left := res.RetryAt.Sub(redisNow(t, rdb))
		require.InDelta(t, 10*time.Second, left, float64(500*time.Millisecond), "credential %v: blocked for %v", credential, left)
	}
}
