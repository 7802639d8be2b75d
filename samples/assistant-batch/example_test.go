package assistantbatch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/activities"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
)

// AssistantWorkflow answers a question with one gated Chat call; here the
// activity is a stand-in, as in a workflow unit test.
func ExampleAssistantWorkflow() {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivityWithOptions(func(_ context.Context, req activities.OpenAIChatRequest) (activities.Result, error) {
		return activities.Result{Text: "A bucket that refills at the rate."}, nil
	}, activity.RegisterOptions{Name: "Chat"})
	env.ExecuteWorkflow(ab.AssistantWorkflow, "What is a token bucket?")
	var answer string
	if err := env.GetWorkflowResult(&answer); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(answer)
	// Output: A bucket that refills at the rate.
}
