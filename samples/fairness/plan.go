package main

import (
	"fmt"
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// The run's one quota: an OpenAI model on one key, its per-minute limits
// enforced in buckets of Refill (tollgate's Limits.Burst is the same
// default 5 s). Tokens bind; requests are left loose.
const (
	Model             = "gpt-4o-mini"
	TokensPerMinute   = 900_000
	RequestsPerMinute = 3_000
	Refill            = 5 * time.Second
)

// Shares the plan sizes the work from: the interactive stream's part of the
// provider's token rate, the part tollgate uses (its default
// SafetyMargin), and how far each bulk backlog exceeds the tokens its
// weight is planned to be served, so every tenant stays backlogged past
// the planned end.
const (
	interactiveShare = 0.15
	usedShare        = capacity.DefaultSafetyMargin
	backlogMargin    = 1.15
)

// Phases time a run: A, B and C start together, D arrives Newcomer after
// the first bulk request reached the provider, and the four are planned to
// share the scope for After more.
type Phases struct {
	Newcomer, After time.Duration
}

// Phases of a full run and of -short.
var (
	FullPhases  = Phases{Newcomer: 12 * time.Second, After: 18 * time.Second}
	ShortPhases = Phases{Newcomer: 6 * time.Second, After: 6 * time.Second}
)

// Tenant is one bulk tenant: its fairness key (and tag prefix), its weight
// (interceptor.Options.Fairness), when it arrives, and its backlog.
type Tenant struct {
	Name    string
	Weight  float64
	Arrives time.Duration
	Calls   int
	Tokens  int64 // what the provider charges its Calls in all
}

// Plan is one run's workload and quota.
type Plan struct {
	Workload Workload
	Phases   Phases
	Limits   testsuite.Limits
	// Every is the interactive stream's pace: one call every Every.
	Every   time.Duration
	Tenants []Tenant // A, B, C, then D
}

// NewPlan sizes a run: the interactive stream's pace for interactiveShare of
// the token rate, and each bulk tenant's backlog for backlogMargin × the
// tokens its weight is due of what tollgate leaves the bulk class — the
// initial bucket and Newcomer of refill shared by A, B and C, After of
// refill shared by the four — plus, for A, B and C, the initial bucket: it
// is granted first-come as calls reach the store, and one tenant may take
// it all.
func NewPlan(w Workload, p Phases) Plan {
	l := testsuite.Limits{RequestsPerMinute: RequestsPerMinute, TokensPerMinute: TokensPerMinute, BurstWindow: Refill}
	rate := float64(TokensPerMinute) / 60
	interactiveCost := float64(interactiveInput + interactiveMaxTokens)
	every := time.Duration(interactiveCost / (interactiveShare * rate) * float64(time.Second)).Round(10 * time.Millisecond)
	bulkRate := usedShare*rate - interactiveCost/every.Seconds()
	before := usedShare*l.Burst(testsuite.Tokens) + bulkRate*p.Newcomer.Seconds()
	after := bulkRate * p.After.Seconds()
	tenants := []Tenant{{Name: "A", Weight: 1}, {Name: "B", Weight: 1}, {Name: "C", Weight: 3}, {Name: "D", Weight: 1, Arrives: p.Newcomer}}
	sum := func(ts []Tenant) (s float64) {
		for _, t := range ts {
			s += t.Weight
		}
		return s
	}
	first, all := sum(tenants[:3]), sum(tenants)
	for i := range tenants {
		t := &tenants[i]
		due := t.Weight / all * after
		extra := 0.0
		if t.Arrives == 0 {
			due += t.Weight / first * before
			extra = usedShare * l.Burst(testsuite.Tokens)
		}
		t.Calls, t.Tokens = w.Backlog(t.Name, int64(math.Ceil(backlogMargin*due+extra)))
	}
	return Plan{Workload: w, Phases: p, Limits: l, Every: every, Tenants: tenants}
}

// Fairness is the plan's interceptor.Options.Fairness: each tenant's weight.
func (p Plan) Fairness() map[string]capacity.Fairness {
	m := make(map[string]capacity.Fairness, len(p.Tenants))
	for _, t := range p.Tenants {
		m[t.Name] = capacity.Fairness{Weight: t.Weight}
	}
	return m
}

// Calls is how many bulk calls the plan makes.
func (p Plan) Calls() int {
	n := 0
	for _, t := range p.Tenants {
		n += t.Calls
	}
	return n
}

// TollgateLimits is the quota in tollgate's terms: the limits only, every
// other field at its default (Burst 5 s, SafetyMargin 0.95, no floors).
func (p Plan) TollgateLimits() capacity.Limits {
	return capacity.Limits{RequestsPerMinute: p.Limits.RequestsPerMinute, TokensPerMinute: p.Limits.TokensPerMinute}
}

// describe is the plan on one line.
func (p Plan) describe() string {
	s := fmt.Sprintf("TPM %d, RPM %d, buckets of %v; interactive every %v", p.Limits.TokensPerMinute, p.Limits.RequestsPerMinute, Refill, p.Every)
	for _, t := range p.Tenants {
		s += fmt.Sprintf("; %s ×%g %d calls %d tokens", t.Name, t.Weight, t.Calls, t.Tokens)
		if t.Arrives > 0 {
			s += fmt.Sprintf(" at +%v", t.Arrives)
		}
	}
	return s
}
