package activities

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// GeminiOptions configures the Gemini activities (see ClientOptions; BaseURL
// is genai's HTTPOptions.BaseURL, such as FakeProvider.GeminiBaseURL).
type GeminiOptions = ClientOptions

// Gemini holds the Gemini API model-call activities (the Gemini Developer
// API backend of google.golang.org/genai, keyed by API key).
type Gemini struct {
	opts GeminiOptions
}

// NewGemini returns the Gemini activities.
func NewGemini(opts GeminiOptions) (*Gemini, error) {
	if err := opts.check("GeminiOptions"); err != nil {
		return nil, err
	}
	return &Gemini{opts: opts}, nil
}

// GeminiGenerateRequest is the input of Gemini.GenerateContent.
type GeminiGenerateRequest struct {
	Model      string
	Credential string
	Region     string
	// System is the system instruction.
	System   string
	Messages []Message // "assistant" is sent as role "model"
	// MaxTokens is maxOutputTokens. Required: it bounds the output and the
	// output reservation.
	MaxTokens int64
	// ThinkingBudget, if set, is thinkingConfig.thinkingBudget.
	ThinkingBudget int64
	// ExpectedOutputTokens is the expected visible output; the reservation
	// adds ThinkingBudget (thinking is output). If zero, MaxTokens is
	// reserved. Gemini meters no output per minute, so it only matters for
	// limits that set an output budget.
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

// TollgateCall implements interceptor.ModelCall. Gemini's TPM counts input
// tokens: the profile (accounting.GeminiProfile) charges requests and input,
// settled to the reported promptTokenCount.
func (r GeminiGenerateRequest) TollgateCall() interceptor.Call {
	in, estimated := r.InputTokens, false
	if in <= 0 {
		in, estimated = EstimateGeminiTokens(r.System, r.Messages), true // bytes / 3: calibrated by the gate
	}
	out := reservedOutput(r.ExpectedOutputTokens, r.ThinkingBudget, r.MaxTokens)
	return interceptor.Call{
		Provider: capacity.Gemini, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, InputEstimated: estimated, OutputTokens: out, MaxTokens: r.MaxTokens},
	}
}

func (r GeminiGenerateRequest) validate() error {
	if err := validateCall(r.Model, r.Credential, len(r.Messages), r.MaxTokens); err != nil {
		return err
	}
	switch {
	case r.MaxTokens > 1<<31-1 || r.ThinkingBudget > 1<<31-1:
		return errors.New("max tokens and the thinking budget must fit in 32 bits")
	case r.ThinkingBudget < 0:
		return errors.New("the thinking budget must not be negative")
	}
	return nil
}

// GenerateContent sends a generateContent request with SDK retries off and
// returns its text, its usage (thoughtsTokenCount as output beside
// candidatesTokenCount) and the response's rate-limit headers (Gemini sends
// none; Date is kept). Errors are handled as OpenAI.Chat's.
func (a *Gemini) GenerateContent(ctx context.Context, req GeminiGenerateRequest) (Result, error) {
	key, err := a.opts.prepare(ctx, "gemini generate content", req.validate(), req.Credential)
	if err != nil {
		return Result{}, err
	}
	client, err := a.opts.GeminiClient(ctx, key)
	if err != nil {
		return Result{}, notSent(ctx, misconfigured("gemini generate content: "+err.Error()))
	}
	config := &genai.GenerateContentConfig{MaxOutputTokens: int32(req.MaxTokens)}
	if req.System != "" {
		config.SystemInstruction = genai.NewContentFromText(req.System, genai.RoleUser)
	}
	if req.ThinkingBudget > 0 {
		b := int32(req.ThinkingBudget)
		config.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: &b}
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		config.Temperature = &t
	}
	out, err := client.Models.GenerateContent(ctx, req.Model, geminiContents(req.Messages), config)
	if err != nil {
		return Result{}, providerError(ctx, capacity.Gemini, err)
	}
	res := Result{Model: out.ModelVersion}
	if res.Model == "" {
		res.Model = req.Model
	}
	res.Usage = GeminiUsage(out.UsageMetadata)
	if out.SDKHTTPResponse != nil {
		res.Header = RateLimitHeaders(out.SDKHTTPResponse.Headers)
	}
	if len(out.Candidates) > 0 {
		c := out.Candidates[0]
		res.FinishReason = string(c.FinishReason)
		if c.Content != nil {
			var text strings.Builder
			for _, p := range c.Content.Parts {
				if p != nil && !p.Thought {
					text.WriteString(p.Text)
				}
			}
			res.Text = text.String()
		}
	}
	return res, nil
}

// GeminiClient is a Gemini API client for key with SDK retries off (one
// attempt: Temporal's retry policy, shaped by the gate, is the only retry
// loop), and o's base URL, HTTP client and request timeout. A response's
// SDKHTTPResponse carries its headers.
func (o ClientOptions) GeminiClient(ctx context.Context, key string) (*genai.Client, error) {
	one := int32(1)
	cc := &genai.ClientConfig{
		APIKey:     key,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: o.HTTPClient,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      o.BaseURL,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}, // one attempt: no SDK retries
		},
	}
	if o.RequestTimeout > 0 {
		t := o.RequestTimeout
		cc.HTTPOptions.Timeout = &t
	}
	return genai.NewClient(ctx, cc)
}

func geminiContents(ms []Message) []*genai.Content {
	out := make([]*genai.Content, 0, len(ms))
	for _, m := range ms {
		role := genai.Role(genai.RoleUser)
		if m.Role == "assistant" || m.Role == "model" {
			role = genai.RoleModel
		}
		out = append(out, genai.NewContentFromText(m.Content, role))
	}
	return out
}
