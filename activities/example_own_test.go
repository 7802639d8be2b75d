package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/log"
	temporaltest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/workflows"
)

// SummarizeInput is the input of an activity of your own. Its TollgateCall,
// on the value, says what the call costs before it is sent.
type SummarizeInput struct{ Credential, Text string }

func (in SummarizeInput) params() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o-mini", MaxCompletionTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Summarize."), openai.UserMessage(in.Text)}}
}

func (in SummarizeInput) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: capacity.OpenAI, Model: "gpt-4o-mini", Credential: in.Credential,
		Demand: capacity.Demand{InputTokens: activities.EstimateOpenAIChat(in.params()), MaxTokens: 100}}
}

// Summary is its result: TollgateReport gives the gate the usage and the
// rate-limit headers.
type Summary struct {
	Text   string
	Usage  capacity.Usage
	Header http.Header
}

func (s Summary) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: s.Usage, HasUsage: true, Header: s.Header}
}

// Summarizer holds the activity: the key comes from the worker, the SDK's
// retries are off, and the provider's error is returned as it is for the
// gate to classify.
type Summarizer struct{ Options activities.ClientOptions }

func (s *Summarizer) Summarize(ctx context.Context, in SummarizeInput) (Summary, error) {
	key, err := s.Options.Credentials.APIKey(ctx, interceptor.Credential(ctx, in.Credential))
	if err != nil {
		return Summary{}, err
	}
	var resp *http.Response
	client := openai.NewClient(s.Options.OpenAIRequestOptions(key)...)
	out, err := client.Chat.Completions.New(ctx, in.params(), option.WithResponseInto(&resp))
	if err != nil {
		return Summary{}, err
	}
	return Summary{Text: out.Choices[0].Message.Content, Usage: activities.OpenAIUsage(out.Usage),
		Header: activities.RateLimitHeaders(resp.Header)}, nil
}

// An activity of your own, gated: the worker's plugin admits the call on
// the scope's budget (here the limits the provider reports), settles it
// with the usage it reports, and follows its headers.
func Example_ownActivity() {
	fp, _ := testsuite.New(testsuite.Options{Output: testsuite.FixedOutput(3), Models: []testsuite.Model{
		{Name: "gpt-4o-mini", Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 60, TokensPerMinute: 10000}}}})
	defer fp.Close()

	var ts temporaltest.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	plugin, _ := interceptor.NewPlugin(interceptor.Options{Store: store})
	env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}, DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(&Summarizer{Options: activities.ClientOptions{BaseURL: fp.OpenAIBaseURL(),
		Credentials: activities.StaticCredentials{"default": testsuite.DefaultKey}}})
	env.ExecuteWorkflow(func(ctx workflow.Context) (Summary, error) {
		var s Summary
		_, err := workflows.CallModel(ctx, workflows.Options{}, capacity.Standard,
			[]workflows.Call{{Activity: "Summarize", Input: SummarizeInput{Credential: "default", Text: "A long text."}}}, &s)
		return s, err
	})
	var s Summary
	if err := env.GetWorkflowResult(&s); err != nil {
		fmt.Println(err)
		return
	}
	snap, _ := store.Snapshot(context.Background(), capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "default"})
	fmt.Printf("%q, %d input and %d output tokens\n", s.Text, s.Usage.InputTokens, s.Usage.OutputTokens)
	fmt.Printf("runs on the reported %.0f requests a minute\n", snap.Budget[capacity.Requests].Rate*60/capacity.DefaultSafetyMargin)
	// Output:
	// "tok tok tok", 14 input and 3 output tokens
	// runs on the reported 60 requests a minute
}
