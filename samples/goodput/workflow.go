package main

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Credential is the credential scope name of every call.
const Credential = "goodput"

// Route says how the workflows schedule their model calls.
type Route struct {
	Wire  testsuite.Provider
	Model string
	// Gated calls go through workflows.CallModel with their class (the
	// tollgate strategies); the others are scheduled with ungatedOptions.
	Gated bool
}

// ungatedOptions are the baselines' activity options: Temporal's default
// retry policy (1 s doubling to 100 s, unlimited attempts), bounded by an
// hour.
var ungatedOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    10 * time.Minute,
	ScheduleToCloseTimeout: time.Hour,
}

// Run is a workflow's input: the workload and the route of its calls.
type Run struct {
	Workload Workload
	Route    Route
}

// call runs call i of kind k to completion (or failure).
func (r Run) call(ctx workflow.Context, k Kind, i int) error {
	c := r.Workload.Call(k, i)
	msgs := []activities.Message{{Role: "user", Content: c.Prompt}}
	name, input := "Chat", any(activities.OpenAIChatRequest{
		Model: r.Route.Model, Credential: Credential, Messages: msgs, MaxTokens: c.MaxTokens, InputTokens: c.InputTokens(),
	})
	if r.Route.Wire == testsuite.Anthropic {
		name, input = "Messages", activities.AnthropicMessagesRequest{
			Model: r.Route.Model, Credential: Credential, Messages: msgs, MaxTokens: c.MaxTokens, InputTokens: c.InputTokens(),
		}
	}
	if r.Route.Gated {
		class := capacity.Bulk
		if k == Interactive {
			class = capacity.Interactive
		}
		var res activities.Result
		_, err := workflows.CallModel(ctx, workflows.Options{}, class, []workflows.Call{{Activity: name, Input: input}}, &res)
		return err
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ungatedOptions), name, input).Get(ctx, nil)
}

// BatchResult is what BatchWorkflow saw.
type BatchResult struct {
	Completed, Failed int
	// Last is when the last call completed (or failed), in workflow time.
	Last time.Time
}

// batchWorkflowName is BatchWorkflow's registered name: its activities'
// requests are tagged as the batch's (tagTransport).
const batchWorkflowName = "BatchWorkflow"

// BatchWorkflow submits every batch call at once and waits for all of them.
func BatchWorkflow(ctx workflow.Context, r Run) (BatchResult, error) {
	var res BatchResult
	if err := workflow.SetQueryHandler(ctx, completedQuery, func() (int, error) { return res.Completed, nil }); err != nil {
		return res, err
	}
	wg := workflow.NewWaitGroup(ctx)
	for i := range r.Workload.Calls {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			if err := r.call(ctx, Batch, i); err != nil {
				res.Failed++
				return
			}
			res.Completed++
		})
	}
	wg.Wait(ctx)
	res.Last = workflow.Now(ctx)
	return res, nil
}

// InteractiveResult is one interactive call's outcome: its latency, from
// scheduling its activity to seeing it complete (or fail).
type InteractiveResult struct {
	Latency time.Duration
	Failed  bool
}

// InteractiveWorkflow makes interactive call i. The stream is paced by the
// starter (one workflow every Workload.Every): Temporal timers fire on
// whole seconds, too coarse a tick.
func InteractiveWorkflow(ctx workflow.Context, r Run, i int) (InteractiveResult, error) {
	start := workflow.Now(ctx)
	err := r.call(ctx, Interactive, i)
	return InteractiveResult{Latency: workflow.Now(ctx).Sub(start), Failed: err != nil}, nil
}
