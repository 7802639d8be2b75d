package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/workflows"
)

// callOptions are the sample workflows' CallModel options.
var callOptions = workflows.Options{ScheduleToClose: 2 * time.Minute}

// OpenAIToolRoundTripWorkflow asks, answers the tool call the model makes
// with the tool's result, and returns both completions.
func OpenAIToolRoundTripWorkflow(ctx workflow.Context, req activities.OpenAIChatCompletionRequest) ([]activities.OpenAIChatCompletionResult, error) {
	var first, second activities.OpenAIChatCompletionResult
	if _, err := workflows.CallModel(ctx, callOptions, capacity.Interactive, []workflows.Call{{Activity: "ChatCompletion", Input: req}}, &first); err != nil {
		return nil, err
	}
	msg := first.Completion.Choices[0].Message
	if len(msg.ToolCalls) == 0 {
		return []activities.OpenAIChatCompletionResult{first}, nil
	}
	req.Params.Messages = append(req.Params.Messages, msg.ToParam(), openai.ToolMessage(`{"temperature_c":21}`, msg.ToolCalls[0].ID))
	if _, err := workflows.CallModel(ctx, callOptions, capacity.Interactive, []workflows.Call{{Activity: "ChatCompletion", Input: req}}, &second); err != nil {
		return nil, err
	}
	return []activities.OpenAIChatCompletionResult{first, second}, nil
}

// OpenAICompletionWorkflow makes one Chat Completions call.
func OpenAICompletionWorkflow(ctx workflow.Context, req activities.OpenAIChatCompletionRequest) (activities.OpenAIChatCompletionResult, error) {
	var res activities.OpenAIChatCompletionResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Standard, []workflows.Call{{Activity: "ChatCompletion", Input: req}}, &res)
	return res, err
}

// OpenAIStreamWorkflow makes one streamed Chat Completions call.
func OpenAIStreamWorkflow(ctx workflow.Context, req activities.OpenAIChatCompletionRequest) (activities.OpenAIChatCompletionResult, error) {
	var res activities.OpenAIChatCompletionResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Interactive, []workflows.Call{{Activity: "ChatCompletionStream", Input: req}}, &res)
	return res, err
}

// AnthropicStreamWorkflow makes one streamed Messages call.
func AnthropicStreamWorkflow(ctx workflow.Context, req activities.AnthropicMessageRequest) (activities.AnthropicMessageResult, error) {
	var res activities.AnthropicMessageResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Interactive, []workflows.Call{{Activity: "CreateMessageStream", Input: req}}, &res)
	return res, err
}

// OpenAIResponseWorkflow makes one Responses API call.
func OpenAIResponseWorkflow(ctx workflow.Context, req activities.OpenAIResponseRequest) (activities.OpenAIResponseResult, error) {
	var res activities.OpenAIResponseResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Standard, []workflows.Call{{Activity: "Response", Input: req}}, &res)
	return res, err
}

// AnthropicMessageWorkflow makes one Messages call.
func AnthropicMessageWorkflow(ctx workflow.Context, req activities.AnthropicMessageRequest) (activities.AnthropicMessageResult, error) {
	var res activities.AnthropicMessageResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Standard, []workflows.Call{{Activity: "CreateMessage", Input: req}}, &res)
	return res, err
}

// GeminiContentWorkflow makes one generateContent call.
func GeminiContentWorkflow(ctx workflow.Context, req activities.GeminiContentRequest) (activities.GeminiContentResult, error) {
	var res activities.GeminiContentResult
	_, err := workflows.CallModel(ctx, callOptions, capacity.Standard, []workflows.Call{{Activity: "Generate", Input: req}}, &res)
	return res, err
}

// openAIResponseRequest is a Responses API request with instructions and
// a function tool.
func openAIResponseRequest() activities.OpenAIResponseRequest {
	return activities.OpenAIResponseRequest{Params: responses.ResponseNewParams{
		Model: "gpt-4o", MaxOutputTokens: openai.Int(100), Instructions: openai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Lyon?")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather",
			map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, true)},
	}}
}

// TestSDKRequestsThroughTheGate runs the full request types through the
// gate on a dev server against the fake provider: a tool-calling round
// trip, structured output, an image, a streamed call (its text to the
// sink, its usage from the last event), a Responses API call, an Anthropic
// cached prompt and tool use, and a Gemini function call; every call admitted with no 429, and
// the usage each result reports is the provider's record.
func TestSDKRequestsThroughTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own dev server and fake provider
	const openaiModel, anthropicModel, geminiModel = "gpt-4o", "claude-sonnet-4-5", "gemini-2.5-flash"
	srv := devserver.StartForTest(t)
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{
			{Name: openaiModel, Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 600000}},
			{Name: anthropicModel, Provider: testsuite.Anthropic, Limits: testsuite.Limits{RequestsPerMinute: 600, InputTokensPerMinute: 600000, OutputTokensPerMinute: 600000}},
			{Name: geminiModel, Provider: testsuite.Gemini, Limits: testsuite.Limits{RequestsPerMinute: 600, InputTokensPerMinute: 600000}},
		},
		Keys: []string{e2eKey}, Output: testsuite.FixedOutput(12),
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store: capacity.NewMemoryStore(capacity.MemoryOptions{}),
		// Gemini reports no limits; OpenAI and Anthropic scopes run on the
		// ones they report.
		Limits: func(s capacity.Scope) (capacity.Limits, bool) {
			if s.Provider == capacity.Gemini {
				return capacity.Limits{RequestsPerMinute: 600, InputTokensPerMinute: 600000}, true
			}
			return capacity.Limits{}, true
		},
	})
	require.NoError(t, err)
	creds := activities.StaticCredentials{"e2e": e2eKey}
	var streamed []string // what the sink received
	var streamedMu sync.Mutex
	sink := func(_ context.Context, delta string) error {
		streamedMu.Lock()
		defer streamedMu.Unlock()
		streamed = append(streamed, delta)
		return nil
	}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL(), Sink: sink})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL(), Sink: sink})
	require.NoError(t, err)
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: creds, BaseURL: fp.GeminiBaseURL()})
	require.NoError(t, err)
	w := worker.New(srv.Client(), "sdk", worker.Options{Plugins: []worker.Plugin{plugin}})
	for _, a := range []any{oa, an, gm} {
		w.RegisterActivity(a)
	}
	for _, wf := range []any{OpenAIToolRoundTripWorkflow, OpenAICompletionWorkflow, OpenAIStreamWorkflow, AnthropicStreamWorkflow, OpenAIResponseWorkflow, AnthropicMessageWorkflow, GeminiContentWorkflow} {
		w.RegisterWorkflow(wf)
	}
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	var reported capacity.Usage // what every result reported
	add := func(u capacity.Usage) {
		reported.InputTokens += u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		reported.OutputTokens += u.OutputTokens + u.ExtraReasoningTokens
	}
	run := func(t *testing.T, wf any, in, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "sdk-" + t.Name(), TaskQueue: "sdk"}, wf, in)
		require.NoError(t, err)
		require.NoError(t, r.Get(ctx, out))
	}
	chat := func(t *testing.T) activities.OpenAIChatCompletionRequest {
		return activities.OpenAIChatCompletionRequest{Credential: "e2e", Params: openai.ChatCompletionNewParams{
			Model: openaiModel, MaxCompletionTokens: openai.Int(100),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Lyon?")},
		}}
	}

	t.Run("OpenAIToolRoundTrip", func(t *testing.T) {
		req := chat(t)
		req.Params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(weatherTool)}
		var res []activities.OpenAIChatCompletionResult
		run(t, OpenAIToolRoundTripWorkflow, req, &res)
		require.Len(t, res, 2, "a tool call, then the answer")
		call := res[0].Completion.Choices[0]
		assert.Equal(t, "tool_calls", call.FinishReason)
		require.Len(t, call.Message.ToolCalls, 1)
		assert.Equal(t, "get_weather", call.Message.ToolCalls[0].Function.Name)
		assert.JSONEq(t, `{"city":"tok"}`, call.Message.ToolCalls[0].Function.Arguments)
		assert.Empty(t, res[1].Completion.Choices[0].Message.ToolCalls, "the tool's result answered")
		assert.NotEmpty(t, res[1].Completion.Choices[0].Message.Content)
		add(res[0].Usage)
		add(res[1].Usage)
	})
	t.Run("OpenAIStructuredOutput", func(t *testing.T) {
		req := openAIFullRequest(t)
		req.Credential, req.Params.Model, req.Params.Tools, req.Params.N = "e2e", openaiModel, nil, openai.Int(1)
		req.Class = capacity.Standard // the class is CallModel's
		var res activities.OpenAIChatCompletionResult
		run(t, OpenAICompletionWorkflow, req, &res)
		var answer map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Completion.Choices[0].Message.Content), &answer))
		assert.Equal(t, "tok", answer["city"], "the schema's shape")
		add(res.Usage)
	})
	t.Run("OpenAIImage", func(t *testing.T) {
		req := chat(t)
		req.Params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("describe"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngDataURL(t, 1024, 1024), Detail: "high"}),
		})}
		var res activities.OpenAIChatCompletionResult
		run(t, OpenAICompletionWorkflow, req, &res)
		assert.Less(t, res.Usage.InputTokens, int64(800), "the image by its formula (765), not its bytes")
		assert.Greater(t, res.Usage.InputTokens, int64(765))
		add(res.Usage)
	})
	t.Run("OpenAIStream", func(t *testing.T) {
		req := chat(t)
		var res activities.OpenAIChatCompletionResult
		run(t, OpenAIStreamWorkflow, req, &res)
		streamedMu.Lock()
		deltas := append([]string(nil), streamed...)
		streamedMu.Unlock()
		assert.Len(t, deltas, 12, "a delta per token, to the sink")
		assert.Equal(t, strings.Join(deltas, ""), res.Completion.Choices[0].Message.Content, "the result adds the deltas up")
		assert.False(t, res.UsageMissing, "the usage came in the stream's last event")
		assert.Equal(t, int64(12), res.Usage.OutputTokens)
		add(res.Usage)
	})
	t.Run("AnthropicStream", func(t *testing.T) {
		streamedMu.Lock()
		streamed = nil
		streamedMu.Unlock()
		req := activities.AnthropicMessageRequest{Credential: "e2e", Params: anthropic.MessageNewParams{Model: anthropicModel, MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}}
		var res activities.AnthropicMessageResult
		run(t, AnthropicStreamWorkflow, req, &res)
		streamedMu.Lock()
		deltas := append([]string(nil), streamed...)
		streamedMu.Unlock()
		assert.Len(t, deltas, 12, "a delta per token, to the sink")
		require.NotEmpty(t, res.Message.Content)
		assert.Equal(t, strings.Join(deltas, ""), res.Message.Content[0].Text)
		assert.Equal(t, int64(12), res.Usage.OutputTokens, "from the last message_delta")
		assert.Positive(t, res.Usage.InputTokens, "from message_start")
		add(res.Usage)
	})
	t.Run("OpenAIResponses", func(t *testing.T) {
		req := openAIResponseRequest()
		req.Credential, req.Params.Model = "e2e", openaiModel
		var res activities.OpenAIResponseResult
		run(t, OpenAIResponseWorkflow, req, &res)
		require.NotEmpty(t, res.Response.Output)
		call := res.Response.Output[0]
		assert.Equal(t, "function_call", call.Type)
		assert.Equal(t, "get_weather", call.Name)
		add(res.Usage)
	})
	t.Run("AnthropicCachedPromptAndTools", func(t *testing.T) {
		req := anthropicFullRequest(t)
		req.Credential, req.Params.Model = "e2e", anthropicModel
		req.Params.System[0].Text = strings.Repeat("You answer in one short sentence. ", 200)
		var first, second activities.AnthropicMessageResult
		run(t, AnthropicMessageWorkflow, req, &first)
		t.Run("again", func(t *testing.T) { run(t, AnthropicMessageWorkflow, req, &second) })
		assert.Positive(t, first.Usage.CacheCreationInputTokens, "the marked system prompt is written to the cache")
		assert.Positive(t, second.Usage.CacheReadInputTokens, "and read from it the second time")
		assert.Equal(t, anthropic.StopReasonToolUse, first.Message.StopReason)
		add(first.Usage)
		add(second.Usage)
	})
	t.Run("GeminiFunctionCall", func(t *testing.T) {
		req := geminiFullRequest(t)
		req.Credential, req.Model = "e2e", geminiModel
		req.Config.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather",
			Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}}}}}}
		var res activities.GeminiContentResult
		run(t, GeminiContentWorkflow, req, &res)
		require.NotEmpty(t, res.Response.Candidates)
		parts := res.Response.Candidates[0].Content.Parts
		require.NotEmpty(t, parts)
		require.NotNil(t, parts[0].FunctionCall)
		assert.Equal(t, "get_weather", parts[0].FunctionCall.Name)
		add(res.Usage)
	})

	var recorded capacity.Usage
	rateLimited := 0
	for _, e := range fp.Entries() {
		if e.Status == 429 {
			rateLimited++
		}
		if e.Admitted {
			recorded.InputTokens += e.Usage.InputTokens
			recorded.OutputTokens += e.Usage.OutputTokens
		}
	}
	assert.Zero(t, rateLimited, "no 429")
	assert.Equal(t, recorded, reported, "the usage the results report is the provider's record")
}
