package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// MaxEmbeddingInputs is the most inputs one embeddings request may carry
// (OpenAI's limit per request). A result travels through workflow history,
// about 10 bytes per value: 100 inputs of 1,536 dimensions is 1.5 MB, near
// Temporal's 2 MB payload limit, so keep batches small or ask for fewer
// Dimensions, or store the vectors from an activity of your own.
const MaxEmbeddingInputs = 2048

// EmbedRequest is the input of OpenAI.Embeddings and Gemini.EmbedContent: a batch of
// texts to embed with one request. It holds the credential scope's name,
// never its key. Embeddings are charged as the providers charge them: one
// request and the input's tokens, no output.
type EmbedRequest struct {
	Model      string
	Credential string
	Region     string
	Input      []string
	// Dimensions, if set, is the length of the vectors (OpenAI dimensions,
	// Gemini outputDimensionality); else the model's.
	Dimensions int64
	// InputTokens, when set, is the exact input, used as it is; else OpenAI's
	// tokenizer counts it (Gemini's is estimated at bytes / 3 and
	// calibrated by the gate).
	InputTokens int64
	Class       capacity.Class
	// UsageKey names the kind of call (interceptor.Call.UsageKey); if empty,
	// the activity type.
	UsageKey string
}

func (r EmbedRequest) validate() error {
	switch {
	case r.Model == "":
		return errors.New("model is required")
	case r.Credential == "":
		return errors.New("credential (a credential scope name) is required")
	case len(r.Input) == 0:
		return errors.New("input is empty")
	case len(r.Input) > MaxEmbeddingInputs:
		return fmt.Errorf("%d inputs; at most %d per request", len(r.Input), MaxEmbeddingInputs)
	case r.Dimensions < 0 || r.Dimensions > 1<<31-1:
		return fmt.Errorf("dimensions %d out of range", r.Dimensions)
	case r.InputTokens < 0:
		return errors.New("input tokens must not be negative")
	}
	for i, s := range r.Input {
		if s == "" {
			return fmt.Errorf("input %d is empty", i)
		}
	}
	return nil
}

// OpenAIEmbedRequest is the input of OpenAI.Embeddings.
type OpenAIEmbedRequest EmbedRequest

// TollgateCall implements interceptor.ModelCall: one request and the
// input's tokens (OpenAI's tokenizer), nothing for output.
func (r OpenAIEmbedRequest) TollgateCall() interceptor.Call {
	in := r.InputTokens
	if in <= 0 {
		in = EstimateOpenAIEmbeddingTokens(r.Model, r.Input)
	}
	return interceptor.Call{
		Provider: capacity.OpenAI, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in},
	}
}

// GeminiEmbedRequest is the input of Gemini.EmbedContent.
type GeminiEmbedRequest EmbedRequest

// TollgateCall implements interceptor.ModelCall: one request and the
// input's tokens (estimated unless InputTokens is set), nothing for output.
func (r GeminiEmbedRequest) TollgateCall() interceptor.Call {
	in, estimated := r.InputTokens, false
	if in <= 0 {
		in, estimated = EstimateGeminiEmbeddingTokens(r.Input), true
	}
	return interceptor.Call{
		Provider: capacity.Gemini, Model: r.Model, Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, InputEstimated: estimated},
	}
}

// EmbedResult is what an embeddings activity returns: one vector per input,
// in order, the usage the provider reported (input only; Gemini reports
// none, and the reservation stands) and the response's rate-limit headers.
type EmbedResult struct {
	Model   string
	Vectors [][]float32
	Usage   capacity.Usage
	// HasUsage is false where the provider reports none (Gemini).
	HasUsage bool
	Header   http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r EmbedResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: r.HasUsage, Header: r.Header}
}

// Embeddings embeds a batch of texts with POST /v1/embeddings, SDK retries off,
// and returns the vectors, the usage (prompt_tokens, all input) and the
// rate-limit headers. Errors are handled as Chat's.
func (a *OpenAI) Embeddings(ctx context.Context, req OpenAIEmbedRequest) (EmbedResult, error) {
	key, err := a.opts.prepare(ctx, "openai embed", EmbedRequest(req).validate(), req.Credential)
	if err != nil {
		return EmbedResult{}, err
	}
	client := openai.NewClient(a.opts.OpenAIRequestOptions(key)...)
	params := openai.EmbeddingNewParams{
		Model:          req.Model,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: req.Input},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if req.Dimensions > 0 {
		params.Dimensions = openai.Int(req.Dimensions)
	}
	var resp *http.Response
	out, err := client.Embeddings.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		return EmbedResult{}, providerError(ctx, capacity.OpenAI, err)
	}
	if out == nil || len(out.Data) != len(req.Input) {
		return EmbedResult{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai embed", "one embedding per input"))
	}
	res := EmbedResult{Model: out.Model, Vectors: make([][]float32, len(req.Input)), HasUsage: true,
		Usage: capacity.Usage{InputTokens: out.Usage.PromptTokens}}
	for _, e := range out.Data {
		if e.Index < 0 || int(e.Index) >= len(res.Vectors) || res.Vectors[e.Index] != nil {
			return EmbedResult{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai embed", "one embedding per input index"))
		}
		res.Vectors[e.Index] = float32s(e.Embedding)
	}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}

// EmbedContent embeds a batch of texts with batchEmbedContents, SDK retries off,
// and returns the vectors. The Gemini API reports no usage for embeddings:
// the call settles at its reservation. Errors are handled as
// GenerateContent's.
func (a *Gemini) EmbedContent(ctx context.Context, req GeminiEmbedRequest) (EmbedResult, error) {
	key, err := a.opts.prepare(ctx, "gemini embed", EmbedRequest(req).validate(), req.Credential)
	if err != nil {
		return EmbedResult{}, err
	}
	client, err := a.opts.GeminiClient(ctx, key)
	if err != nil {
		return EmbedResult{}, notSent(ctx, misconfigured("gemini embed: "+err.Error()))
	}
	contents := make([]*genai.Content, len(req.Input))
	for i, s := range req.Input {
		contents[i] = genai.NewContentFromText(s, genai.RoleUser)
	}
	var config *genai.EmbedContentConfig
	if req.Dimensions > 0 {
		d := int32(req.Dimensions)
		config = &genai.EmbedContentConfig{OutputDimensionality: &d}
	}
	out, err := client.Models.EmbedContent(ctx, req.Model, contents, config)
	if err != nil {
		return EmbedResult{}, providerError(ctx, capacity.Gemini, err)
	}
	if out == nil || len(out.Embeddings) != len(req.Input) {
		return EmbedResult{}, providerError(ctx, capacity.Gemini, malformedAnswer("gemini embed", "one embedding per input"))
	}
	res := EmbedResult{Model: req.Model, Vectors: make([][]float32, len(req.Input))}
	for i, e := range out.Embeddings {
		if e == nil {
			return EmbedResult{}, providerError(ctx, capacity.Gemini, malformedAnswer("gemini embed", "one embedding per input"))
		}
		res.Vectors[i] = e.Values
	}
	if out.SDKHTTPResponse != nil {
		res.Header = RateLimitHeaders(out.SDKHTTPResponse.Headers)
	}
	return res, nil
}
