package storetest

import (
	"math"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// fairLimits: 1,000 tokens a second in a 5,000-token bucket (one refill
// period, Burst, is 5 s); requests are not metered.
func fairLimits() capacity.Limits {
	return capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second}
}

// simFlow is one sender of a fairSim: calls of one fairness key and class,
// of which it keeps depth asking (booked or waiting for its cap).
type simFlow struct {
	name  string
	fair  capacity.Fairness
	class capacity.Class
	rule  *capacity.ClassRule
	sizes []int64 // the tokens of its calls, in turn
	depth int     // calls kept asking; 0: the flow is idle
	made  int     // calls made
	open  int     // calls asking
}

// weight is the flow's weight in fair queuing: its key's times its class's.
func (f *simFlow) weight() float64 {
	w := f.fair.Weight
	if w == 0 {
		w = 1
	}
	if f.rule != nil && f.rule.Weight != 0 {
		w *= f.rule.Weight
	}
	return w
}

// simCall is a call of a fairSim that asks, and when.
type simCall struct {
	req  capacity.Request
	flow int
	at   time.Time
}

// served is a grant of a fairSim.
type served struct {
	flow   int
	tokens float64
	at     time.Time
}

// fairSim drives flows that keep a scope saturated: each flow keeps its
// depth of calls asking (with Book), and each call comes back when the store
// says its ticket is due (the ticket's time in Snapshot, so a ticket moved
// forward is claimed when it is due) or its cap lets it. Every grant is
// settled at once at what it reserved. Only exported Store methods are used.
type fairSim struct {
	h      *harness
	l      capacity.Limits
	flows  []*simFlow
	calls  map[string]*simCall
	grants []served
}

func newFairSim(h *harness, l capacity.Limits, flows ...*simFlow) *fairSim {
	return &fairSim{h: h, l: l, flows: flows, calls: map[string]*simCall{}}
}

// drain empties the scope's token bucket with one call of its own flow, so
// that what follows is booked and ordered by the store.
func (s *fairSim) drain() {
	s.h.t.Helper()
	snap := s.h.snap(testScope)
	level := snap.Level[capacity.Tokens]
	if !snap.Budget[capacity.Tokens].Limited { // a scope the store has not seen is full
		level = s.l.Budgets()[capacity.Tokens].Capacity
	}
	if level >= 1 {
		le := s.h.grant(s.h.req(s.l, tokens(int64(level), 0)))
		require.NoError(s.h.t, s.h.store.Settle(s.h.ctx, le, le.Charges))
	}
}

// open makes a new call of flow i and asks for it now.
func (s *fairSim) open(i int) capacity.Reservation {
	s.h.t.Helper()
	f := s.flows[i]
	size := f.sizes[f.made%len(f.sizes)]
	f.made++
	f.open++
	req := capacity.Request{Scope: testScope, Limits: s.l, Call: f.name + "-" + strconv.Itoa(f.made), Attempt: 1,
		Charges: tokens(size, 0), Class: f.class, Rule: f.rule, Fairness: f.fair, Book: true}
	c := &simCall{req: req, flow: i}
	s.calls[req.Call] = c
	return s.ask(c)
}

// ask asks for call c now.
func (s *fairSim) ask(c *simCall) capacity.Reservation {
	s.h.t.Helper()
	res := s.h.reserve(c.req)
	switch {
	case res.Granted:
		s.grants = append(s.grants, served{flow: c.flow, tokens: float64(res.Lease.Charges[capacity.Tokens]), at: res.Now})
		delete(s.calls, c.req.Call)
		s.flows[c.flow].open--
		require.NoError(s.h.t, s.h.store.Settle(s.h.ctx, res.Lease, res.Lease.Charges))
	case res.Booked, res.Reason == capacity.DenyKeyCap, res.Reason == capacity.DenyCapacity:
		require.False(s.h.t, res.RetryAt.IsZero(), "a %s denial without RetryAt", res.Reason)
		c.at = res.RetryAt
	default:
		s.h.t.Fatalf("call %s: unexpected denial %s on %s until %v", c.req.Call, res.Reason, res.Binding, res.RetryAt)
	}
	return res
}

// fill opens calls until every flow has its depth asking.
func (s *fairSim) fill() {
	s.h.t.Helper()
	for i, f := range s.flows {
		for f.open < f.depth {
			s.open(i)
		}
	}
}

// step lets the call due first ask: the one whose ticket is due first, or
// whose cap lets it first.
func (s *fairSim) step() {
	s.h.t.Helper()
	s.fill()
	for _, tk := range s.h.snap(testScope).Tickets {
		if c, ok := s.calls[tk.Call]; ok {
			c.at = tk.At
		}
	}
	var next *simCall
	for _, c := range s.calls {
		if next == nil || c.at.Before(next.at) || c.at.Equal(next.at) && c.req.Call < next.req.Call {
			next = c
		}
	}
	require.NotNil(s.h.t, next, "no call asking")
	s.h.clock.Set(next.at)
	s.ask(next)
}

// run steps until n more calls were granted.
func (s *fairSim) run(n int) {
	s.h.t.Helper()
	want := len(s.grants) + n
	for steps := 0; len(s.grants) < want; steps++ {
		require.Less(s.h.t, steps, 20*n+100, "the flows stopped being served")
		s.step()
	}
}

// runFor steps until the clock has moved d.
func (s *fairSim) runFor(d time.Duration) {
	s.h.t.Helper()
	end := s.h.clock.Now().Add(d)
	for s.h.clock.Now().Before(end) {
		s.step()
	}
}

// tokens returns the tokens granted to flow i from grant from on.
func (s *fairSim) tokens(i, from int) float64 {
	var sum float64
	for _, g := range s.grants[from:] {
		if g.flow == i {
			sum += g.tokens
		}
	}
	return sum
}

// serviceGap returns the largest difference, after any grant from grant
// from on, between the tokens two of flows were granted since, each
// divided by its weight (the service gap of weighted fair queuing).
func (s *fairSim) serviceGap(from int, flows ...int) float64 {
	got := map[int]float64{}
	var gap float64
	for _, g := range s.grants[from:] {
		got[g.flow] += g.tokens / s.flows[g.flow].weight()
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, f := range flows {
			lo, hi = min(lo, got[f]), max(hi, got[f])
		}
		gap = max(gap, hi-lo)
	}
	return gap
}

// largest returns the largest call of flows.
func (s *fairSim) largest() float64 {
	var most int64
	for _, f := range s.flows {
		for _, n := range f.sizes {
			most = max(most, n)
		}
	}
	return float64(most)
}

// longTail are call sizes in tokens with a long tail: most calls are a few
// hundred tokens, a few are ten times as large.
var longTail = []int64{300, 200, 1500, 250, 400, 200, 800, 350, 250, 1200, 300, 450}

// rotated returns sizes starting at its k-th, so flows do not march in step.
func rotated(sizes []int64, k int) []int64 {
	k %= len(sizes)
	return append(append([]int64(nil), sizes[k:]...), sizes[:k]...)
}
