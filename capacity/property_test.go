package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
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
		// The day window ends within the run, so key quotas reset in it.
		DayReset: capacity.DayBoundary{Location: time.UTC,
			Offset: time.Duration(12*3600+rapid.IntRange(1, 30).Draw(t, "day-ends-s")) * time.Second},
	}
}

// drawKeys returns the policies of up to four fairness keys: random
// weights, and now and then a share of the scope or tokens per day.
func drawKeys(t *rapid.T) map[string]capacity.Fairness {
	keys := map[string]capacity.Fairness{}
	for i := range rapid.IntRange(0, 4).Draw(t, "keys") {
		f := capacity.Fairness{Key: fmt.Sprintf("tenant-%d", i)}
		if rapid.Bool().Draw(t, "weighted") {
			f.Weight = rapid.Float64Range(capacity.MinWeight, 10).Draw(t, "weight")
		}
		if rapid.IntRange(0, 3).Draw(t, "share-on") == 0 {
			f.Share = rapid.Float64Range(0.05, 1).Draw(t, "share")
		}
		if rapid.IntRange(0, 2).Draw(t, "tokens-per-day-on") == 0 {
			f.TokensPerDay = rapid.Int64Range(1, 40000).Draw(t, "tokens-per-day")
		}
		keys[f.Key] = f
	}
	return keys
}

// drawFairness returns the fairness and class rule of a call: one of keys
// or none, and now and then a rule of its own rank, floor and weight.
func drawFairness(t *rapid.T, keys map[string]capacity.Fairness) (capacity.Fairness, *capacity.ClassRule) {
	names := []string{""}
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	f := keys[rapid.SampledFrom(names).Draw(t, "key")]
	if rapid.IntRange(0, 3).Draw(t, "rule-on") != 0 {
		return f, nil
	}
	return f, &capacity.ClassRule{
		Rank:   rapid.IntRange(0, capacity.MaxRank).Draw(t, "rank"),
		Floor:  rapid.Float64Range(0, 0.5).Draw(t, "rule-floor"),
		Weight: rapid.SampledFrom([]float64{0, capacity.MinWeight, 0.25, 1, 3, capacity.MaxWeight}).Draw(t, "rule-weight"),
	}
}

// keyTokens is what a charge costs a key's tokens per day: its combined
// tokens, or its input plus output where it has none.
func keyTokens(c capacity.Charges) float64 {
	if c[capacity.Tokens] != 0 {
		return float64(c[capacity.Tokens])
	}
	return float64(c[capacity.InputTokens] + c[capacity.OutputTokens])
}

// keyDay is what a key with tokens per day was charged in one day window.
type keyDay struct {
	end  time.Time
	used float64
	// unsure: a call charged in an earlier window was corrected in this
	// one; which window a store credits that to is an open rule, so the
	// window is not checked.
	unsure bool
}

// quotas checks the fairness property of Fairness.TokensPerDay: within a
// day window, a key is never charged (granted or booked) past its tokens
// per day, and it is refused only when the call would pass them.
type quotas struct {
	limits    capacity.Limits
	keys      map[string]capacity.Fairness
	days      map[string]*keyDay   // by key
	chargedAt map[string]time.Time // by lease id: when its key was charged
}

func (q *quotas) window(key string, at time.Time) *keyDay {
	end := q.limits.DayReset.Next(at)
	d := q.days[key]
	if d == nil || !d.end.Equal(end) {
		d = &keyDay{end: end}
		q.days[key] = d
	}
	return d
}

// charge records that key was charged c at at (a grant or a booking).
func (q *quotas) charge(t *rapid.T, key string, c capacity.Charges, at time.Time) {
	f := q.keys[key]
	if f.TokensPerDay <= 0 {
		return
	}
	d := q.window(key, at)
	d.used += keyTokens(c)
	if !d.unsure {
		require.LessOrEqualf(t, d.used, float64(f.TokensPerDay)+1e-6, "key %s charged past its tokens per day", key)
	}
}

// refused checks a DenyKeyQuota of a call of key costing c.
func (q *quotas) refused(t *rapid.T, key string, c capacity.Charges, res capacity.Reservation) {
	f := q.keys[key]
	require.Positive(t, f.TokensPerDay, "DenyKeyQuota for a key without tokens per day")
	d := q.window(key, res.Now)
	require.True(t, res.RetryAt.Equal(d.end), "DenyKeyQuota until %v, not the window's end %v", res.RetryAt, d.end)
	require.False(t, res.Booked)
	if !d.unsure {
		require.Greaterf(t, d.used+keyTokens(c), float64(f.TokensPerDay)-1e-3, "key %s refused with %.0f of %d used", key, d.used, f.TokensPerDay)
	}
}

// corrected records that lease le's key was charged final in all (a
// settle; zero charges for a release) at now.
func (q *quotas) corrected(le capacity.Lease, final capacity.Charges, now time.Time) {
	if q.keys[le.Key].TokensPerDay <= 0 {
		return
	}
	delta := keyTokens(final) - keyTokens(le.Charges)
	if delta == 0 {
		return
	}
	// A correction belongs to the window the call was charged in: one
	// from an earlier window changes no counter.
	d := q.window(le.Key, now)
	if q.limits.DayReset.Next(q.chargedAt[le.ID]).Equal(d.end) {
		d.used += delta
	}
}

// drawDemand draws a call's demand within l's budgets (sometimes too large
// for them) and returns what a profile charges for it. One draw in eight
// puts a field out of range (negative, or past MaxDemand where sums would
// overflow): Validate must refuse it before any profile charges it, and ok
// is false, as the gate then reserves nothing.
func drawDemand(t *rapid.T, l capacity.Limits) (c capacity.Charges, ok bool) {
	b := l.Budgets()
	draw := func(d capacity.Dimension, name string) int64 {
		hi := int64(2000)
		if b[d].Limited {
			hi = int64(b[d].Capacity * 1.1) // sometimes too large
		}
		return rapid.Int64Range(0, max(hi, 1)).Draw(t, name)
	}
	in, out := draw(capacity.InputTokens, "in"), draw(capacity.OutputTokens, "out")
	var p accounting.Profile = accounting.AnthropicProfile{}
	d := capacity.Demand{InputTokens: in, OutputTokens: out}
	if rapid.IntRange(0, 3).Draw(t, "max-rule") == 0 {
		// Combined tokens max(max_tokens, input), not input + output:
		// what a key is charged is then not what a bucket is.
		p = accounting.OpenAIProfile{TokenRule: accounting.MaxOfMaxTokensAndEstimate}
		d = capacity.Demand{InputTokens: in, MaxTokens: out}
	}
	if rapid.IntRange(0, 7).Draw(t, "invalid") == 0 {
		bad := []int64{rapid.Int64Range(math.MinInt64, -1).Draw(t, "negative"),
			rapid.Int64Range(capacity.MaxDemand+1, math.MaxInt64).Draw(t, "overflowing")}[rapid.IntRange(0, 1).Draw(t, "bad-kind")]
		fields := []*int64{&d.Requests, &d.InputTokens, &d.CachedInputTokens, &d.OutputTokens, &d.MaxTokens}
		*fields[rapid.IntRange(0, len(fields)-1).Draw(t, "bad-field")] = bad
		require.ErrorIs(t, d.Validate(), capacity.ErrInvalidDemand, "%+v", d)
		return capacity.Charges{}, false
	}
	require.NoError(t, d.Validate())
	return p.Charges(d), true
}

// propStore is what propModel drives: a MemoryStore, or two that keep one
// scope's records (replicatedStore).
type propStore interface {
	Reserve(context.Context, capacity.Request) (capacity.Reservation, error)
	Settle(context.Context, capacity.Lease, capacity.Charges) error
	Release(context.Context, capacity.Lease) error
	Observe(context.Context, capacity.Scope, capacity.Observation) error
	Snapshot(context.Context, capacity.Scope) (capacity.Snapshot, error)
}

// propModel drives a MemoryStore through random operations on one scope and
// mirrors what it must hold.
type propModel struct {
	clock  *capacitytest.ManualClock
	store  propStore
	limits capacity.Limits
	ledger ledger
	live   map[string]capacity.Lease // by lease id, as the model believes
	calls  int
	keys   map[string]capacity.Fairness
	quotas quotas
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
	charges, ok := drawDemand(t, m.limits)
	if !ok {
		return
	}
	m.calls++
	req := capacity.Request{
		Scope: propScope, Limits: m.limits, Call: fmt.Sprintf("c%d", m.calls), Attempt: 1,
		Charges: charges, Book: book,
		Class: capacity.Class(rapid.IntRange(0, 2).Draw(t, "class")),
		TTL:   time.Duration(rapid.IntRange(1, 30).Draw(t, "ttl-s")) * time.Second,
	}
	req.Fairness, req.Rule = drawFairness(t, m.keys)
	res, err := m.store.Reserve(ctx, req)
	if errors.Is(err, capacity.ErrDemandTooLarge) {
		return
	}
	require.NoError(t, err)
	charged := time.Time{} // when the call's key was charged: its booking
	if res.Granted {
		m.granted(t, res.Lease, charged)
		// A repeated reserve returns the same lease and never charges twice.
		before := m.snapshot(t).Level
		again, err := m.store.Reserve(ctx, req)
		require.NoError(t, err)
		require.True(t, again.Granted)
		require.Equal(t, res.Lease.ID, again.Lease.ID)
		require.Equal(t, before, m.snapshot(t).Level)
		return
	}
	switch res.Reason {
	case capacity.DenyKeyQuota:
		m.quotas.refused(t, req.Fairness.Key, req.Charges, res)
		return
	case capacity.DenyKeyCap:
		require.Positive(t, req.Fairness.Share, "DenyKeyCap for a key without a share")
		require.False(t, res.Booked)
		return
	case capacity.DenyCapacity:
	default:
		return
	}
	if res.Booked {
		charged = res.Now
		m.quotas.charge(t, req.Fairness.Key, req.Charges, charged)
	}
	// Liveness: replayed at RetryAt with no other traffic, the call is granted
	// (after freeing slots, one at a time, if in-flight is what binds: a
	// class floor may leave it fewer slots than are held).
	m.clock.Set(res.RetryAt)
	m.expire()
	for range len(m.live) + 3 {
		res, err = m.store.Reserve(ctx, req)
		require.NoError(t, err)
		if res.Granted {
			m.granted(t, res.Lease, charged)
			return
		}
		require.Equal(t, capacity.InFlight, res.Binding, "denied again at its RetryAt: %s on %s", res.Reason, res.Binding)
		if ids := slices.Sorted(maps.Keys(m.live)); len(ids) > 0 {
			le := m.live[ids[0]]
			require.NoError(t, m.store.Settle(ctx, le, le.Charges))
			delete(m.live, le.ID)
		}
		if !res.Booked {
			m.clock.Set(res.RetryAt)
			m.expire()
		}
	}
	t.Fatalf("call never granted at its RetryAt")
}

// granted records lease le, whose key was charged at charged when it was
// booked (zero: charged now, at its grant).
func (m *propModel) granted(t *rapid.T, le capacity.Lease, charged time.Time) {
	if charged.IsZero() {
		charged = le.GrantedAt
		m.quotas.charge(t, le.Key, le.Charges, charged)
	}
	m.quotas.chargedAt[le.ID] = charged
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
		m := newPropModel(t, clock, capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock}))
		t.Repeat(m.actions())
		m.ledger.check(t, m.limits)
	})
}

// newPropModel returns a model driving store, on clock, with limits and
// fairness keys drawn.
func newPropModel(t *rapid.T, clock *capacitytest.ManualClock, store propStore) *propModel {
	limits, keys := drawLimits(t), drawKeys(t)
	return &propModel{
		clock:  clock,
		store:  store,
		limits: limits,
		live:   map[string]capacity.Lease{},
		keys:   keys,
		quotas: quotas{limits: limits, keys: keys, days: map[string]*keyDay{}, chargedAt: map[string]time.Time{}},
	}
}

// actions returns the operations TestPropertyConformance draws from, and
// the invariants checked after each.
func (m *propModel) actions() map[string]func(*rapid.T) {
	ctx, clock := context.Background(), m.clock
	return map[string]func(*rapid.T){
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
			m.quotas.corrected(le, final, clock.Now())
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
			m.quotas.corrected(le, capacity.Charges{}, clock.Now())
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
			for _, f := range s.Flows {
				require.False(t, math.IsNaN(f.Finish) || math.IsInf(f.Finish, 0), "flow %s/%s finishes at %v", f.Class, f.Key, f.Finish)
				require.GreaterOrEqual(t, f.Granted, 0.0)
			}
			for _, k := range s.Keys {
				f := m.keys[k.Key]
				require.True(t, f.Share > 0 || f.TokensPerDay > 0, "counters for key %q without caps", k.Key)
				require.GreaterOrEqual(t, k.DayUsed, 0.0)
			}
		},
	}
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
		// Each goroutine is a fairness key of its own weight, one of them
		// now and then capped at a share of the scope.
		fair := make([]capacity.Fairness, len(seeds))
		for g := range fair {
			fair[g] = capacity.Fairness{Key: fmt.Sprintf("g%d", g), Weight: float64(1 + g)}
		}
		if rapid.Bool().Draw(rt, "share-on") {
			fair[0].Share = rapid.Float64Range(0.1, 1).Draw(rt, "share")
		}
		var led ledger
		ctx := context.Background()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		// The clock moves once per operation at most: spinning freely, it
		// would outrun a goroutine descheduled between its grant and its
		// settle by the leases' hour, and their expiry would free slots
		// the test still counts as held.
		var ops atomic.Int64
		go func() {
			var seen int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := ops.Load()
				if n == seen {
					runtime.Gosched()
					continue
				}
				seen = n
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
					req := capacity.Request{Scope: propScope, Limits: limits, Call: fmt.Sprintf("g%d-%d", g, i), Attempt: 1, Charges: c, TTL: time.Hour, Fairness: fair[g]}
					gate.RLock()
					res, err := store.Reserve(ctx, req)
					gate.RUnlock()
					ops.Add(1)
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
					ops.Add(1)
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
