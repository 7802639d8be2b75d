package workflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/workflows"
)

// CallModel runs a chain of model calls: when the first one's quota is
// spent (a non-retryable tollgate.QuotaExhausted), it falls back to the
// next. Here the activities are stand-ins run by Temporal's test
// environment; a worker registers the activities package's instead.
func ExampleCallModel() {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	// A machine under load may take more than Temporal's default second
	// over a workflow task: not a deadlock.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivityWithOptions(func(context.Context, activities.OpenAIChatRequest) (string, error) {
		spent := tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Reason: tgerrors.ReasonBilling, Provider: capacity.OpenAI}
		return "", tgerrors.ActivityError(spent, "openai/gpt-4o/team-a")
	}, activity.RegisterOptions{Name: "Primary"})
	env.RegisterActivityWithOptions(func(_ context.Context, req activities.AnthropicMessagesRequest) (string, error) {
		return "answered by " + req.Model, nil
	}, activity.RegisterOptions{Name: "Fallback"})

	env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
		chain := []workflows.Call{
			{Activity: "Primary", Input: activities.OpenAIChatRequest{Model: "gpt-4o", Credential: "team-a",
				Messages: []activities.Message{{Role: "user", Content: "Summarise the ticket."}}}},
			{Activity: "Fallback", Input: activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "team-a",
				Messages: []activities.Message{{Role: "user", Content: "Summarise the ticket."}}, MaxTokens: 512}},
		}
		var answer string
		used, err := workflows.CallModel(ctx, workflows.Options{}, capacity.Interactive, chain, &answer)
		return fmt.Sprintf("call %d: %s", used, answer), err
	})
	var result string
	if err := env.GetWorkflowResult(&result); err != nil {
		panic(err)
	}
	fmt.Println(result)
	// Output:
	// call 1: answered by claude-sonnet-4-5
}
