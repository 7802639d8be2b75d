package capacity_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// BenchmarkLeaseExpiries measures the memory store's two reads of its
// leases by expiry, with n leases in flight: a call denied because every
// in-flight slot is held (told to come back when the earliest lease
// expires), and a lease expiring while the others live (its slot taken
// back, the next expiry found), one per iteration, a new lease granted in
// its place.
func BenchmarkLeaseExpiries(b *testing.B) {
	one := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
	for _, n := range []int{10, 1000, 10000} {
		limits := capacity.Limits{RequestsPerMinute: 1e9, MaxInFlight: int64(n)}
		b.Run("denied,inflight="+strconv.Itoa(n), func(b *testing.B) {
			store := capacity.NewMemoryStore(capacity.MemoryOptions{})
			ctx := context.Background()
			for i := range n {
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: limits, Call: "c" + strconv.Itoa(i), Attempt: 1, TTL: time.Hour, Charges: one})
				if err != nil || !res.Granted {
					b.Fatal(err, res.Reason)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: limits, Call: "more", Attempt: 1, TTL: time.Hour, Charges: one})
				if err != nil || res.Granted {
					b.Fatal(err, res.Granted)
				}
			}
		})
		b.Run("expiring,inflight="+strconv.Itoa(n), func(b *testing.B) {
			clock := capacitytest.NewManualClock(time.Unix(1_700_000_000, 0))
			store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
			ctx := context.Background()
			// Lease i expires at i ms past an hour; each iteration moves the
			// clock to the next expiry and grants a lease that expires last.
			grant := func(i int) {
				ttl := time.Hour + time.Duration(i)*time.Millisecond - clock.Now().Sub(time.Unix(1_700_000_000, 0))
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: limits, Call: "c" + strconv.Itoa(i), Attempt: 1, TTL: ttl, Charges: one})
				if err != nil || !res.Granted {
					b.Fatal(err, res.Reason)
				}
			}
			for i := range n {
				grant(i)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				clock.Set(time.Unix(1_700_000_000, 0).Add(time.Hour + time.Duration(i)*time.Millisecond))
				grant(n + i)
			}
		})
	}
}
