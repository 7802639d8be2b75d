package main

import (
	"container/heap"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// simConfig is a workload to simulate.
type simConfig struct {
	Provider  capacity.Provider
	Limits    capacity.Limits
	Calls     int
	Rate      float64 // arrivals per second; 0: all at once
	Input     int64   // input tokens per call
	MaxTokens int64   // max_tokens per call
	Output    int64   // output tokens each call produces
	Latency   time.Duration
}

// simReport is what a simulation measured.
type simReport struct {
	Makespan             time.Duration
	WaitP50, WaitP95     time.Duration
	WaitMax              time.Duration
	Denials              int
	Binding              string
	Utilization          float64 // of the binding dimension over the run
	CallsPerSecond       float64
	DailyQuotaExhaustion int
}

func simulate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c simConfig
	provider := fs.String("provider", "openai", "accounting profile: openai, anthropic or gemini")
	fs.Int64Var(&c.Limits.RequestsPerMinute, "rpm", 0, "requests per minute (0: unlimited)")
	fs.Int64Var(&c.Limits.TokensPerMinute, "tpm", 0, "combined tokens per minute")
	fs.Int64Var(&c.Limits.InputTokensPerMinute, "itpm", 0, "input tokens per minute")
	fs.Int64Var(&c.Limits.OutputTokensPerMinute, "otpm", 0, "output tokens per minute")
	fs.Int64Var(&c.Limits.RequestsPerDay, "rpd", 0, "requests per day")
	fs.Int64Var(&c.Limits.MaxInFlight, "inflight", 0, "calls in flight")
	fs.DurationVar(&c.Limits.Burst, "burst", capacity.DefaultBurst, "bucket size as time at the full rate")
	fs.Float64Var(&c.Limits.SafetyMargin, "margin", capacity.DefaultSafetyMargin, "fraction of each limit used")
	fs.IntVar(&c.Calls, "calls", 1000, "number of calls")
	fs.Float64Var(&c.Rate, "arrivals", 0, "calls arriving per second (0: all at once)")
	fs.Int64Var(&c.Input, "input", 1000, "input tokens per call")
	fs.Int64Var(&c.MaxTokens, "max-tokens", 500, "max_tokens per call")
	fs.Int64Var(&c.Output, "output", 250, "output tokens each call produces")
	fs.DurationVar(&c.Latency, "latency", 2*time.Second, "provider latency per call")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	c.Provider = capacity.Provider(*provider)
	r, err := runSimulation(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d calls (%s accounting) against %s\n", c.Calls, c.Provider, describeLimits(c.Limits))
	fmt.Fprintf(stdout, "makespan       %v (%.2f calls/s)\n", r.Makespan.Round(time.Millisecond), r.CallsPerSecond)
	fmt.Fprintf(stdout, "admission wait p50 %v, p95 %v, max %v\n", r.WaitP50.Round(time.Millisecond), r.WaitP95.Round(time.Millisecond), r.WaitMax.Round(time.Millisecond))
	fmt.Fprintf(stdout, "binding        %s (utilization %.1f%% of the budget used)\n", r.Binding, 100*r.Utilization)
	if r.DailyQuotaExhaustion > 0 {
		fmt.Fprintf(stdout, "daily quota    %d calls refused until the reset\n", r.DailyQuotaExhaustion)
	}
	return nil
}

func describeLimits(l capacity.Limits) string {
	s := ""
	for _, d := range capacity.Dimensions() {
		if v := l.Limit(d); v > 0 {
			s += fmt.Sprintf("%s=%d ", d, v)
		}
	}
	return s + fmt.Sprintf("burst=%v margin=%.2f", l.Burst, l.SafetyMargin)
}

// event is a moment a simulated call acts: arrives, retries or completes.
type event struct {
	at    time.Time
	call  int
	done  bool
	lease capacity.Lease
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	return e[i].call < e[j].call
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// runSimulation plays the workload through a MemoryStore on a simulated
// clock, as the gate would (each call books a ticket when denied and claims
// it at its time), and measures waits and utilization.
func runSimulation(c simConfig) (simReport, error) {
	profile, ok := capacity.ProfileFor(c.Provider)
	if !ok {
		return simReport{}, fmt.Errorf("unknown provider %q (openai, anthropic, gemini)", c.Provider)
	}
	if c.Calls <= 0 || c.Rate < 0 || c.Input < 0 || c.MaxTokens < 0 || c.Output < 0 || c.Latency < 0 {
		return simReport{}, errors.New("calls must be positive; arrivals, tokens and latency non-negative")
	}
	if err := c.Limits.Validate(); err != nil {
		return simReport{}, err
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := capacitytest.NewManualClock(start) // moved to each event's time
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: 24 * time.Hour})
	scope := capacity.Scope{Provider: c.Provider, LimitGroup: "simulated", Credential: "simulated"}
	demand := capacity.Demand{InputTokens: c.Input, MaxTokens: c.MaxTokens, OutputTokens: c.Output}
	usage := capacity.Usage{InputTokens: c.Input, OutputTokens: min(c.Output, max(c.MaxTokens, c.Output))}
	charges := profile.Charges(demand)

	q := &events{}
	arrival := make([]time.Time, c.Calls)
	for i := range c.Calls {
		at := start
		if c.Rate > 0 {
			at = start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
		}
		arrival[i] = at
		heap.Push(q, event{at: at, call: i})
	}
	var (
		waits    []time.Duration
		r        simReport
		binding  = map[capacity.Dimension]int{}
		final    capacity.Charges
		lastDone time.Time
	)
	ctx := context.Background()
	for q.Len() > 0 {
		ev := heap.Pop(q).(event)
		now := ev.at // events pop in time order, so the clock only moves forward
		clock.Set(now)
		if ev.done {
			f := profile.Settle(demand, ev.lease.Charges, capacity.Completed, usage)
			final = final.Add(f)
			if err := store.Settle(ctx, ev.lease, f); err != nil {
				return r, err
			}
			lastDone = now
			continue
		}
		res, err := store.Reserve(ctx, capacity.Request{Scope: scope, Limits: c.Limits, Call: fmt.Sprint("call-", ev.call), Attempt: 1, Charges: charges, Book: true, TTL: c.Latency + time.Hour})
		if err != nil {
			return r, err
		}
		switch {
		case res.Granted:
			waits = append(waits, now.Sub(arrival[ev.call]))
			heap.Push(q, event{at: now.Add(c.Latency), call: ev.call, done: true, lease: res.Lease})
		case res.Reason == capacity.DenyDailyQuota:
			r.DailyQuotaExhaustion++
		default:
			r.Denials++
			if res.Reason == capacity.DenyCapacity {
				binding[res.Binding]++
			}
			next := res.RetryAt
			if !next.After(now) {
				next = now.Add(time.Millisecond)
			}
			heap.Push(q, event{at: next, call: ev.call})
		}
	}
	r.Makespan = lastDone.Sub(start)
	if r.Makespan > 0 {
		r.CallsPerSecond = float64(len(waits)) / r.Makespan.Seconds()
	}
	slices.Sort(waits)
	if n := len(waits); n > 0 {
		r.WaitP50, r.WaitP95, r.WaitMax = waits[n/2], waits[min(n-1, n*95/100)], waits[n-1]
	}
	r.Binding = "none"
	best := 0
	for _, d := range capacity.Dimensions() { // in order: ties go to the first
		if n := binding[d]; n > best {
			best, r.Binding = n, d.String()
			if b := c.Limits.Budgets()[d]; d.PerMinute() && b.Limited && r.Makespan > 0 {
				r.Utilization = float64(final[d]) / (b.Capacity + b.Rate*r.Makespan.Seconds())
			}
		}
	}
	return r, nil
}
