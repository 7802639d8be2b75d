package assistantbatch

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// DemoOptions configures RunDemo.
type DemoOptions struct {
	Docs      int           // documents in the batch
	Questions int           // questions the assistant is asked, from the batch's start
	Every     time.Duration // between questions
	NoFloors  bool          // run without class floors, to compare
	// Store holds the shared budget and, if it is a ledger.Ledger (the
	// Redis store is), the cost ledger of the run. If nil, a memory store
	// and a memory ledger.
	Store capacity.Store
}

// DemoReport is what RunDemo measured.
type DemoReport struct {
	Batch                  BatchResult
	BatchTime              time.Duration
	Answered               int
	LatencyP50, LatencyP95 time.Duration
	LatencyMax             time.Duration
	ProviderRequests       int
	Provider429s           int
	// ProviderTokens is the fake provider's own record of what it answered
	// (every prompt token, cached or not, in Input; CachedInput is zero).
	ProviderTokens ledger.Tokens
	// Ledger is the cost ledger's rows after the run: every day the store
	// holds (a fresh store holds only the run's).
	Ledger []ledger.Row
	// Timeline is the budget and the calls over time, for WriteHTML.
	Timeline Timeline
}

// RunDemo runs the sample end to end on the Temporal client c: a fake
// provider metering Limits, the two class workers with the tollgate plugin,
// the nightly batch and an interactive stream beside it, with live progress
// on out. It ends when the batch is done and every one of o.Questions was
// asked (one every o.Every) and answered. The report's Timeline holds the
// shared budget every 250 ms and each call's scheduling and admission, for
// WriteHTML.
func RunDemo(ctx context.Context, c client.Client, o DemoOptions, out io.Writer) (DemoReport, error) {
	fpLimits := testsuite.Limits{RequestsPerMinute: Limits.RequestsPerMinute, TokensPerMinute: Limits.TokensPerMinute, BurstWindow: Limits.Burst}
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{{Name: Model, Provider: testsuite.OpenAI, Limits: fpLimits}},
		Latency: func(testsuite.Call, int64) time.Duration { return 300 * time.Millisecond }})
	if err != nil {
		return DemoReport{}, err
	}
	defer fp.Close()
	limits := Limits
	if o.NoFloors {
		limits.BulkFloor, limits.StandardFloor, limits.AgingAfter = 0, 0, 0
	}
	store := o.Store
	costs, _ := store.(ledger.Ledger)
	if store == nil {
		store, costs = capacity.NewMemoryStore(capacity.MemoryOptions{}), ledger.NewMemory(nil)
	}
	rec := newRecorder(store, demoScope)
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return limits, true },
		Ledger: costs,
		Prices: Prices,
	})
	if err != nil {
		return DemoReport{}, err
	}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{Credential: testsuite.DefaultKey}, BaseURL: fp.OpenAIBaseURL(),
	})
	if err != nil {
		return DemoReport{}, err
	}
	for _, queue := range []string{InteractiveQueue, BatchQueue} {
		w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
		w.RegisterWorkflow(AssistantWorkflow)
		w.RegisterWorkflow(BatchClassifyWorkflow)
		w.RegisterActivityWithOptions(rec.chat(oa.Chat), activity.RegisterOptions{Name: "Chat"})
		if err := w.Start(); err != nil {
			return DemoReport{}, err
		}
		defer w.Stop()
	}

	var r DemoReport
	start := time.Now()
	batch, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: BatchQueue}, BatchClassifyWorkflow, o.Docs)
	if err != nil {
		return r, err
	}
	batchDone := make(chan error, 1)
	go func() { batchDone <- batch.Get(ctx, &r.Batch) }()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	ask := time.NewTicker(o.Every)
	defer ask.Stop()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	sampling := time.NewTicker(sampleEvery)
	defer sampling.Stop()
	asked := 0
	batchEnded := false
	// Until the batch is done and every question was asked.
	for !batchEnded || asked < o.Questions {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case err := <-batchDone:
			if err != nil {
				return r, err
			}
			r.BatchTime = time.Since(start)
			batchEnded = true
		case <-ask.C:
			if asked >= o.Questions {
				continue
			}
			asked++
			wg.Add(1)
			go func(q int) {
				defer wg.Done()
				t0 := time.Now()
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: InteractiveQueue}, AssistantWorkflow, fmt.Sprintf("Question %d: how do I export a report?", q))
				if err == nil {
					err = run.Get(ctx, nil)
				}
				if err == nil {
					mu.Lock()
					latencies = append(latencies, time.Since(t0))
					mu.Unlock()
				}
			}(asked)
		case <-sampling.C:
			rec.sample(ctx)
		case <-progress.C:
			rep := fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: Model})
			mu.Lock()
			answered := len(latencies)
			var last time.Duration
			if answered > 0 {
				last = latencies[answered-1]
			}
			mu.Unlock()
			n429 := 0
			for _, n := range rep.RateLimited {
				n429 += n
			}
			fmt.Fprintf(out, "%5.1fs  provider calls %4d  429s %d  |  assistant: %d answered, last in %v\n",
				time.Since(start).Seconds(), rep.Entries, n429, answered, last.Round(time.Millisecond))
		}
	}
	// Wait for the answers.
	wg.Wait()
	rec.sample(ctx)
	r.Timeline = rec.timeline(start)
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		r.Answered, r.LatencyP50, r.LatencyP95, r.LatencyMax = n, latencies[n/2], latencies[min(n-1, n*95/100)], latencies[n-1]
	}
	fpScope := testsuite.Scope{Key: testsuite.DefaultKey, Model: Model}
	rep := fp.Report(fpScope)
	r.ProviderRequests = rep.Entries
	for _, n := range rep.RateLimited {
		r.Provider429s += n
	}
	for _, e := range fp.ScopeEntries(fpScope) {
		r.ProviderTokens = r.ProviderTokens.Add(ledger.Tokens{Input: e.Usage.InputTokens, Output: e.Usage.OutputTokens})
	}
	if costs != nil {
		if r.Ledger, err = costs.LedgerRows(ctx, ""); err != nil {
			return r, fmt.Errorf("reading the cost ledger: %w", err)
		}
	}
	return r, nil
}

// Print writes the report.
func (r DemoReport) Print(w io.Writer, o DemoOptions) {
	floors := "with class floors (BulkFloor 0.3)"
	if o.NoFloors {
		floors = "WITHOUT class floors"
	}
	fmt.Fprintf(w, "\nreport, %s:\n", floors)
	fmt.Fprintf(w, "  nightly batch   %d classified, %d failed in %v\n", r.Batch.Classified, r.Batch.Failed, r.BatchTime.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  assistant       %d answered; latency p50 %v, p95 %v, max %v\n", r.Answered, r.LatencyP50.Round(time.Millisecond), r.LatencyP95.Round(time.Millisecond), r.LatencyMax.Round(time.Millisecond))
	fmt.Fprintf(w, "  provider        %d requests, %d answered 429\n", r.ProviderRequests, r.Provider429s)
	var calls int64
	var tokens ledger.Tokens
	var cost float64
	for _, row := range r.Ledger {
		calls += row.Calls
		tokens = tokens.Add(row.Tokens)
		cost += row.Cost
	}
	match := "matches the provider's record"
	if !r.LedgerMatches() {
		match = fmt.Sprintf("DIFFERS from the provider's record (input %d, output %d)", r.ProviderTokens.Input, r.ProviderTokens.Output)
	}
	fmt.Fprintf(w, "  cost ledger     %d calls, input %d (cached %d), output %d tokens, $%.6f: %s\n",
		calls, tokens.Input+tokens.CachedInput, tokens.CachedInput, tokens.Output, cost, match)
}

// LedgerMatches reports whether the cost ledger holds exactly the tokens
// the fake provider recorded: prompt (cached or not) and output.
func (r DemoReport) LedgerMatches() bool {
	var t ledger.Tokens
	for _, row := range r.Ledger {
		t = t.Add(row.Tokens)
	}
	return t.Input+t.CachedInput == r.ProviderTokens.Input && t.Output == r.ProviderTokens.Output
}
