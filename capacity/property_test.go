package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

var propScope = capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "prop"}

// event is a change to what was handed out in a dimension: a dispatched
// grant (positive) or a refund (negative), at the store's time.
type event struct {
	at time.Time
	c  capacity.Charges
}

// ledger records events and checks the conformance invariant: over any
// interval [a, b], the net charges granted in a dimension never exceed
// burst + rate × (b − a), where burst is the bucket's capacity or the
// largest single call, whichever is larger — or, once a truthful provider
// reported its remaining (which a level follows up to the per-minute
// limit), the limit plus what the largest call exceeds the bucket by.
type ledger struct {
	mu       sync.Mutex
	events   []event
	observed bool
}

func (l *ledger) add(at time.Time, c capacity.Charges) {
	l.mu.Lock()
	l.events = append(l.events, event{at, c})
	l.mu.Unlock()
}

// providerLevel is what a provider enforcing lim's per-minute limit of d
// with a full minute's bucket (the most a report may raise a level to)
// holds at now, after the events so far (at least 0).
func (l *ledger) providerLevel(d capacity.Dimension, lim capacity.Limits, now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := float64(lim.Limit(d))
	if limit == 0 {
		return 1 << 40
	}
	events := slices.Clone(l.events)
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	level := limit
	var last time.Time
	for _, e := range events {
		if !last.IsZero() {
			level = min(limit, level+limit/60*e.at.Sub(last).Seconds())
		}
		level, last = min(limit, level-float64(e.c[d])), e.at
	}
	if !last.IsZero() {
		level = min(limit, level+limit/60*now.Sub(last).Seconds())
	}
	return int64(max(0, math.Floor(level)))
}

func (l *ledger) check(t require.TestingT, lim capacity.Limits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := lim.Budgets()
	sort.SliceStable(l.events, func(i, j int) bool { return l.events[i].at.Before(l.events[j].at) })
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		if !b[d].Limited {
			continue
		}
		// A call larger than the bucket (within the limit) goes when the
		// bucket is full: the burst is the bucket or the largest call.
		// Once a provider reported its remaining, the level follows it up
		// to the limit (the provider's own bucket is at least that), and
		// each call larger than tollgate's bucket may overdraw the
		// provider's by what it exceeds the bucket.
		burst := b[d].Capacity
		for _, e := range l.events {
			burst = max(burst, float64(e.c[d]))
		}
		rate := b[d].Rate
		if l.observed {
			burst, rate = max(b[d].Capacity, float64(lim.Limit(d))), float64(lim.Limit(d))/60
		}
		for i := range l.events {
			var sum, over float64
			for j := i; j < len(l.events); j++ {
				c := float64(l.events[j].c[d])
				sum += c
				if l.observed {
					over += max(0, c-b[d].Capacity)
				}
				span := l.events[j].at.Sub(l.events[i].at).Seconds()
				bound := burst + over + rate*span + 1e-6
				require.LessOrEqualf(t, sum, bound,
					"%s: %.1f charged over [%v, %v] (%.3fs), bound %.1f", d, sum, l.events[i].at, l.events[j].at, span, bound)
			}
		}
	}
}

func drawLimits(t *rapid.T) capacity.Limits {
	opt := func(name string, lo, hi int64) int64 {
		if rapid.Bool().Draw(t, name+"-on") {
			return rapid.Int64Range(lo, hi).Draw(t, name)
		}
		return 0
	}
	floors := [2]float64{}
	if rapid.Bool().Draw(t, "floors") {
		floors[0] = rapid.Float64Range(0, 0.4).Draw(t, "standard-floor")
		floors[1] = floors[0] + rapid.Float64Range(0, 0.4).Draw(t, "bulk-floor-extra")
	}
	return capacity.Limits{
		RequestsPerMinute:     rapid.Int64Range(6, 600).Draw(t, "rpm"),
		InputTokensPerMinute:  opt("itpm", 600, 60000),
		OutputTokensPerMinute: opt("otpm", 600, 60000),
		TokensPerMinute:       opt("tpm", 1200, 120000),
		MaxInFlight:           opt("inflight", 1, 8),
		Burst:                 time.Duration(rapid.IntRange(1, 10).Draw(t, "burst-s")) * time.Second,
		SafetyMargin:          1,
		StandardFloor:         floors[0],
		BulkFloor:             floors[1],
	}
}

func drawDemand(t *rapid.T, l capacity.Limits) capacity.Charges {
	b := l.Budgets()
	draw := func(d capacity.Dimension, name string) int64 {
		hi := int64(2000)
		if b[d].Limited {
			hi = int64(b[d].Capacity * 1.1) // sometimes too large
		}
		return rapid.Int64Range(0, max(hi, 1)).Draw(t, name)
	}
	in, out := draw(capacity.InputTokens, "in"), draw(capacity.OutputTokens, "out")
	p := capacity.AnthropicProfile{}
	return p.Charges(capacity.Demand{InputTokens: in, OutputTokens: out})
}

// propModel drives a MemoryStore through random operations on one scope and
// mirrors what it must hold.
type propModel struct {
	clock  *capacitytest.ManualClock
	store  *capacity.MemoryStore
	limits capacity.Limits
	ledger ledger
	live   map[string]capacity.Lease // by lease id, as the model believes
	calls  int
}

func (m *propModel) expire() {
	now := m.clock.Now()
	for id, le := range m.live {
		if !now.Before(le.Expires) {
			delete(m.live, id)
		}
	}
}

func (m *propModel) reserve(t *rapid.T, book bool) {
	ctx := context.Background()
	m.calls++
	req := capacity.Request{
		Scope: propScope, Limits: m.limits, Call: fmt.Sprintf("c%d", m.calls), Attempt: 1,
		Charges: drawDemand(t, m.limits), Book: book,
		Class: capacity.Class(rapid.IntRange(0, 2).Draw(t, "class")),
		TTL:   time.Duration(rapid.IntRange(1, 30).Draw(t, "ttl-s")) * time.Second,
	}
	res, err := m.store.Reserve(ctx, req)
	if errors.Is(err, capacity.ErrDemandTooLarge) {
		return
	}
	require.NoError(t, err)
	if res.Granted {
		m.granted(t, res.Lease)
		// A repeated reserve returns the same lease and never charges twice.
		before := m.snapshot(t).Level
		again, err := m.store.Reserve(ctx, req)
		require.NoError(t, err)
		require.True(t, again.Granted)
		require.Equal(t, res.Lease.ID, again.Lease.ID)
		require.Equal(t, before, m.snapshot(t).Level)
		return
	}
	if res.Reason != capacity.DenyCapacity {
		return
	}
	// Liveness: replayed at RetryAt with no other traffic, the call is granted
	// (after freeing a slot if in-flight is what binds).
	m.clock.Set(res.RetryAt)
	m.expire()
	for range 3 {
		res, err = m.store.Reserve(ctx, req)
		require.NoError(t, err)
		if res.Granted {
			m.granted(t, res.Lease)
			return
		}
		require.Equal(t, capacity.InFlight, res.Binding, "denied again at its RetryAt: %s on %s", res.Reason, res.Binding)
		for _, le := range m.live {
			require.NoError(t, m.store.Settle(ctx, le, le.Charges))
			delete(m.live, le.ID)
			break
		}
		if !res.Booked {
			m.clock.Set(res.RetryAt)
			m.expire()
		}
	}
	t.Fatalf("call never granted at its RetryAt")
}

func (m *propModel) granted(t *rapid.T, le capacity.Lease) {
	m.live[le.ID] = le
	m.ledger.add(le.GrantedAt, le.Charges)
	if b := m.limits.Budgets()[capacity.InFlight]; b.Limited {
		require.LessOrEqual(t, float64(len(m.live)), b.Capacity, "in flight over the cap")
	}
}

func (m *propModel) pick(t *rapid.T) (capacity.Lease, bool) {
	if len(m.live) == 0 {
		return capacity.Lease{}, false
	}
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return m.live[rapid.SampledFrom(ids).Draw(t, "lease")], true
}

func (m *propModel) snapshot(t *rapid.T) capacity.Snapshot {
	s, err := m.store.Snapshot(context.Background(), propScope)
	require.NoError(t, err)
	return s
}

func TestPropertyConformance(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := capacitytest.NewManualClock(storetest.Epoch)
		m := &propModel{
			clock:  clock,
			store:  capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock}),
			limits: drawLimits(t),
			live:   map[string]capacity.Lease{},
		}
		ctx := context.Background()
		t.Repeat(map[string]func(*rapid.T){
			"reserve": func(t *rapid.T) { m.reserve(t, false) },
			"book":    func(t *rapid.T) { m.reserve(t, true) },
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(1, 5000).Draw(t, "ms")) * time.Millisecond)
				m.expire()
			},
			"settle": func(t *rapid.T) {
				le, ok := m.pick(t)
				if !ok {
					t.Skip()
				}
				final := le.Charges
				for d := capacity.InputTokens; d <= capacity.Tokens; d++ {
					final[d] = rapid.Int64Range(0, le.Charges[d]*2).Draw(t, "final-"+d.String())
				}
				require.NoError(t, m.store.Settle(ctx, le, final))
				delete(m.live, le.ID)
				refund := le.Charges.Sub(final)
				for d := range refund {
					refund[d] = -max(refund[d], 0) // refunds hand capacity back; debt only delays
				}
				m.ledger.add(clock.Now(), refund)
			},
			"release": func(t *rapid.T) {
				le, ok := m.pick(t)
				if !ok {
					t.Skip()
				}
				require.NoError(t, m.store.Release(ctx, le))
				delete(m.live, le.ID)
				var refund capacity.Charges
				m.ledger.add(clock.Now(), refund.Sub(le.Charges))
			},
			"observe": func(t *rapid.T) {
				var o capacity.Observation
				d := capacity.Dimension(rapid.IntRange(0, 3).Draw(t, "dim"))
				// A truthful provider (or one that reports less than it has).
				most := m.ledger.providerLevel(d, m.limits, clock.Now())
				o.Dims[d] = capacity.DimensionObservation{HasRemaining: true, Remaining: min(most, rapid.Int64Range(0, 100000).Draw(t, "remaining"))}
				if le, ok := m.pick(t); ok {
					o.Mark = le.Mark
				}
				require.NoError(t, m.store.Observe(ctx, propScope, o))
				m.ledger.observed = true
			},
			"": func(t *rapid.T) {
				s := m.snapshot(t)
				if b := s.Budget[capacity.InFlight]; b.Limited {
					require.GreaterOrEqual(t, s.Level[capacity.InFlight], 0.0)
				}
				require.LessOrEqual(t, len(s.Leases), len(m.live)+0, "store holds a lease the model dropped")
			},
		})
		m.ledger.check(t, m.limits)
	})
}

// TestConcurrentConformance runs reserve/settle/release from many goroutines
// while a ticker goroutine moves a fake clock; the clock only moves when no
// operation is in progress, so every event has an exact store time.
func TestConcurrentConformance(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := capacitytest.NewManualClock(storetest.Epoch)
		var gate sync.RWMutex // operations read-lock; the ticker write-locks
		store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
		limits := drawLimits(rt)
		seeds := rapid.SliceOfN(rapid.Int64(), 4, 4).Draw(rt, "seeds")
		var led ledger
		ctx := context.Background()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				gate.Lock()
				clock.Advance(37 * time.Millisecond)
				gate.Unlock()
			}
		}()
		var inflightMax sync.Mutex
		live := 0
		for g, seed := range seeds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := uint64(seed) | 1
				next := func(n int64) int64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return int64(x % uint64(n)) }
				b := limits.Budgets()
				for i := range 150 {
					var c capacity.Charges
					c[capacity.Requests], c[capacity.InFlight] = 1, 1
					for d := capacity.InputTokens; d <= capacity.OutputTokens; d++ {
						hi := int64(1000)
						if b[d].Limited {
							hi = int64(b[d].Capacity)
						}
						c[d] = next(hi + 1)
					}
					c[capacity.Tokens] = c[capacity.InputTokens] + c[capacity.OutputTokens]
					if b[capacity.Tokens].Limited && float64(c[capacity.Tokens]) > b[capacity.Tokens].Capacity {
						continue
					}
					req := capacity.Request{Scope: propScope, Limits: limits, Call: fmt.Sprintf("g%d-%d", g, i), Attempt: 1, Charges: c, TTL: time.Hour}
					gate.RLock()
					res, err := store.Reserve(ctx, req)
					gate.RUnlock()
					if err != nil {
						t.Error(err)
						return
					}
					if !res.Granted {
						continue
					}
					led.add(res.Lease.GrantedAt, res.Lease.Charges)
					inflightMax.Lock()
					live++
					if b[capacity.InFlight].Limited && float64(live) > b[capacity.InFlight].Capacity {
						t.Errorf("in flight %d over cap %v", live, b[capacity.InFlight].Capacity)
					}
					inflightMax.Unlock()
					gate.RLock()
					inflightMax.Lock()
					live-- // decremented before the slot is actually freed
					inflightMax.Unlock()
					// Only grants are recorded here, so events at one instant
					// need no order; refunds are covered by the sequential test.
					err = store.Settle(ctx, res.Lease, res.Lease.Charges)
					gate.RUnlock()
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		led.check(rt, limits)
	})
}
