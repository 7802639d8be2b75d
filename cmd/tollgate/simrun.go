package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// simConfig is a simulation: a workload against a scope's limits, classes
// and fairness settings, on a simulated provider.
type simConfig struct {
	Provider capacity.Provider
	Limits   capacity.Limits
	// Classes are the workers' classes (interceptor.Options.Classes); nil:
	// the built-in standard, interactive and bulk, with Limits' floors and
	// aging.
	Classes []capacity.ClassDef
	// Fairness gives each fairness key its weight and caps
	// (interceptor.Options.Fairness).
	Fairness map[string]capacity.Fairness
	// Workload is the calls; nil: Calls identical calls of Input,
	// MaxTokens and Output tokens arriving Rate per second (0: all at
	// once).
	Workload  []simCall
	Calls     int
	Rate      float64
	Input     int64
	MaxTokens int64
	Output    int64
	// Latency is how long the provider takes per call, unless the call
	// states its own.
	Latency time.Duration
	// ProviderWindow is the size of the simulated provider's per-minute
	// buckets as time at their full rate (its limit, without the safety
	// margin); 0: a minute. A call the provider's buckets cannot hold gets
	// a 429.
	ProviderWindow time.Duration
	// Headers feeds the provider's remaining back to the store after each
	// response (Store.Observe), as the gate does with rate-limit headers
	// (not for Gemini, which sends none).
	Headers bool
}

// seconds is a duration that JSON shows in seconds, to the millisecond.
type seconds time.Duration

func (s seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(s).Seconds())), nil
}

// simStats are the figures of a group of calls (all, a class, a key).
type simStats struct {
	Name string `json:"name,omitempty"`
	// Calls arrived; Completed were answered; Refused were refused by
	// reason (daily_quota, key_quota, deadline, too_large).
	Calls     int            `json:"calls"`
	Completed int            `json:"completed"`
	Refused   map[string]int `json:"refused,omitempty"`
	// Wait is from arrival to dispatch, over the completed calls.
	WaitP50 seconds `json:"wait_p50_s"`
	WaitP95 seconds `json:"wait_p95_s"`
	WaitMax seconds `json:"wait_max_s"`
	// Tokens is what the completed calls were charged, settled.
	Tokens int64 `json:"tokens"`
	// TokenShare is Tokens over every call's tokens.
	TokenShare float64 `json:"token_share"`

	waits []time.Duration
}

// simReport is what a simulation measured: the -json output of
// `tollgate simulate`.
type simReport struct {
	Provider string `json:"provider"`
	// Limits are the configured limits per dimension (before the safety
	// margin), with Burst and SafetyMargin.
	Limits       map[string]int64 `json:"limits"`
	Burst        seconds          `json:"burst_s"`
	SafetyMargin float64          `json:"safety_margin"`
	// Makespan is from the first arrival to the last answer.
	Makespan       seconds `json:"makespan_s"`
	CallsPerSecond float64 `json:"calls_per_second"`
	// Denials counts the reserves denied for lack of capacity, blocks
	// and key caps (a call waits and comes back; not a ticket holder that
	// asks again before its time);
	// DailyQuotaExhaustion the calls refused for a spent per-day budget.
	Denials              int `json:"denials"`
	DailyQuotaExhaustion int `json:"daily_quota_refused"`
	// Binding is the dimension that denied most ("none"); Utilization the
	// share of its budget (limit × margin over the makespan, plus the
	// burst) the calls were charged, ProviderUtilization the share of the
	// provider's (its limit over the makespan, plus its bucket). With
	// Headers the gate may spend the provider's bucket, so Utilization
	// can pass 1; ProviderUtilization cannot without 429s.
	Binding             string  `json:"binding"`
	Utilization         float64 `json:"utilization"`
	ProviderUtilization float64 `json:"provider_utilization"`
	// RateLimited counts the calls the simulated provider refused with a
	// 429. ProviderMinRemaining is the least the provider had left per
	// limited dimension, and ProviderMinFraction that over its limit.
	RateLimited          int                `json:"provider_429s"`
	ProviderMinRemaining map[string]int64   `json:"provider_min_remaining"`
	ProviderMinFraction  map[string]float64 `json:"provider_min_fraction"`
	// Total sums every call; Classes and Keys per class and fairness key
	// (those that had calls), by name.
	Total   simStats   `json:"total"`
	Classes []simStats `json:"classes"`
	Keys    []simStats `json:"keys,omitempty"`

	// WaitP50, WaitP95 and WaitMax are Total's.
	WaitP50, WaitP95, WaitMax time.Duration `json:"-"`
	// Series is the provider's remaining over time, for -plot.
	Series simSeries `json:"-"`
}

// simSeries is what the simulated provider had left over time, and the
// calls waiting and in flight.
type simSeries struct {
	Start time.Time
	// Dims are the provider's limited per-minute dimensions, Limit their
	// limits; Points the samples.
	Dims   []capacity.Dimension
	Limit  []float64
	Points []simPoint
}

// simPoint is one sample: at T after the start, the provider's remaining
// per dimension of simSeries.Dims, and the calls waiting and in flight.
type simPoint struct {
	T                 time.Duration
	Remaining         []float64
	Waiting, InFlight int
}

// simStart is the simulated clock's start.
var simStart = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// simMaxTime bounds a simulation's simulated time.
const simMaxTime = 31 * 24 * time.Hour

// simEventKind is what a simulated call does at an event.
type simEventKind int8

const (
	evReserve simEventKind = iota // arrives, or comes back
	evDone                        // the provider answers
)

// simEvent is a moment a simulated call acts.
type simEvent struct {
	at   time.Time
	seq  int // ties: in the order pushed
	call int
	kind simEventKind
}

type simEvents []simEvent

func (e simEvents) Len() int { return len(e) }
func (e simEvents) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	return e[i].seq < e[j].seq
}
func (e simEvents) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *simEvents) Push(x any)   { *e = append(*e, x.(simEvent)) }
func (e *simEvents) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// simCallState is a call during the simulation.
type simCallState struct {
	call     simCall
	class    capacity.Class
	demand   capacity.Demand
	charges  capacity.Charges
	arrival  time.Time
	attempt  int
	lease    capacity.Lease
	final    capacity.Charges // what the provider charges when it answers
	reported capacity.Observation
	// next is the seq of the call's pending return (an evReserve of
	// another seq was overtaken by an announcement: skipped); due, while
	// it holds a ticket, is closed when the store announces the ticket
	// came forward (capacity.TicketNotifier), as the gate's wait listens.
	next      int
	due       <-chan struct{}
	cancelDue func()
}

// runSimulation plays the workload through a MemoryStore on a simulated
// clock, as the gate would (a denied call books a ticket and comes back at
// its time, or at once when the store announces the ticket came forward:
// TicketDue; a 429 blocks the scope for the provider's wait), against a
// simulated provider that meters the limits themselves, and measures waits,
// utilization and what the provider had left. It is deterministic.
func runSimulation(c simConfig) (simReport, error) {
	profile, ok := accounting.ProfileFor(c.Provider)
	if !ok {
		return simReport{}, fmt.Errorf("unknown provider %q (openai, anthropic, gemini)", c.Provider)
	}
	calls := c.Workload
	if calls == nil {
		if c.Calls <= 0 || c.Rate < 0 || c.Input < 0 || c.MaxTokens < 0 || c.Output < 0 {
			return simReport{}, errors.New("calls must be positive; arrivals and tokens non-negative")
		}
		calls = syntheticWorkload(c.Calls, c.Rate, c.Input, c.MaxTokens, c.Output)
	}
	if len(calls) == 0 {
		return simReport{}, errors.New("the workload has no calls")
	}
	if c.Latency < 0 || c.ProviderWindow < 0 {
		return simReport{}, errors.New("latency and the provider's window must be non-negative")
	}
	if err := c.Limits.Validate(); err != nil {
		return simReport{}, err
	}
	c.Limits = accounting.ProfileDayReset(c.Limits, profile)
	classes, userClasses, err := simClasses(c)
	if err != nil {
		return simReport{}, err
	}
	for key, f := range c.Fairness {
		f.Key = key
		if err := f.Validate(); err != nil {
			return simReport{}, fmt.Errorf("fairness key %q: %w", key, err)
		}
	}

	clock := capacitytest.NewManualClock(simStart) // moved to each event's time
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: 24 * time.Hour})
	scope := capacity.Scope{Provider: c.Provider, LimitGroup: "simulated", Credential: "simulated"}
	prov := newSimProvider(c.Limits, c.ProviderWindow, simStart)
	_, settlesOutput := profile.(accounting.OutputSettler)

	r := simReport{Provider: string(c.Provider), Limits: map[string]int64{}, SafetyMargin: c.Limits.SafetyMargin, Burst: seconds(c.Limits.Burst)}
	if r.SafetyMargin == 0 {
		r.SafetyMargin = capacity.DefaultSafetyMargin
	}
	if r.Burst == 0 {
		r.Burst = seconds(capacity.DefaultBurst)
	}
	for _, d := range capacity.Dimensions() {
		if v := c.Limits.Limit(d); v > 0 {
			r.Limits[d.String()] = v
		}
	}
	r.Series = simSeries{Start: simStart, Dims: prov.dims}
	for _, d := range prov.dims {
		r.Series.Limit = append(r.Series.Limit, float64(c.Limits.Limit(d)))
	}

	q := &simEvents{}
	seq := 0
	states := make([]simCallState, len(calls))
	push := func(at time.Time, call int, kind simEventKind) {
		heap.Push(q, simEvent{at: at, seq: seq, call: call, kind: kind})
		if kind == evReserve {
			states[call].next = seq
		}
		seq++
	}
	// listening are the calls whose tickets the store may announce;
	// announced brings each announced one back at once.
	listening := map[int]bool{}
	announced := func(now time.Time) {
		for _, i := range slices.Sorted(maps.Keys(listening)) { // deterministic
			select {
			case <-states[i].due:
				states[i].cancelDue()
				delete(listening, i)
				push(now, i, evReserve)
			default:
			}
		}
	}
	var maxLatency time.Duration
	for i, call := range calls {
		lat := call.Latency
		if lat == 0 {
			lat = c.Latency
		}
		call.Latency = lat
		maxLatency = max(maxLatency, lat)
		cl, err := lookupClass(classes, call.Class)
		if err != nil {
			return simReport{}, fmt.Errorf("call %d: %w", i+1, err)
		}
		d := capacity.Demand{InputTokens: call.Input, MaxTokens: call.MaxTokens, OutputTokens: call.Output}
		if err := d.Validate(); err != nil {
			return simReport{}, fmt.Errorf("call %d: %w", i+1, err)
		}
		states[i] = simCallState{call: call, class: cl, demand: d, charges: profile.Charges(d), arrival: simStart.Add(call.At), attempt: 1}
		push(states[i].arrival, i, evReserve)
	}
	ttl := maxLatency + time.Hour

	groups := map[string]*simStats{} // "class/NAME", "key/NAME"
	group := func(kind, name string) *simStats {
		g := groups[kind+"/"+name]
		if g == nil {
			g = &simStats{Name: name}
			groups[kind+"/"+name] = g
		}
		return g
	}
	each := func(st *simCallState, f func(*simStats)) {
		f(&r.Total)
		f(group("class", classes.Name(st.class)))
		if st.call.Key != "" {
			f(group("key", st.call.Key))
		}
	}
	refuse := func(st *simCallState, reason string) {
		each(st, func(g *simStats) {
			if g.Refused == nil {
				g.Refused = map[string]int{}
			}
			g.Refused[reason]++
		})
	}
	for i := range states {
		each(&states[i], func(g *simStats) { g.Calls++ })
	}

	var (
		binding   = map[capacity.Dimension]int{}
		charged   capacity.Charges
		lastDone  time.Time
		waiting   = len(states)
		inFlight  int
		tooLarge  error
		ctx       = context.Background()
		lastPoint = time.Duration(-1)
	)
	sample := func(now time.Time) {
		t := now.Sub(simStart)
		if gap := t - lastPoint; lastPoint >= 0 && gap > time.Second {
			// Nothing happened since the last sample but the provider's
			// refill: a few samples draw it (up to a full bucket, then flat).
			for i := 1; i < 20; i++ {
				at := lastPoint + gap*time.Duration(i)/20
				r.Series.Points = append(r.Series.Points, simPoint{T: at, Remaining: prov.remaining(simStart.Add(at)), Waiting: waiting, InFlight: inFlight})
			}
		}
		p := simPoint{T: t, Remaining: prov.remaining(now), Waiting: waiting, InFlight: inFlight}
		if n := len(r.Series.Points); n > 0 && lastPoint == p.T && slices.Equal(r.Series.Points[n-1].Remaining, p.Remaining) &&
			r.Series.Points[n-1].Waiting == p.Waiting && r.Series.Points[n-1].InFlight == p.InFlight {
			return // nothing moved
		}
		r.Series.Points = append(r.Series.Points, p)
		lastPoint = p.T
	}
	for q.Len() > 0 {
		ev := heap.Pop(q).(simEvent)
		now := ev.at // events pop in time order, so the clock only moves forward
		if now.Sub(simStart) > simMaxTime {
			return r, fmt.Errorf("the simulation ran past %v of simulated time with %d calls left: a block or cap that never lifts?", simMaxTime, q.Len()+1)
		}
		st := &states[ev.call]
		if ev.kind == evReserve && ev.seq != st.next {
			continue // an announcement brought it back earlier
		}
		clock.Set(now)
		sample(now)
		if ev.kind == evDone {
			prov.answer(now, st.final, settlesOutput)
			if err := store.Settle(ctx, st.lease, st.final); err != nil {
				return r, err
			}
			if c.Headers && !st.reported.Empty() {
				if err := store.Observe(ctx, scope, st.reported); err != nil {
					return r, err
				}
			}
			announced(now)
			charged = charged.Add(st.final)
			inFlight--
			lastDone = now
			tok := tokensCharged(st.final)
			each(st, func(g *simStats) { g.Completed++; g.Tokens += tok })
			sample(now)
			continue
		}

		req := capacity.Request{Scope: scope, Limits: c.Limits, Call: fmt.Sprint("call-", ev.call), Attempt: st.attempt,
			Charges: st.charges, Class: st.class, Since: st.arrival, TTL: ttl, Book: true}
		if userClasses {
			rule, _ := classes.Rule(st.class, st.arrival, now)
			req.Rule = &rule
		}
		if st.call.Key != "" {
			req.Fairness = c.Fairness[st.call.Key]
			req.Fairness.Key = st.call.Key
		}
		if st.call.Deadline > 0 {
			req.Deadline = st.arrival.Add(st.call.Deadline)
		}
		if st.cancelDue != nil && listening[ev.call] {
			st.cancelDue()
			delete(listening, ev.call)
		}
		res, err := store.Reserve(ctx, req)
		announced(now)
		if errors.Is(err, capacity.ErrDemandTooLarge) {
			tooLarge = err
			refuse(st, "too_large")
			waiting--
			sample(now)
			continue
		}
		if err != nil {
			return r, err
		}
		switch {
		case res.Granted:
			st.lease = res.Lease
			usage := capacity.Usage{InputTokens: st.call.Input, OutputTokens: st.call.Output}
			if st.call.MaxTokens > 0 {
				usage.OutputTokens = min(st.call.Output, st.call.MaxTokens) // no call outputs past its max_tokens
			}
			st.final = profile.Settle(st.demand, res.Lease.Charges, accounting.Completed, usage)
			wait, ok := prov.dispatch(now, st.final, settlesOutput)
			if !ok { // a 429: every worker pauses the scope for the provider's wait
				r.RateLimited++
				rejected := profile.Settle(st.demand, res.Lease.Charges, accounting.Rejected, capacity.Usage{})
				if err := store.Settle(ctx, res.Lease, rejected); err != nil {
					return r, err
				}
				charged = charged.Add(rejected)
				wait = max(wait.Round(time.Second), time.Second) // retry-after is in seconds
				if err := store.Block(ctx, scope, capacity.Block{Reason: capacity.Cooldown, Until: now.Add(wait)}); err != nil {
					return r, err
				}
				st.attempt++
				push(now.Add(wait), ev.call, evReserve)
				continue
			}
			if c.Headers && c.Provider != capacity.Gemini {
				st.reported = prov.observation(now, c.Provider, settlesOutput)
				st.reported.Mark = res.Lease.Mark
			}
			waiting--
			inFlight++
			w := now.Sub(st.arrival)
			each(st, func(g *simStats) { g.waits = append(g.waits, w) })
			push(now.Add(st.call.Latency), ev.call, evDone)
		case res.Reason == capacity.DenyDailyQuota:
			r.DailyQuotaExhaustion++
			refuse(st, "daily_quota")
			waiting--
		case res.Reason == capacity.DenyKeyQuota:
			refuse(st, "key_quota")
			waiting--
		case res.Reason == capacity.DenyDeadline:
			refuse(st, "deadline")
			waiting--
		default: // capacity, a ticket not due, a block, a key's share: come back then
			if res.Reason != capacity.DenyTicket {
				r.Denials++
			}
			if res.Reason == capacity.DenyCapacity {
				binding[res.Binding]++
			}
			if res.Booked {
				st.due, st.cancelDue = store.TicketDue(scope, req.Call)
				listening[ev.call] = true
			}
			push(now.Add(simRetry(res, now)), ev.call, evReserve)
		}
		sample(now)
	}
	if r.Total.Completed == 0 && tooLarge != nil {
		return r, tooLarge
	}

	first := slices.MinFunc(states, func(a, b simCallState) int { return a.arrival.Compare(b.arrival) }).arrival
	if !lastDone.IsZero() {
		r.Makespan = seconds(lastDone.Sub(first))
	}
	if ms := time.Duration(r.Makespan); ms > 0 {
		r.CallsPerSecond = float64(r.Total.Completed) / ms.Seconds()
	}
	r.Binding = "none"
	best := 0
	for _, d := range capacity.Dimensions() { // in order: ties go to the first
		if n := binding[d]; n > best {
			best, r.Binding = n, d.String()
			if b := c.Limits.Budgets()[d]; d.PerMinute() && b.Limited && r.Makespan > 0 {
				span := time.Duration(r.Makespan).Seconds()
				r.Utilization = float64(charged[d]) / (b.Capacity + b.Rate*span)
				r.ProviderUtilization = float64(charged[d]) / (prov.cap[d] + prov.rate[d]*span)
			}
		}
	}
	r.ProviderMinRemaining, r.ProviderMinFraction = map[string]int64{}, map[string]float64{}
	for i, d := range prov.dims {
		least := math.Inf(1)
		for _, p := range r.Series.Points {
			least = math.Min(least, p.Remaining[i])
		}
		least = math.Max(least, 0) // a header never says less than 0
		r.ProviderMinRemaining[d.String()] = int64(math.Floor(least))
		r.ProviderMinFraction[d.String()] = math.Round(least/r.Series.Limit[i]*1e4) / 1e4
	}
	finish(&r.Total, r.Total.Tokens)
	r.WaitP50, r.WaitP95, r.WaitMax = time.Duration(r.Total.WaitP50), time.Duration(r.Total.WaitP95), time.Duration(r.Total.WaitMax)
	for i := range classes.Len() { // in class order
		if g := groups["class/"+classes.Name(capacity.Class(i))]; g != nil {
			finish(g, r.Total.Tokens)
			r.Classes = append(r.Classes, *g)
		}
	}
	for _, k := range sortedKeys(groups) {
		if g := groups[k]; len(k) > 4 && k[:4] == "key/" {
			finish(g, r.Total.Tokens)
			r.Keys = append(r.Keys, *g)
		}
	}
	return r, nil
}

// simRetry is how long after now a denied call asks again, as the gate's
// does: at the RetryAt of a block or a key's share; a call holding a ticket
// halfway through a wait longer than 2 × tuning.TicketRecheck (the store
// moves tickets earlier when capacity comes back: a refund, a higher
// report), else at its time; one waiting for an in-flight slot within a
// second.
func simRetry(res capacity.Reservation, now time.Time) time.Duration {
	wait := res.RetryAt.Sub(now)
	switch {
	case res.Reason == capacity.DenyCapacity && res.Binding == capacity.InFlight:
		wait = min(wait, time.Second)
	case res.Booked && wait > 2*tuning.TicketRecheck:
		wait = max(wait/2, tuning.TicketRecheck)
	}
	return max(wait, time.Millisecond)
}

// finish computes g's wait quantiles and token share of total.
func finish(g *simStats, total int64) {
	slices.Sort(g.waits)
	if n := len(g.waits); n > 0 {
		g.WaitP50, g.WaitP95, g.WaitMax = seconds(g.waits[n/2]), seconds(g.waits[min(n-1, n*95/100)]), seconds(g.waits[n-1])
	}
	if total > 0 {
		g.TokenShare = math.Round(float64(g.Tokens)/float64(total)*1e4) / 1e4
	}
	g.waits = nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tokensCharged is the tokens in c: combined tokens, else input plus
// output.
func tokensCharged(c capacity.Charges) int64 {
	if c[capacity.Tokens] > 0 {
		return c[capacity.Tokens]
	}
	return max(c[capacity.InputTokens], 0) + max(c[capacity.OutputTokens], 0)
}

// simClasses returns the class set of c and whether it is user-defined.
func simClasses(c simConfig) (*capacity.ClassSet, bool, error) {
	if len(c.Classes) == 0 {
		set, err := capacity.NewClassSet(capacity.DefaultClasses(c.Limits)...)
		return set, false, err
	}
	set, err := capacity.NewClassSet(c.Classes...)
	return set, true, err
}

// lookupClass returns the class named name in set: "" is the class named
// standard, else the first, as for the gate.
func lookupClass(set *capacity.ClassSet, name string) (capacity.Class, error) {
	if name == "" {
		if c, ok := set.Lookup("standard"); ok {
			return c, nil
		}
		return 0, nil
	}
	c, ok := set.Lookup(name)
	if !ok {
		var names []string
		for i := range set.Len() {
			names = append(names, set.Name(capacity.Class(i)))
		}
		return 0, fmt.Errorf("class %q is not defined (classes: %v)", name, names)
	}
	return c, nil
}

// simProvider is the simulated provider: per-minute buckets of its limits
// (no safety margin) holding window's worth at the full rate, and per-day
// counters reset at the day boundary. It charges a call when it arrives,
// except output a provider meters as produced (Anthropic), charged when
// the call ends.
type simProvider struct {
	dims   []capacity.Dimension // limited per-minute and per-day dimensions, in order
	limits capacity.Limits
	level  [capacity.NumDimensions]float64
	cap    [capacity.NumDimensions]float64
	rate   [capacity.NumDimensions]float64 // per second
	at     time.Time
	dayEnd time.Time
}

func newSimProvider(l capacity.Limits, window time.Duration, now time.Time) *simProvider {
	if window <= 0 {
		window = time.Minute
	}
	s := &simProvider{limits: l, at: now, dayEnd: l.DayReset.Next(now)}
	for _, d := range capacity.Dimensions() {
		lim := float64(l.Limit(d))
		switch {
		case lim <= 0 || d == capacity.InFlight:
			continue
		case d.PerMinute():
			s.rate[d] = lim / 60
			s.cap[d] = math.Max(1, s.rate[d]*window.Seconds())
		default:
			s.cap[d] = lim
		}
		s.level[d] = s.cap[d]
		s.dims = append(s.dims, d)
	}
	return s
}

// advance refills the buckets to now and resets the day's counters past
// the day boundary.
func (s *simProvider) advance(now time.Time) {
	if dt := now.Sub(s.at).Seconds(); dt > 0 {
		for _, d := range s.dims {
			s.level[d] = math.Min(s.cap[d], s.level[d]+s.rate[d]*dt)
		}
		s.at = now
	}
	for !now.Before(s.dayEnd) {
		for _, d := range s.dims {
			if d.PerDay() {
				s.level[d] = s.cap[d]
			}
		}
		s.dayEnd = s.limits.DayReset.Next(s.dayEnd)
	}
}

// upfront is what the provider charges when a call of final charges
// arrives: all of it, less the output it meters as produced.
func upfront(final capacity.Charges, settlesOutput bool) capacity.Charges {
	if settlesOutput {
		final[capacity.Tokens] -= final[capacity.OutputTokens]
		final[capacity.TokensPerDay] -= final[capacity.OutputTokens]
		final[capacity.OutputTokens] = 0
	}
	return final
}

// dispatch charges a call arriving at now, or refuses it (a 429) with the
// time until the buckets could hold it.
func (s *simProvider) dispatch(now time.Time, final capacity.Charges, settlesOutput bool) (time.Duration, bool) {
	s.advance(now)
	c := upfront(final, settlesOutput)
	var wait time.Duration
	for _, d := range s.dims {
		need := float64(c[d])
		if need <= 0 || s.level[d] >= need {
			continue
		}
		switch {
		case d.PerDay():
			wait = max(wait, s.dayEnd.Sub(now))
		default:
			short := math.Min(need, s.cap[d]) - s.level[d]
			wait = max(wait, time.Duration(short/s.rate[d]*float64(time.Second)))
		}
	}
	if wait > 0 {
		return wait, false
	}
	for _, d := range s.dims {
		s.level[d] -= float64(c[d])
	}
	return 0, true
}

// answer charges what a call ending at now had not been charged.
func (s *simProvider) answer(now time.Time, final capacity.Charges, settlesOutput bool) {
	s.advance(now)
	rest := final.Sub(upfront(final, settlesOutput))
	for _, d := range s.dims {
		s.level[d] -= float64(rest[d])
	}
}

// remaining is the provider's remaining per dimension of dims at now.
func (s *simProvider) remaining(now time.Time) []float64 {
	s.advance(now)
	out := make([]float64, len(s.dims))
	for i, d := range s.dims {
		out[i] = s.level[d]
	}
	return out
}

// observation is what the provider's rate-limit headers say at now: each
// dimension's limit and remaining (output metered as produced does not
// count the calls in flight).
func (s *simProvider) observation(now time.Time, p capacity.Provider, settlesOutput bool) capacity.Observation {
	s.advance(now)
	obs := capacity.Observation{Provider: p, Date: now}
	for _, d := range s.dims {
		obs.Dims[d] = capacity.DimensionObservation{
			HasLimit: true, Limit: s.limits.Limit(d),
			HasRemaining: true, Remaining: int64(math.Max(0, math.Floor(s.level[d]))),
			InFlightExcluded: settlesOutput && (d == capacity.OutputTokens || d == capacity.Tokens),
		}
	}
	return obs
}
