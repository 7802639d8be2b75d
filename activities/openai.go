package activities

import (
	"context"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// OpenAIOptions configures the OpenAI activities (see ClientOptions).
type OpenAIOptions = ClientOptions

// OpenAI holds the OpenAI model-call activities. Register it with
// worker.RegisterActivity; its methods are the activities.
type OpenAI struct {
	opts OpenAIOptions
}

// NewOpenAI returns the OpenAI activities.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	if err := opts.check("OpenAIOptions"); err != nil {
		return nil, err
	}
	return &OpenAI{opts: opts}, nil
}

// OpenAIChatRequest is the input of OpenAI.Chat. It holds the credential
// scope's name, never its key.
type OpenAIChatRequest struct {
	Model      string
	Credential string
	Region     string
	Messages   []Message
	// MaxTokens is max_completion_tokens (reasoning included). Required:
	// OpenAI charges it against TPM at admission.
	MaxTokens int64
	// ExpectedOutputTokens is the expected completion length, for the
	// output-tokens budget; if zero, MaxTokens.
	ExpectedOutputTokens int64
	// InputTokens overrides the tokenizer's count when set.
	InputTokens int64
	Temperature *float64
	Class       capacity.Class
	// UsageKey names the kind of call whose output the gate learns
	// (interceptor.Call.UsageKey), such as "summarize"; if empty, the
	// activity type.
	UsageKey string
}

// TollgateCall implements interceptor.ModelCall.
func (r OpenAIChatRequest) TollgateCall() interceptor.Call {
	in := r.InputTokens
	if in <= 0 {
		in = EstimateOpenAITokens(r.Model, r.Messages)
	}
	return interceptor.Call{
		Provider: capacity.OpenAI, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, OutputTokens: r.ExpectedOutputTokens, MaxTokens: r.MaxTokens},
	}
}

func (r OpenAIChatRequest) validate() error {
	return validateCall(r.Model, r.Credential, len(r.Messages), r.MaxTokens)
}

// Chat sends a chat completion with SDK retries off (Temporal's retry
// policy, shaped by the gate, is the only retry loop) and returns its text,
// usage and rate-limit headers. Provider errors are returned as the SDK
// produced them for the gate to classify; run ungated, they are classified
// here and returned as secret-free ApplicationErrors.
func (a *OpenAI) Chat(ctx context.Context, req OpenAIChatRequest) (Result, error) {
	key, err := a.opts.prepare(ctx, "openai chat", req.validate(), req.Credential)
	if err != nil {
		return Result{}, err
	}
	client := openai.NewClient(a.opts.OpenAIRequestOptions(key)...)
	params := openai.ChatCompletionNewParams{
		Model:               req.Model,
		Messages:            openAIMessages(req.Messages),
		MaxCompletionTokens: openai.Int(req.MaxTokens),
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	var resp *http.Response
	out, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		return Result{}, providerError(ctx, capacity.OpenAI, err)
	}
	if out == nil || len(out.Choices) == 0 {
		// JSON that is not a chat completion (null, another object): the
		// answer is lost, as when the body does not parse.
		return Result{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai chat", "a chat completion with a choice"))
	}
	res := Result{
		Model: out.Model,
		Usage: OpenAIUsage(out.Usage),
	}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	res.Text = out.Choices[0].Message.Content
	res.FinishReason = out.Choices[0].FinishReason
	return res, nil
}

// OpenAIRequestOptions are the OpenAI client's options for key: SDK
// retries off (Temporal's retry policy, shaped by the gate, is the only
// retry loop), and o's base URL, HTTP client and request timeout. Add
// option.WithResponseInto to a call to capture its headers.
func (o ClientOptions) OpenAIRequestOptions(key string) []option.RequestOption {
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(0)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	if o.RequestTimeout > 0 {
		opts = append(opts, option.WithRequestTimeout(o.RequestTimeout))
	}
	return opts
}

func openAIMessages(ms []Message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(ms))
	for _, m := range ms {
		switch m.Role {
		case "system":
			out = append(out, openai.SystemMessage(m.Content))
		case "developer":
			out = append(out, openai.DeveloperMessage(m.Content))
		case "assistant":
			out = append(out, openai.AssistantMessage(m.Content))
		default:
			out = append(out, openai.UserMessage(m.Content))
		}
	}
	return out
}
