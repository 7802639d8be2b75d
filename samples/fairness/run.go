package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// Env is what a run needs around it: the Temporal dev server and where
// progress goes.
type Env struct {
	Client    client.Client
	HostPort  string
	Namespace string
	// Redis, if set, runs the workers as Workers processes sharing a
	// redisstore there; else one worker in this process on a memory store.
	Redis   string
	Workers int
	// Engine is the workers' redisstore.Options.Engine (Redis mode).
	Engine redisstore.Engine
	Log    io.Writer // progress; io.Discard for none
}

// Options select a run.
type Options struct {
	Seed   uint64
	Phases Phases
	// Timeout bounds the wait for the first bulk tenant to drain. If zero,
	// three times the planned length (Newcomer + After).
	Timeout time.Duration
	// HeadersAt is when the fake provider computes its rate-limit headers.
	// If zero, as it answers.
	HeadersAt testsuite.HeadersTime
}

// Result is what a run measured.
type Result struct {
	Plan     Plan
	Store    string // "memory" or "redis"
	Workers  int
	Record   Record
	Figures  Figures
	TimedOut bool
	Progress map[string]Progress // each bulk tenant's, at the window's end
	// Note says what went wrong with the run's shape, if anything.
	Note string
}

// streamGrace is how long a run waits for the interactive calls in flight
// once the window has ended. A call it cuts short counts as failed, so it
// is long enough for a machine that runs every package's tests at once:
// CI ran the short test in 28.6 s instead of 15 s and cut one call short at
// 10 s.
const streamGrace = 30 * time.Second

// Run makes one run: a fresh fake provider and task queue, the workers, A,
// B and C's backlogs and the interactive stream at once, D's backlog
// Phases.Newcomer later; it ends when the first bulk tenant has drained,
// and measures the fake provider's record.
func Run(ctx context.Context, env *Env, o Options) (Result, error) {
	plan := NewPlan(Workload{Seed: o.Seed}, o.Phases)
	if o.Timeout == 0 {
		o.Timeout = 3 * (o.Phases.Newcomer + o.Phases.After)
	}
	r := Result{Plan: plan, Store: "memory", Workers: 1, Progress: map[string]Progress{}}
	if env.Redis != "" {
		r.Store, r.Workers = "redis", env.Workers
	}
	fmt.Fprintf(env.Log, "plan: %s\n", plan.describe())
	fp, err := testsuite.New(testsuite.Options{
		Models:    []testsuite.Model{{Name: Model, Provider: testsuite.OpenAI, Limits: plan.Limits}},
		Keys:      []string{apiKey},
		Seed:      o.Seed,
		Output:    Output(o.Seed),
		Latency:   Latency,
		HeadersAt: o.HeadersAt,
	})
	if err != nil {
		return r, err
	}
	defer fp.Close()
	queue := fmt.Sprintf("fairness-%d", time.Now().UnixNano())
	stop, err := startWorkers(ctx, env, workerSpec{
		HostPort: env.HostPort, Namespace: env.Namespace, Queue: queue, BaseURL: fp.OpenAIBaseURL(),
		Limits: plan.TollgateLimits(), Fairness: plan.Fairness(), Slots: plan.Calls() + 1000,
	}, env.Workers)
	if err != nil {
		return r, err
	}
	defer stop()

	// A, B and C at once, the stream beside them, D later.
	drained := make(chan tenantDone, len(plan.Tenants))
	runs := make(map[string]client.WorkflowRun, len(plan.Tenants))
	defer func() {
		for _, run := range runs {
			terminate(env.Client, run.GetID())
		}
	}()
	start := func(t Tenant) error {
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-" + t.Name, TaskQueue: queue},
			TenantWorkflow, TenantRun{Workload: plan.Workload, Tenant: t.Name, Weight: t.Weight, Calls: t.Calls})
		if err != nil {
			return err
		}
		runs[t.Name] = run
		go func() {
			var p Progress
			err := run.Get(ctx, &p)
			drained <- tenantDone{t.Name, p, err}
		}()
		return nil
	}
	t0 := time.Now()
	for _, t := range plan.Tenants {
		if t.Arrives > 0 {
			continue
		}
		if err := start(t); err != nil {
			return r, err
		}
	}
	fmt.Fprintf(env.Log, "A, B and C scheduled their backlogs; interactive stream started\n")
	interactive := startStream(ctx, env, queue, plan.Workload, plan.Every)
	stopStream := func() error {
		var err error
		r.Record.Interactive, err = interactive.stop(ctx, env.Client, queue, streamGrace)
		return err
	}

	// The window ends when the first bulk tenant has drained (D included,
	// once it has arrived).
	timeout := time.NewTimer(o.Timeout)
	defer timeout.Stop()
	// D arrives Newcomer after the first bulk request reached the provider
	// (a slow start, such as under the race detector, delays it alike).
	first, err := firstBulkRequest(ctx, fp, o.Timeout)
	if err != nil {
		_ = stopStream()
		return r, err
	}
	newcomer := time.NewTimer(time.Until(first.Add(o.Phases.Newcomer)))
	defer newcomer.Stop()
	for r.Record.End.IsZero() && !r.TimedOut {
		select {
		case <-newcomer.C:
			for _, t := range plan.Tenants {
				if t.Arrives > 0 {
					if err := start(t); err != nil {
						_ = stopStream()
						return r, err
					}
				}
			}
			fmt.Fprintf(env.Log, "D scheduled its backlog at +%.1fs\n", time.Since(t0).Seconds())
		case d := <-drained:
			if d.err != nil {
				_ = stopStream()
				return r, fmt.Errorf("tenant %s: %w", d.tenant, d.err)
			}
			r.Progress[d.tenant] = d.progress
			r.Record.End = d.progress.Last
			fmt.Fprintf(env.Log, "%s drained at +%.1fs: the window ends\n", d.tenant, d.progress.Last.Sub(t0).Seconds())
		case <-timeout.C:
			r.TimedOut, r.Record.End = true, time.Now()
			fmt.Fprintf(env.Log, "no tenant drained within %v: the window ends\n", o.Timeout)
		case <-ctx.Done():
			_ = stopStream()
			return r, ctx.Err()
		}
	}
	if err := stopStream(); err != nil {
		return r, err
	}

	// Each tenant's span: from its workflow scheduling its backlog (its
	// history) to its last call's completion (a drained one's result; the
	// others are still backlogged, their progress queried).
	for _, t := range plan.Tenants {
		span := Span{Tenant: t.Name, Weight: t.Weight}
		if run, started := runs[t.Name]; started {
			p, ok := r.Progress[t.Name]
			var err error
			if !ok {
				p, err = queryProgress(ctx, env.Client, run)
				r.Progress[t.Name] = p
			}
			if err == nil {
				span.Start, err = scheduledAt(ctx, env.Client, run.GetID())
			}
			if err != nil {
				return r, fmt.Errorf("tenant %s: %w", t.Name, err)
			}
			span.End = p.Last
		} else {
			r.Note = fmt.Sprintf("a tenant drained before %s arrived: no phase with all four backlogged", t.Name)
		}
		r.Record.Spans = append(r.Record.Spans, span)
	}
	r.Record.Entries = fp.ScopeEntries(testsuite.Scope{Key: apiKey, Model: Model})
	r.Record.Limits = plan.Limits
	r.Figures = Measure(r.Record)
	return r, nil
}

// queryProgress queries a tenant workflow's Progress. A workflow whose
// task failed (on a loaded machine, one that outran the deadlock detector)
// answers no query until the server has retried the task: it is asked
// again every half second, for at most a minute.
func queryProgress(ctx context.Context, c client.Client, run client.WorkflowRun) (Progress, error) {
	var p Progress
	for tries := 0; ; tries++ {
		v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), progressQuery)
		if err == nil {
			return p, v.Get(&p)
		}
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) || tries == 120 {
			return p, err
		}
		select {
		case <-ctx.Done():
			return p, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// firstBulkRequest waits until the fake provider has seen a bulk request
// and returns its arrival.
func firstBulkRequest(ctx context.Context, fp *testsuite.FakeProvider, timeout time.Duration) (time.Time, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		for _, e := range fp.Entries() {
			if tenantOf(e.Tag) != Interactive {
				return e.Arrival, nil
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			return time.Time{}, fmt.Errorf("no bulk request within %v", timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// tenantDone is a bulk tenant's workflow's outcome.
type tenantDone struct {
	tenant   string
	progress Progress
	err      error
}

// terminate ends a workflow that is still running, so its calls stop.
func terminate(c client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.TerminateWorkflow(ctx, id, "", "fairness run over")
}
