package activities

import (
	"context"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// The full forms: activities that take each provider SDK's own request
// type, so every feature of the API is there (tools, structured output,
// images, documents, prompt caching, thinking), and return what the SDK
// returned. Each request type survives Temporal's JSON payload converter
// unchanged (TestSDKRequestsSurviveThePayloadConverter). The request's own
// model and max tokens are what the gate charges; the input is estimated
// from the whole request (EstimateOpenAIChat, EstimateAnthropicMessages,
// EstimateGeminiContent) unless InputTokens gives it.

// OpenAIChatCompletionRequest is the input of OpenAI.ChatCompletion.
// Params.Model and one of Params.MaxCompletionTokens or Params.MaxTokens are
// required: OpenAI charges max tokens (times Params.N) against TPM at
// admission. Streaming is not part of it.
type OpenAIChatCompletionRequest struct {
	Params     openai.ChatCompletionNewParams
	Credential string
	Region     string
	// ExpectedOutputTokens is the expected completion length, for the
	// output-tokens budget; if zero, the max tokens.
	ExpectedOutputTokens int64
	// InputTokens, when set, is the exact input; else EstimateOpenAIChat.
	InputTokens int64
	Class       capacity.Class
	// UsageKey names the kind of call (interceptor.Call.UsageKey).
	UsageKey string
}

// maxTokens is the request's max tokens times its choices.
func (r OpenAIChatCompletionRequest) maxTokens() int64 {
	m := r.Params.MaxCompletionTokens.Value
	if !r.Params.MaxCompletionTokens.Valid() {
		m = r.Params.MaxTokens.Value
	}
	if n := r.Params.N; n.Valid() && n.Value > 1 {
		m *= n.Value
	}
	return m
}

// TollgateCall implements interceptor.ModelCall.
func (r OpenAIChatCompletionRequest) TollgateCall() interceptor.Call {
	in := r.InputTokens
	if in <= 0 {
		in = EstimateOpenAIChat(r.Params)
	}
	return interceptor.Call{
		Provider: capacity.OpenAI, Model: r.Params.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, OutputTokens: r.ExpectedOutputTokens, MaxTokens: r.maxTokens()},
	}
}

func (r OpenAIChatCompletionRequest) validate() error {
	return validateCall(r.Params.Model, r.Credential, len(r.Params.Messages), r.maxTokens())
}

// OpenAIChatCompletionResult is what OpenAI.ChatCompletion returns: the
// completion as the SDK returned it (choices, tool calls, refusals, stop
// reasons), its usage and the rate-limit headers.
type OpenAIChatCompletionResult struct {
	Completion openai.ChatCompletion
	Usage      capacity.Usage
	// UsageMissing says the provider reported no usage (a stream without
	// its usage event): the call keeps its whole reservation.
	UsageMissing bool
	Header       http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r OpenAIChatCompletionResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: !r.UsageMissing, Header: r.Header}
}

// ChatCompletion sends the request as it is, with SDK retries off; errors
// are handled as Chat's.
func (a *OpenAI) ChatCompletion(ctx context.Context, req OpenAIChatCompletionRequest) (OpenAIChatCompletionResult, error) {
	key, err := a.opts.prepare(ctx, "openai chat completion", req.validate(), req.Credential)
	if err != nil {
		return OpenAIChatCompletionResult{}, err
	}
	client := openai.NewClient(a.opts.OpenAIRequestOptions(key)...)
	var resp *http.Response
	out, err := client.Chat.Completions.New(ctx, req.Params, option.WithResponseInto(&resp))
	if err != nil {
		return OpenAIChatCompletionResult{}, providerError(ctx, capacity.OpenAI, err)
	}
	if out == nil || len(out.Choices) == 0 {
		return OpenAIChatCompletionResult{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai chat completion", "a chat completion with a choice"))
	}
	res := OpenAIChatCompletionResult{Completion: *out, Usage: OpenAIUsage(out.Usage)}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

// AnthropicMessageRequest is the input of Anthropic.CreateMessage.
// Params.Model and Params.MaxTokens are required.
type AnthropicMessageRequest struct {
	Params     anthropic.MessageNewParams
	Credential string
	Region     string
	// ExpectedOutputTokens is the expected visible output; the reservation
	// adds the thinking budget. If zero, Params.MaxTokens is reserved.
	ExpectedOutputTokens int64
	// InputTokens, when set, is the exact input; else
	// EstimateAnthropicMessages, calibrated by the gate.
	InputTokens int64
	Class       capacity.Class
	// UsageKey names the kind of call (interceptor.Call.UsageKey).
	UsageKey string
}

// TollgateCall implements interceptor.ModelCall.
func (r AnthropicMessageRequest) TollgateCall() interceptor.Call {
	in, estimated := r.InputTokens, false
	if in <= 0 {
		in, estimated = EstimateAnthropicMessages(r.Params), true
	}
	var thinking int64
	if t := r.Params.Thinking.OfEnabled; t != nil {
		thinking = t.BudgetTokens
	}
	return interceptor.Call{
		Provider: capacity.Anthropic, Model: string(r.Params.Model), Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, InputEstimated: estimated,
			OutputTokens: reservedOutput(r.ExpectedOutputTokens, thinking, r.Params.MaxTokens), MaxTokens: r.Params.MaxTokens},
	}
}

func (r AnthropicMessageRequest) validate() error {
	return validateCall(string(r.Params.Model), r.Credential, len(r.Params.Messages), r.Params.MaxTokens)
}

// AnthropicMessageResult is what Anthropic.CreateMessage returns: the
// message as the SDK returned it (content blocks, tool use, thinking, stop
// reason), its usage and the rate-limit headers.
type AnthropicMessageResult struct {
	Message anthropic.Message
	Usage   capacity.Usage
	Header  http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r AnthropicMessageResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: true, Header: r.Header}
}

// CreateMessage sends the request as it is, with SDK retries off; errors
// are handled as Messages's.
func (a *Anthropic) CreateMessage(ctx context.Context, req AnthropicMessageRequest) (AnthropicMessageResult, error) {
	key, err := a.opts.prepare(ctx, "anthropic create message", req.validate(), req.Credential)
	if err != nil {
		return AnthropicMessageResult{}, err
	}
	client := anthropic.NewClient(a.opts.AnthropicRequestOptions(key)...)
	var resp *http.Response
	msg, err := client.Messages.New(ctx, req.Params, anthropicoption.WithResponseInto(&resp))
	if err != nil {
		return AnthropicMessageResult{}, providerError(ctx, capacity.Anthropic, err)
	}
	if msg == nil || (msg.ID == "" && msg.Type == "") {
		return AnthropicMessageResult{}, providerError(ctx, capacity.Anthropic, malformedAnswer("anthropic create message", "a message"))
	}
	res := AnthropicMessageResult{Message: *msg, Usage: AnthropicUsage(msg.Usage)}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

// GeminiContentRequest is the input of Gemini.Generate: genai's own
// contents and configuration (system instruction, tools, response schema,
// thinking, images). Model and Config.MaxOutputTokens are required.
type GeminiContentRequest struct {
	Model      string
	Contents   []*genai.Content
	Config     *genai.GenerateContentConfig
	Credential string
	Region     string
	// ExpectedOutputTokens is the expected visible output; the reservation
	// adds the thinking budget. If zero, the max output tokens.
	ExpectedOutputTokens int64
	// InputTokens, when set, is the exact input; else EstimateGeminiContent,
	// calibrated by the gate.
	InputTokens int64
	Class       capacity.Class
	// UsageKey names the kind of call (interceptor.Call.UsageKey).
	UsageKey string
}

func (r GeminiContentRequest) maxTokens() int64 {
	if r.Config == nil {
		return 0
	}
	return int64(r.Config.MaxOutputTokens)
}

// TollgateCall implements interceptor.ModelCall.
func (r GeminiContentRequest) TollgateCall() interceptor.Call {
	in, estimated := r.InputTokens, false
	if in <= 0 {
		in, estimated = EstimateGeminiContent(r.Contents, r.Config), true
	}
	var thinking int64
	if r.Config != nil && r.Config.ThinkingConfig != nil && r.Config.ThinkingConfig.ThinkingBudget != nil {
		thinking = max(int64(*r.Config.ThinkingConfig.ThinkingBudget), 0)
	}
	return interceptor.Call{
		Provider: capacity.Gemini, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, InputEstimated: estimated,
			OutputTokens: reservedOutput(r.ExpectedOutputTokens, thinking, r.maxTokens()), MaxTokens: r.maxTokens()},
	}
}

func (r GeminiContentRequest) validate() error {
	if err := validateCall(r.Model, r.Credential, len(r.Contents), r.maxTokens()); err != nil {
		return err
	}
	for _, c := range r.Contents {
		if c == nil {
			return errors.New("a content is nil")
		}
	}
	return nil
}

// GeminiContentResult is what Gemini.Generate returns: the response as the
// SDK returned it (candidates, function calls, thoughts), its usage and the
// headers kept (Gemini sends no rate-limit headers; Date is kept).
type GeminiContentResult struct {
	Response genai.GenerateContentResponse
	Usage    capacity.Usage
	Header   http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r GeminiContentResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: r.Response.UsageMetadata != nil, Header: r.Header}
}

// Generate sends the request as it is, with SDK retries off; errors are
// handled as GenerateContent's.
func (a *Gemini) Generate(ctx context.Context, req GeminiContentRequest) (GeminiContentResult, error) {
	key, err := a.opts.prepare(ctx, "gemini generate", req.validate(), req.Credential)
	if err != nil {
		return GeminiContentResult{}, err
	}
	client, err := a.opts.GeminiClient(ctx, key)
	if err != nil {
		return GeminiContentResult{}, notSent(ctx, misconfigured("gemini generate: "+err.Error()))
	}
	out, err := client.Models.GenerateContent(ctx, req.Model, req.Contents, req.Config)
	if err != nil {
		return GeminiContentResult{}, providerError(ctx, capacity.Gemini, err)
	}
	if out == nil {
		return GeminiContentResult{}, providerError(ctx, capacity.Gemini, malformedAnswer("gemini generate", "a response"))
	}
	res := GeminiContentResult{Usage: GeminiUsage(out.UsageMetadata)}
	if out.SDKHTTPResponse != nil {
		res.Header = RateLimitHeaders(out.SDKHTTPResponse.Headers)
	}
	res.Response = *out
	res.Response.SDKHTTPResponse = nil // its headers are in Header, filtered
	return res, nil
}

// OpenAIUsage maps OpenAI's usage to the gate's: uncached input, cache
// reads, and the completion (reasoning included).
func OpenAIUsage(u openai.CompletionUsage) capacity.Usage {
	return capacity.Usage{
		InputTokens:          u.PromptTokens - u.PromptTokensDetails.CachedTokens,
		CacheReadInputTokens: u.PromptTokensDetails.CachedTokens,
		OutputTokens:         u.CompletionTokens,
	}
}

// AnthropicUsage maps Anthropic's usage to the gate's: input, cache reads
// and writes, and output (thinking included).
func AnthropicUsage(u anthropic.Usage) capacity.Usage {
	return capacity.Usage{
		InputTokens:              u.InputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		OutputTokens:             u.OutputTokens,
	}
}

// GeminiUsage maps Gemini's usage metadata to the gate's: uncached input
// (tool-use prompts included), cache reads, visible output and thoughts.
// Nil is no usage.
func GeminiUsage(u *genai.GenerateContentResponseUsageMetadata) capacity.Usage {
	if u == nil {
		return capacity.Usage{}
	}
	return capacity.Usage{
		InputTokens:          int64(u.PromptTokenCount) - int64(u.CachedContentTokenCount) + int64(u.ToolUsePromptTokenCount),
		CacheReadInputTokens: int64(u.CachedContentTokenCount),
		OutputTokens:         int64(u.CandidatesTokenCount),
		ExtraReasoningTokens: int64(u.ThoughtsTokenCount), // thinking is output
	}
}
