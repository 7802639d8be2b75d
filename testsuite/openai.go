package testsuite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// openaiDialect is the OpenAI chat completions wire format.
type openaiDialect struct {
	org string
}

type openaiRequest struct {
	Model               string            `json:"model"`
	Messages            []openaiMessage   `json:"messages"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// openaiTool is a function tool's name and parameter schema.
type openaiTool struct {
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// shape is the answer the request asks for: a call of the tool
// tool_choice names, else of the first tool, unless the last message is a
// tool's result or tool_choice is "none"; else structured output.
func (req *openaiRequest) shape() answerShape {
	var choice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	var mode string
	_ = json.Unmarshal(req.ToolChoice, &mode)
	_ = json.Unmarshal(req.ToolChoice, &choice)
	last := req.Messages[len(req.Messages)-1].Role
	if len(req.Tools) > 0 && last != "tool" && mode != "none" {
		for _, raw := range req.Tools {
			var t openaiTool
			if json.Unmarshal(raw, &t) == nil && t.Function.Name != "" &&
				(choice.Function.Name == "" || choice.Function.Name == t.Function.Name) {
				return answerShape{tool: t.Function.Name, args: exampleJSON(t.Function.Parameters)}
			}
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_schema":
			return answerShape{json: exampleJSON(rf.JSONSchema.Schema)}
		case "json_object":
			return answerShape{json: `{"text":"tok"}`}
		}
	}
	return answerShape{}
}

type openaiMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

type openaiPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

func (openaiDialect) provider() Provider { return OpenAI }

// apiKey reads "Authorization: Bearer KEY".
func (openaiDialect) apiKey(r *http.Request) string {
	return bearer(r.Header.Get("Authorization"))
}

func bearer(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

const openaiBadJSON = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"

func openaiInvalid(msg, param, code string) *failure {
	return &failure{status: http.StatusBadRequest, cause: CauseBadRequest,
		errType: "invalid_request_error", param: param, code: code, message: msg}
}

// parse decodes a chat completion request and counts its prompt tokens.
func (openaiDialect) parse(body []byte) (parsed, *failure) {
	var req openaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, openaiInvalid(openaiBadJSON, "", "")
	}
	out := parsed{model: req.Model, stream: req.Stream}
	if req.Model == "" {
		return out, openaiInvalid("you must provide a model parameter", "", "")
	}
	if len(req.Messages) == 0 {
		return out, openaiInvalid("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	}
	for _, t := range req.Tools {
		out.input += CountTokens(string(t))
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		n, ok := openaiContentTokens(m.Content)
		if !ok {
			return out, openaiInvalid(fmt.Sprintf("Invalid type for 'messages[%d].content'.", i),
				fmt.Sprintf("messages[%d].content", i), "invalid_type")
		}
		out.input += MessageOverhead + n + CountTokens(string(m.ToolCalls))
	}
	switch {
	case req.MaxCompletionTokens != nil:
		out.maxTokens, out.hasMax = *req.MaxCompletionTokens, true
	case req.MaxTokens != nil:
		out.maxTokens, out.hasMax = *req.MaxTokens, true
	}
	if out.hasMax && out.maxTokens < 1 {
		return out, openaiInvalid(fmt.Sprintf("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", out.maxTokens),
			"max_tokens", "integer_below_min_value")
	}
	if req.StreamOptions != nil && !req.Stream {
		return out, openaiInvalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value")
	}
	out.streamUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	out.shape = req.shape()
	return out, nil
}

// openaiContentTokens counts a message content: a string, null, or an array
// of parts (text parts count their text, images by OpenAI's formula, others
// their raw JSON).
func openaiContentTokens(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, true
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		return CountTokens(s), true
	case '[':
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			return 0, false
		}
		var n int64
		for _, pr := range parts {
			var part openaiPart
			if json.Unmarshal(pr, &part) != nil {
				return 0, false
			}
			switch part.Type {
			case "text":
				n += CountTokens(part.Text)
			case "image_url":
				w, h, _ := dataURLSize(part.ImageURL.URL)
				n += openaiImageTokens(w, h, part.ImageURL.Detail)
			default:
				n += CountTokens(string(pr))
			}
		}
		return n, true
	}
	return 0, false
}

// prepare checks max_tokens and the context window, and fills in the
// default max_tokens: the model's MaxOutputTokens, capped by the context left.
func (openaiDialect) prepare(m *Model, req *parsed) (demand, *failure) {
	d := demand{provider: OpenAI, input: req.input, maxTokens: req.maxTokens}
	if req.hasMax && req.maxTokens > m.MaxOutputTokens {
		return d, openaiInvalid(fmt.Sprintf("max_tokens is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.",
			req.maxTokens, m.MaxOutputTokens, req.maxTokens), "max_tokens", "invalid_value")
	}
	if req.input > m.ContextWindow {
		f := openaiInvalid(fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
			m.ContextWindow, req.input), "messages", "context_length_exceeded")
		f.cause = CauseContextLength
		return d, f
	}
	if !req.hasMax {
		d.maxTokens = max(1, min(m.MaxOutputTokens, m.ContextWindow-req.input))
	} else if req.input+req.maxTokens > m.ContextWindow {
		f := openaiInvalid(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			m.ContextWindow, req.input+req.maxTokens, req.input, req.maxTokens), "messages", "context_length_exceeded")
		f.cause = CauseContextLength
		return d, f
	}
	return d, nil
}

func (openaiDialect) unauthorized() failure {
	return failure{status: http.StatusUnauthorized, cause: CauseUnauthorized, errType: "invalid_request_error",
		code: "invalid_api_key", message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."}
}

func (openaiDialect) unknownModel(name string) failure {
	return failure{status: http.StatusNotFound, cause: CauseUnknownModel, errType: "invalid_request_error",
		code: "model_not_found", message: "The model `" + name + "` does not exist or you do not have access to it."}
}

func (openaiDialect) bodyTooLarge() failure {
	return failure{status: http.StatusRequestEntityTooLarge, cause: CauseBadRequest, errType: "invalid_request_error",
		message: "Request body too large."}
}

func (openaiDialect) badRequestStatus(status int, msg string) failure {
	return failure{status: status, cause: CauseBadRequest, errType: "invalid_request_error", message: msg}
}

// refused renders an admission refusal as OpenAI's 429.
func (o openaiDialect) refused(dec *decision, model string) failure {
	f := failure{status: http.StatusTooManyRequests, cause: dec.cause, code: "rate_limit_exceeded"}
	what := "requests per min (RPM)"
	f.errType = "requests"
	if dec.dim == Tokens {
		what, f.errType = "tokens per min (TPM)", "tokens"
	}
	switch dec.cause {
	case CauseTooLarge:
		f.message = fmt.Sprintf("Request too large for %s in organization %s on %s: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, o.org, what, dec.limit, dec.requested)
	case CauseDailyQuota:
		f.errType, f.code = "insufficient_quota", "insufficient_quota"
		f.message = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	case CauseConcurrency:
		f.retryAfter = time.Second
		f.message = fmt.Sprintf("Too many concurrent requests for %s in organization %s: Limit %d. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, o.org, dec.limit)
	default:
		f.retryAfter = max(dec.wait, 1)
		f.message = fmt.Sprintf("Rate limit reached for %s in organization %s on %s: Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, o.org, what, dec.limit, dec.used, dec.requested, openaiDuration(dec.wait))
	}
	return f
}

// injected renders an injected fault.
func (o openaiDialect) injected(c Cause, model string) failure {
	switch c {
	case CauseOverloaded:
		return failure{status: http.StatusServiceUnavailable, cause: c, errType: "server_error",
			message: "The server is overloaded or not ready yet."}
	case CauseServerError:
		return failure{status: http.StatusInternalServerError, cause: c, errType: "server_error",
			message: "The server had an error while processing your request. Sorry about that!"}
	}
	return failure{status: http.StatusTooManyRequests, cause: c, errType: "requests", code: "rate_limit_exceeded",
		message: fmt.Sprintf("Rate limit reached for %s in organization %s on requests per min (RPM). Please try again later. Visit https://platform.openai.com/account/rate-limits to learn more.", model, o.org)}
}

// rateHeaders sets x-ratelimit-{limit,remaining,reset}-{requests,tokens} for
// the limited dimensions. reset is the time until the bucket is full.
func (openaiDialect) rateHeaders(h http.Header, sn *snapshot) {
	if r := sn.dims[Requests]; r.limit > 0 {
		h["X-Ratelimit-Limit-Requests"] = []string{strconv.FormatInt(r.limit, 10)}
		h["X-Ratelimit-Remaining-Requests"] = []string{strconv.FormatInt(r.remaining, 10)}
		h["X-Ratelimit-Reset-Requests"] = []string{openaiDuration(r.reset)}
	}
	if t := sn.dims[Tokens]; t.limit > 0 {
		h["X-Ratelimit-Limit-Tokens"] = []string{strconv.FormatInt(t.limit, 10)}
		h["X-Ratelimit-Remaining-Tokens"] = []string{strconv.FormatInt(t.remaining, 10)}
		h["X-Ratelimit-Reset-Tokens"] = []string{openaiDuration(t.reset)}
	}
}

type openaiErrorBody struct {
	Error openaiError `json:"error"`
}

type openaiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func openaiRequestID(seq uint64) string { return "req_" + strconv.FormatUint(seq, 16) }

// writeFailure writes {"error":{"message","type","param","code"}}.
func (openaiDialect) writeFailure(w http.ResponseWriter, seq uint64, f *failure) {
	h := w.Header()
	h["X-Request-Id"] = []string{openaiRequestID(seq)}
	if f.retryAfter > 0 {
		h["Retry-After"] = []string{retryAfterSeconds(f.retryAfter)}
	}
	body := marshal(openaiErrorBody{Error: openaiError{
		Message: f.message, Type: f.errType, Param: nullable(f.param), Code: nullable(f.code)}})
	writeJSON(w, f.status, body)
}

type openaiCompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	Choices           []openaiChoice `json:"choices"`
	Usage             openaiUsage    `json:"usage"`
	ServiceTier       string         `json:"service_tier"`
	SystemFingerprint string         `json:"system_fingerprint"`
}

type openaiChoice struct {
	Index        int                 `json:"index"`
	Message      openaiAnswerMessage `json:"message"`
	Logprobs     *struct{}           `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
}

type openaiAnswerMessage struct {
	Role        string           `json:"role"`
	Content     *string          `json:"content"`
	Refusal     *string          `json:"refusal"`
	Annotations []struct{}       `json:"annotations"`
	ToolCalls   []openaiToolCall `json:"tool_calls,omitempty"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		AudioTokens  int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int64 `json:"reasoning_tokens"`
		AudioTokens              int64 `json:"audio_tokens"`
		AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

// writeAnswer writes a chat.completion with usage.
func (openaiDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	finish := "stop"
	if a.usage.OutputTokens >= a.maxTok {
		finish = "length"
	}
	text := answer(a.usage.OutputTokens)
	msg := openaiAnswerMessage{Role: "assistant", Content: &text, Annotations: []struct{}{}}
	switch {
	case a.shape.tool != "":
		var call openaiToolCall
		call.ID, call.Type = "call_"+strconv.FormatUint(seq, 36), "function"
		call.Function.Name, call.Function.Arguments = a.shape.tool, a.shape.args
		msg.Content, msg.ToolCalls, finish = nil, []openaiToolCall{call}, "tool_calls"
	case a.shape.json != "":
		msg.Content = &a.shape.json
	}
	c := openaiCompletion{
		ID: "chatcmpl-" + strconv.FormatUint(seq, 36), Object: "chat.completion", Created: a.now.Unix(),
		Model: a.model, ServiceTier: "default", SystemFingerprint: "fp_tollgate",
		Choices: []openaiChoice{{Message: msg, FinishReason: finish}},
		Usage: openaiUsage{PromptTokens: a.usage.InputTokens, CompletionTokens: a.usage.OutputTokens,
			TotalTokens: a.usage.InputTokens + a.usage.OutputTokens},
	}
	w.Header()["X-Request-Id"] = []string{openaiRequestID(seq)}
	if a.stream {
		writeOpenAIStream(w, &c, a.streamUsage)
		return
	}
	body := marshal(c)
	writeJSON(w, http.StatusOK, body)
}

// writeOpenAIStream writes completion c as server-sent chat.completion.chunk
// events: the role, a delta per token of text (or the tool call at once),
// the finish reason, with includeUsage a last chunk with the usage and no
// choices, then [DONE].
func writeOpenAIStream(w http.ResponseWriter, c *openaiCompletion, includeUsage bool) {
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish *string, usage *openaiUsage) {
		choices := []any{}
		if delta != nil {
			choices = append(choices, map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil})
		}
		ev := map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model,
			"system_fingerprint": c.SystemFingerprint, "choices": choices, "usage": usage}
		_, _ = w.Write(append(append([]byte("data: "), marshal(ev)...), "\n\n"...))
	}
	msg := c.Choices[0].Message
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	switch {
	case len(msg.ToolCalls) > 0:
		call := msg.ToolCalls[0]
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": call.ID, "type": "function",
			"function": map[string]any{"name": call.Function.Name, "arguments": call.Function.Arguments}}}}, nil, nil)
	case msg.Content != nil:
		for _, piece := range strings.SplitAfter(*msg.Content, " ") {
			if piece != "" {
				chunk(map[string]any{"content": piece}, nil, nil)
			}
		}
	}
	finish := c.Choices[0].FinishReason
	chunk(map[string]any{}, &finish, nil)
	if includeUsage {
		chunk(nil, nil, &c.Usage)
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
}
