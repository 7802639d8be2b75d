package activities

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// OpenAIResponseRequest is the input of OpenAI.Response: the SDK's own
// Responses API request (input items, instructions, tools, structured
// output through Text, reasoning). Params.Model and Params.MaxOutputTokens
// are required: OpenAI charges max output tokens against TPM at admission.
// Streaming and background responses are not part of it.
type OpenAIResponseRequest struct {
	Params     responses.ResponseNewParams
	Credential string
	Region     string
	// ExpectedOutputTokens is the expected output, for the output-tokens
	// budget; if zero, the max output tokens.
	ExpectedOutputTokens int64
	// InputTokens, when set, is the exact input; else EstimateOpenAIResponse.
	InputTokens int64
	Class       capacity.Class
	// UsageKey names the kind of call (interceptor.Call.UsageKey).
	UsageKey string
}

// TollgateCall implements interceptor.ModelCall.
func (r OpenAIResponseRequest) TollgateCall() interceptor.Call {
	in := r.InputTokens
	if in <= 0 {
		in = EstimateOpenAIResponse(r.Params)
	}
	return interceptor.Call{
		Provider: capacity.OpenAI, Model: string(r.Params.Model), Credential: r.Credential, Region: r.Region, Class: r.Class, UsageKey: r.UsageKey,
		Demand: capacity.Demand{InputTokens: in, OutputTokens: r.ExpectedOutputTokens, MaxTokens: r.Params.MaxOutputTokens.Value},
	}
}

func (r OpenAIResponseRequest) validate() error {
	inputs := 0
	if r.Params.Input.OfString.Valid() || len(r.Params.Input.OfInputItemList) > 0 {
		inputs = 1
	}
	return validateCall(string(r.Params.Model), r.Credential, inputs, r.Params.MaxOutputTokens.Value)
}

// OpenAIResponseResult is what OpenAI.Response returns: the response as the
// SDK returned it (output items: messages, function calls, reasoning), its
// usage and the rate-limit headers.
type OpenAIResponseResult struct {
	Response responses.Response
	Usage    capacity.Usage
	Header   http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r OpenAIResponseResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: true, Header: r.Header}
}

// Response sends a Responses API request as it is, with SDK retries off;
// errors are handled as Chat's.
func (a *OpenAI) Response(ctx context.Context, req OpenAIResponseRequest) (OpenAIResponseResult, error) {
	key, err := a.opts.prepare(ctx, "openai response", req.validate(), req.Credential)
	if err != nil {
		return OpenAIResponseResult{}, err
	}
	client := openai.NewClient(a.opts.OpenAIRequestOptions(key)...)
	var resp *http.Response
	out, err := client.Responses.New(ctx, req.Params, option.WithResponseInto(&resp))
	if err != nil {
		return OpenAIResponseResult{}, providerError(ctx, capacity.OpenAI, err)
	}
	if out == nil || out.ID == "" {
		return OpenAIResponseResult{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai response", "a response"))
	}
	res := OpenAIResponseResult{Response: *out, Usage: OpenAIResponsesUsage(out.Usage)}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

// OpenAIResponsesUsage maps the Responses API's usage to the gate's:
// uncached input, cache reads, and the output (reasoning included).
func OpenAIResponsesUsage(u responses.ResponseUsage) capacity.Usage {
	return capacity.Usage{
		InputTokens:          u.InputTokens - u.InputTokensDetails.CachedTokens,
		CacheReadInputTokens: u.InputTokensDetails.CachedTokens,
		OutputTokens:         u.OutputTokens,
	}
}

// EstimateOpenAIResponse estimates the input tokens of a Responses API
// request with OpenAI's tokenizer: the instructions, each input item
// (message text, images by their formula, other items as their JSON), the
// tools and the text format's schema.
func EstimateOpenAIResponse(p responses.ResponseNewParams) int64 {
	body, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	var req struct {
		Instructions *string         `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        json.RawMessage `json:"tools"`
		Text         json.RawMessage `json:"text"`
	}
	if json.Unmarshal(body, &req) != nil {
		return estimateBytes(string(body))
	}
	count := openAICounter(string(p.Model))
	n := int64(perRequestTokens) + rawTokens(count, req.Tools) + rawTokens(count, req.Text)
	if req.Instructions != nil {
		n += perMessageTokens + count(*req.Instructions)
	}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		return n + perMessageTokens + count(text)
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(req.Input, &items) != nil {
		return n + rawTokens(count, req.Input)
	}
	for _, it := range items {
		var typ string
		_ = json.Unmarshal(it["type"], &typ)
		if typ != "" && typ != "message" {
			b, _ := json.Marshal(it)
			n += count(string(b))
			continue
		}
		n += perMessageTokens + contentTokens(it["content"], count, func(part map[string]json.RawMessage) (int64, bool) {
			var t, url, detail string
			_ = json.Unmarshal(part["type"], &t)
			if t == "input_text" || t == "output_text" {
				var s string
				_ = json.Unmarshal(part["text"], &s)
				return count(s), true
			}
			if t != "input_image" {
				return 0, false
			}
			_ = json.Unmarshal(part["image_url"], &url)
			_ = json.Unmarshal(part["detail"], &detail)
			w, h, _ := dataURLImageSize(url)
			return OpenAIImageTokens(string(p.Model), w, h, detail), true
		})
	}
	return n
}
