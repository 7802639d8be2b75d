package activities

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// AnthropicOptions configures the Anthropic activities (see ClientOptions).
type AnthropicOptions = ClientOptions

// Anthropic holds the Anthropic model-call activities.
type Anthropic struct {
	opts AnthropicOptions
}

// NewAnthropic returns the Anthropic activities.
func NewAnthropic(opts AnthropicOptions) (*Anthropic, error) {
	if err := opts.check("AnthropicOptions"); err != nil {
		return nil, err
	}
	return &Anthropic{opts: opts}, nil
}

// AnthropicMessagesRequest is the input of Anthropic.Messages.
type AnthropicMessagesRequest struct {
	Model      string
	Credential string
	Region     string
	System     string
	Messages   []Message
	// MaxTokens is max_tokens, thinking budget included. Required.
	MaxTokens int64
	// ThinkingBudget, if set, enables extended thinking with this budget.
	ThinkingBudget int64
	// ExpectedOutputTokens is the expected visible output; the reservation
	// adds ThinkingBudget (thinking is output). If zero, MaxTokens is
	// reserved.
	ExpectedOutputTokens int64
	// InputTokens, when set, is the exact input, used as it is; else the
	// input is estimated (bytes / 3) and the gate calibrates the estimate
	// by the scope's learned ratio of actual to estimated input.
	InputTokens int64
	Temperature *float64
	Class       capacity.Class
	// UsageKey names the kind of call whose output the gate learns
	// (interceptor.Call.UsageKey), such as "summarize"; if empty, the
	// activity type.
	UsageKey string
}

// TollgateCall implements interceptor.ModelCall. Output is reserved as the
// expected output plus the thinking budget, else max_tokens, or, once the
// gate has learned it, the call kind's p95 output (interceptor.LearnOptions);
// Anthropic meters output as produced, so the reservation is settled to
// actual usage.
func (r AnthropicMessagesRequest) TollgateCall() interceptor.Call {
	in, estimated := r.InputTokens, false
	if in <= 0 {
		in, estimated = EstimateAnthropicTokens(r.System, r.Messages), true // bytes / 3: calibrated by the gate
	}
	out := reservedOutput(r.ExpectedOutputTokens, r.ThinkingBudget, r.MaxTokens)
	return interceptor.Call{
		Provider: capacity.Anthropic, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, InputEstimated: estimated, OutputTokens: out, MaxTokens: r.MaxTokens},
	}
}

func (r AnthropicMessagesRequest) validate() error {
	if err := validateCall(r.Model, r.Credential, len(r.Messages), r.MaxTokens); err != nil {
		return err
	}
	if r.ThinkingBudget < 0 || (r.ThinkingBudget > 0 && r.ThinkingBudget >= r.MaxTokens) {
		return errors.New("the thinking budget must be below max tokens")
	}
	return nil
}

// Messages sends a Messages request with SDK retries off and returns its
// text, usage and rate-limit headers. Errors are handled as OpenAI.Chat's.
func (a *Anthropic) Messages(ctx context.Context, req AnthropicMessagesRequest) (Result, error) {
	key, err := a.opts.prepare(ctx, "anthropic messages", req.validate(), req.Credential)
	if err != nil {
		return Result{}, err
	}
	client := anthropic.NewClient(a.opts.AnthropicRequestOptions(key)...)
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: req.MaxTokens,
		Messages:  anthropicMessages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if req.ThinkingBudget > 0 {
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(req.ThinkingBudget)
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	var resp *http.Response
	msg, err := client.Messages.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		return Result{}, providerError(ctx, capacity.Anthropic, err)
	}
	if msg == nil || (msg.ID == "" && msg.Type == "") {
		// JSON that is not a message (null, another object): the answer is
		// lost, as when the body does not parse.
		return Result{}, providerError(ctx, capacity.Anthropic, malformedAnswer("anthropic messages", "a message"))
	}
	res := Result{
		Model:        string(msg.Model),
		FinishReason: string(msg.StopReason),
		Usage:        AnthropicUsage(msg.Usage),
	}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	var text strings.Builder
	for _, b := range msg.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	res.Text = text.String()
	return res, nil
}

// AnthropicRequestOptions are the Anthropic client's options for key: SDK
// retries off (Temporal's retry policy, shaped by the gate, is the only
// retry loop), and o's base URL, HTTP client and request timeout. Add
// option.WithResponseInto to a call to capture its headers.
func (o ClientOptions) AnthropicRequestOptions(key string) []option.RequestOption {
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

func anthropicMessages(ms []Message) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, 0, len(ms))
	for _, m := range ms {
		if m.Role == "assistant" {
			out = append(out, anthropic.NewAssistantMessage(anthropic.NewTextBlock(m.Content)))
			continue
		}
		out = append(out, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
	}
	return out
}
