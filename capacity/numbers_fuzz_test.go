package capacity_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// Numbers a fuzzed operation draws from: ordinary ones and the extremes a
// careless caller or a broken provider sends.
var (
	fuzzInts = []int64{0, 1, 2, 7, 100, 999, 5000, 123456, -1, -1e15, 1e15, math.MaxInt64, math.MinInt64}
	fuzzFrac = []float64{0, 1, 0.5, 0.95, 0.01, 1e-300, -1, 2, math.NaN(), math.Inf(1)}
	fuzzDur  = []time.Duration{0, time.Nanosecond, time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second,
		time.Minute, 2 * time.Minute, time.Hour, -time.Second, 100 * 365 * 24 * time.Hour, math.MaxInt64}
)

// fuzzBytes reads choices from fuzzed input; past its end every choice is 0.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) next() int {
	if f.i >= len(f.b) {
		return 0
	}
	f.i++
	return int(f.b[f.i-1])
}

func (f *fuzzBytes) more() bool    { return f.i < len(f.b) }
func (f *fuzzBytes) int() int64    { return fuzzInts[f.next()%len(fuzzInts)] }
func (f *fuzzBytes) frac() float64 { return fuzzFrac[f.next()%len(fuzzFrac)] }
func (f *fuzzBytes) dur() time.Duration {
	return fuzzDur[f.next()%len(fuzzDur)]
}

func (f *fuzzBytes) limits() capacity.Limits {
	return capacity.Limits{
		RequestsPerMinute: f.int(), InputTokensPerMinute: f.int(), OutputTokensPerMinute: f.int(),
		TokensPerMinute: f.int(), RequestsPerDay: f.int(), TokensPerDay: f.int(), MaxInFlight: f.int(),
		Burst: f.dur(), TokenBurst: f.int(), SafetyMargin: f.frac(), StandardFloor: f.frac(), BulkFloor: f.frac(),
		AgingAfter: f.dur(),
	}
}

func (f *fuzzBytes) charges() capacity.Charges {
	var c capacity.Charges
	for d := range c {
		c[d] = f.int()
	}
	c[capacity.InFlight] = 1
	return c
}

// FuzzStoreNumbers drives a MemoryStore with any numbers — huge, tiny,
// negative, NaN — in limits, charges, usage, observations, blocks and clock
// steps. Whatever it is given, it never panics, refuses what cannot work
// with an error, never waits past MaxBlock, and never grants past a budget:
// over any interval the net charges granted in each bucket stay within
// capacity + rate × its length.
func FuzzStoreNumbers(f *testing.F) {
	f.Add([]byte{3, 3, 3, 3, 0, 0, 0, 5, 0, 1, 0, 0, 0, 1, 4, 2, 1, 3})
	f.Add([]byte{4, 4, 4, 4, 4, 4, 2, 4, 4, 5, 0, 0, 0, 0, 2, 9, 10, 3, 1, 1, 1, 1, 1, 1, 1, 0, 2, 11, 11, 11})
	f.Add([]byte{6, 6, 6, 6, 0, 0, 1, 5, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 12, 12, 1, 2, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{b: data}
		clock := capacitytest.NewManualClock(storetest.Epoch)
		store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
		ctx := context.Background()
		sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "fuzz"}
		l := in.limits()
		if err := l.Validate(); err != nil {
			if !errors.Is(err, capacity.ErrInvalidLimits) {
				t.Fatalf("Validate: %v", err)
			}
			return
		}
		var book ledger
		leases := map[string]capacity.Lease{}
		for n := 0; in.more() && n < 64; n++ {
			now := clock.Now()
			switch in.next() % 6 {
			case 0, 1:
				req := capacity.Request{Scope: sc, Limits: l, Call: "c" + string(rune('a'+n)), Attempt: 1, Charges: in.charges(), Book: in.next()%2 == 0}
				res, err := store.Reserve(ctx, req)
				if err != nil {
					continue // invalid or too large: refused, never granted
				}
				if !res.Granted && res.RetryAt.Sub(res.Now) > capacity.MaxBlock {
					t.Fatalf("a wait past MaxBlock: %v", res.RetryAt.Sub(res.Now))
				}
				if res.Granted {
					leases[res.Lease.ID] = res.Lease
					book.add(now, res.Lease.Charges)
				}
			case 2:
				for id, le := range leases {
					final := in.charges()
					if err := store.Settle(ctx, le, final); err != nil {
						t.Fatalf("Settle: %v", err)
					}
					if now.Before(le.Expires) {
						book.add(now, refunded(le.Charges, final.NonNegative()))
					}
					delete(leases, id)
					break
				}
			case 3:
				var o capacity.Observation
				for d := capacity.Requests; d <= capacity.Tokens; d++ {
					o.Dims[d] = capacity.DimensionObservation{HasLimit: in.next()%2 == 0, Limit: in.int(), HasRemaining: in.next()%2 == 0, Remaining: in.int()}
				}
				if err := store.Observe(ctx, sc, o); err != nil {
					t.Fatalf("Observe: %v", err)
				}
				book.observed = true
			case 4:
				b := capacity.Block{Reason: capacity.Cooldown, Until: now.Add(in.dur()), HalfOpen: max(in.dur(), 0)}
				_ = store.Block(ctx, sc, b) // a zero Until is refused
			case 5:
				clock.Advance(max(min(in.dur(), time.Hour), 0))
			}
		}
		book.check(t, l)
	})
}

// refunded is what a settle with final gives back of reserved: the unused
// part in each bucket, never more than was reserved (debt only delays).
func refunded(reserved, final capacity.Charges) capacity.Charges {
	var r capacity.Charges
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		r[d] = -max(reserved[d]-final[d], 0)
	}
	return r
}
