package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/samples/goodput/figures"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// Env is what every run shares: the Temporal dev server and where Redis is.
type Env struct {
	Client    client.Client
	HostPort  string
	Namespace string
	Redis     string
	Log       io.Writer // progress; io.Discard for none
}

// Spec is one run: a strategy against one provider accounting and bucket.
type Spec struct {
	Strategy string
	Provider Provider
	Bucket   Bucket
	Workload Workload
	// Target is the theoretical minimum drain the limits are planned for.
	Target time.Duration
	// Timeout bounds the batch's drain; a run past it reports what
	// completed, its drain is the timeout (a lower bound) and its drain
	// ratio is over Target (Row). If zero, defaultTimeouts × Target.
	Timeout time.Duration
	// HeadersAt is when the fake provider computes its rate-limit headers.
	// If zero, as it answers.
	HeadersAt testsuite.HeadersTime
}

// Result is what one run measured.
type Result struct {
	Spec      Spec
	Limits    testsuite.Limits
	Completed int // batch calls that succeeded
	TimedOut  bool
	// Interactive are the interactive calls' latencies (failed calls
	// included, until their failure); InteractiveFailed counts the failures.
	Interactive       []time.Duration
	InteractiveFailed int
	Figures           figures.Figures
	Entries           []testsuite.Entry
}

// defaultTimeouts is Spec.Timeout's default in Targets: long enough for a
// run four times slower than the provider allows to drain.
const defaultTimeouts = 4

// streamGrace is how long a run waits for the interactive calls in flight
// once the batch has drained.
const streamGrace = 30 * time.Second

// completedQuery is BatchWorkflow's query for the calls completed so far.
const completedQuery = "completed"

// run makes one run: a fresh fake provider and task queue, the strategy's
// workers, the batch, and the interactive stream from the batch's first
// request until the batch has drained (so the first request is the
// batch's).
func run(ctx context.Context, env *Env, s Spec) (Result, error) {
	if s.Timeout == 0 {
		s.Timeout = defaultTimeouts * s.Target
	}
	r := Result{Spec: s, Limits: Plan(s.Provider, s.Bucket, s.Workload, s.Target)}
	fp, err := testsuite.New(testsuite.Options{
		Models:    []testsuite.Model{{Name: s.Provider.Model, Provider: s.Provider.Wire, Limits: r.Limits}},
		Keys:      []string{apiKey},
		Seed:      s.Workload.Seed,
		Output:    Output(s.Workload.Seed),
		Latency:   Latency,
		HeadersAt: s.HeadersAt,
	})
	if err != nil {
		return r, err
	}
	defer fp.Close()
	queue := fmt.Sprintf("goodput-%s-%s-%s-%d", s.Strategy, s.Provider.Name, s.Bucket.Name, time.Now().UnixNano())
	stop, err := startWorkers(ctx, env, s.Strategy, workerSpec{
		HostPort: env.HostPort, Namespace: env.Namespace, Queue: queue,
		OpenAIBaseURL: fp.OpenAIBaseURL(), AnthropicBase: fp.AnthropicBaseURL(), Limits: r.Limits,
	})
	if err != nil {
		return r, err
	}
	defer stop()

	in := Run{Workload: s.Workload, Route: Route{Wire: s.Provider.Wire, Model: s.Provider.Model, Gated: gated(s.Strategy)}}
	batch, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-batch", TaskQueue: queue}, batchWorkflowName, in)
	if err != nil {
		return r, err
	}
	defer terminate(env.Client, batch)
	if err := firstRequest(ctx, fp, s.Timeout); err != nil {
		return r, err
	}
	interactive := startStream(ctx, env, queue, in)
	end, err := drain(ctx, env, batch, s.Timeout, &r)
	grace := streamGrace
	if r.TimedOut {
		grace = 0 // what is unanswered now counts as late
	}
	r.Interactive, r.InteractiveFailed = interactive.stop(grace)
	if err != nil {
		return r, err
	}
	r.Entries = fp.ScopeEntries(testsuite.Scope{Key: apiKey, Model: s.Provider.Model})
	r.Figures = figures.Measure(r.Entries, r.Limits, end)
	return r, nil
}

// drain waits for the batch, at most timeout, and returns when it ended:
// its last call's completion, or the timeout's expiry.
func drain(ctx context.Context, env *Env, batch client.WorkflowRun, timeout time.Duration, r *Result) (time.Time, error) {
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var br BatchResult
	for {
		err := batch.Get(bctx, &br)
		switch {
		case err == nil:
			r.Completed = br.Completed
			return br.Last, nil
		case ctx.Err() != nil:
			return time.Time{}, err
		case bctx.Err() == nil && !errors.As(err, new(*temporal.WorkflowExecutionError)):
			// A long poll failed short of our deadline (its own deadline,
			// a canceled stream): poll again.
			if err := sleep(bctx, 100*time.Millisecond); err == nil {
				continue
			}
		case bctx.Err() == nil:
			return time.Time{}, err
		}
		break
	}
	r.TimedOut = true
	end := time.Now()
	if v, qerr := env.Client.QueryWorkflow(ctx, batch.GetID(), batch.GetRunID(), completedQuery); qerr == nil {
		_ = v.Get(&r.Completed)
	}
	return end, nil
}

// firstRequest waits until the fake provider has seen a request.
func firstRequest(ctx context.Context, fp *testsuite.FakeProvider, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for len(fp.Entries()) == 0 {
		if time.Now().After(deadline) {
			return errors.New("the batch sent no request")
		}
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// terminate ends a workflow that is still running (after a timeout or an
// error), so its retries stop.
func terminate(c client.Client, run client.WorkflowRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "goodput run over")
}
