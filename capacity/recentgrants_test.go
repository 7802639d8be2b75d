package capacity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestRecentGrants: held is what the live leases granted within the window
// hold, the same as summing them (the rule before the queue), through
// grants, ends, expiry and a clock that went back.
func TestRecentGrants(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	leases := newLeaseSet()
	var r recentGrants
	grant := func(call string, attempt int, at time.Time, tokens int64) [NumDimensions]float64 {
		r.expire(at.Add(-tuning.ReorderWindow), &leases)
		held := r.held
		le := Lease{Call: call, Attempt: attempt, GrantedAt: at, Charges: Charges{Requests: 1, Tokens: tokens}}
		slot, gen := leases.put(call, le)
		r.add(le, slot, gen)
		return held
	}
	end := func(call string) {
		le, _ := leases.get(call)
		r.ended(le)
		leases.del(call)
	}
	// sum is the rule the queue replaces: every live lease granted within
	// ReorderWindow before now.
	sum := func(now time.Time) (s [NumDimensions]float64) {
		for _, le := range leases.all() {
			if !le.GrantedAt.Before(now.Add(-tuning.ReorderWindow)) {
				for d := range s {
					s[d] += float64(le.Charges[d])
				}
			}
		}
		return s
	}
	steps := []struct {
		call    string
		attempt int
		at      time.Duration
		tokens  int64
		end     string // a call whose lease ends before this grant
	}{
		{"a", 1, 0, 100, ""},
		{"b", 1, 100 * time.Millisecond, 200, ""},
		{"c", 1, 200 * time.Millisecond, 300, "a"},
		{"d", 1, 400 * time.Millisecond, 400, ""}, // b has left the window
		{"b", 2, 450 * time.Millisecond, 50, "b"}, // a later attempt of b
		{"e", 1, 300 * time.Millisecond, 10, ""},  // the clock went back
		{"f", 1, 2 * time.Second, 1, "d"},         // everything has left the window
		{"g", 1, 2*time.Second + time.Millisecond, 1, ""},
	}
	for _, s := range steps {
		if s.end != "" {
			end(s.end)
		}
		now := t0.Add(s.at)
		want := sum(now)
		if s.call == "e" {
			// A clock that went back does not bring back what left the
			// window: the cutoff stays where it was.
			want = sum(t0.Add(400 * time.Millisecond))
		}
		require.Equal(t, want, grant(s.call, s.attempt, now, s.tokens), "before granting %s#%d", s.call, s.attempt)
	}
}
