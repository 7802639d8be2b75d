package workflows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/testsuite/replay"
	"github.com/tollgate-dev/tollgate/workflows"
)

// SummarizeWorkflow asks OpenAI first and falls back to Anthropic.
func SummarizeWorkflow(ctx workflow.Context, text string) (string, error) {
	msgs := []activities.Message{{Role: "user", Content: "Summarize: " + text}}
	var res activities.Result
	used, err := workflows.CallModel(ctx, workflows.Options{ScheduleToClose: 5 * time.Minute}, capacity.Interactive, []workflows.Call{
		{Activity: "Chat", Input: activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "default", MaxTokens: 50, Messages: msgs, Class: capacity.Interactive}},
		{Activity: "Messages", Input: activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "default", MaxTokens: 50, Messages: msgs, Class: capacity.Interactive}},
	}, &res)
	if err != nil {
		return "", err
	}
	return []string{"openai", "anthropic"}[used] + ": " + res.Model, nil
}

// SummarizeWorkflowChanged is SummarizeWorkflow after an incompatible edit.
func SummarizeWorkflowChanged(ctx workflow.Context, text string) (string, error) {
	var out string
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflows.Options{}.ActivityOptions(capacity.Interactive)),
		"Messages", activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5"}).Get(ctx, &out)
	return out, err
}

// On a real dev server: OpenAI's daily quota is spent, so CallModel falls
// back to Anthropic; the recorded history replays deterministically, and a
// changed workflow is caught by the replay.
func TestCallModelFallsBackOnADevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: "gpt-4o-mini", Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerDay: 1}},
		{Name: "claude-sonnet-4-5", Provider: testsuite.Anthropic},
	}})
	require.NoError(t, err)
	defer fp.Close()
	// Another client spent today's only OpenAI request.
	_, err = fp.Spend(testsuite.Scope{Key: testsuite.DefaultKey, Model: "gpt-4o-mini"}, testsuite.Demand{InputTokens: 10, MaxTokens: 10})
	require.NoError(t, err)

	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{RequestsPerMinute: 600}, true },
	})
	require.NoError(t, err)
	creds := activities.StaticCredentials{"default": testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL()})
	require.NoError(t, err)
	w := worker.New(srv.Client(), "summaries", worker.Options{Plugins: []worker.Plugin{plugin}})
	w.RegisterActivity(oa)
	w.RegisterActivity(an)
	w.RegisterWorkflow(SummarizeWorkflow)
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "summarize-1", TaskQueue: "summaries"}, SummarizeWorkflow, "a long text")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, "anthropic: claude-sonnet-4-5", out, "fell back from the exhausted OpenAI quota")

	h, err := replay.Fetch(ctx, srv.Client(), run.GetID(), run.GetRunID())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "summarize.json")
	require.NoError(t, replay.Save(h, path))
	require.NoError(t, replay.CheckFile(path, devserver.QuietLogger(), func(r worker.WorkflowReplayer) {
		r.RegisterWorkflow(SummarizeWorkflow)
	}), "the recorded history replays")
	err = replay.CheckFile(path, devserver.QuietLogger(), func(r worker.WorkflowReplayer) {
		r.RegisterWorkflowWithOptions(SummarizeWorkflowChanged, workflow.RegisterOptions{Name: "SummarizeWorkflow"})
	})
	assert.Error(t, err, "an incompatible change is caught")
}
