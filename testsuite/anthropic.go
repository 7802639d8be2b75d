package testsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// anthropicDialect is the Anthropic messages wire format.
type anthropicDialect struct{}

type anthropicRequest struct {
	Model      string             `json:"model"`
	MaxTokens  *int64             `json:"max_tokens"`
	System     json.RawMessage    `json:"system"`
	Messages   []anthropicMessage `json:"messages"`
	Tools      []json.RawMessage  `json:"tools"`
	ToolChoice json.RawMessage    `json:"tool_choice"`
	Stream     bool               `json:"stream"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control"`
	Source       struct {
		Type string `json:"type"`
		Data string `json:"data"`
	} `json:"source"`
}

func (anthropicDialect) provider() Provider { return Anthropic }

// apiKey reads x-api-key, or "Authorization: Bearer KEY" (the SDK's
// WithAuthToken).
func (anthropicDialect) apiKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return bearer(r.Header.Get("Authorization"))
}

func anthropicInvalid(msg string) *failure {
	return &failure{status: http.StatusBadRequest, cause: CauseBadRequest, errType: "invalid_request_error", message: msg}
}

// promptWalk counts prompt tokens in cache order (tools, system, messages)
// and notes a breakpoint at each block marked with cache_control.
type promptWalk struct {
	hash   uint64
	tokens int64
	bps    []breakpoint
}

func (w *promptWalk) add(n int64, raw string, cached bool) {
	w.tokens += n
	w.hash = fnvString(w.hash, raw)
	if cached {
		w.bps = append(w.bps, breakpoint{hash: w.hash, tokens: w.tokens})
	}
}

// content walks a system prompt or message content: a string, or an array
// of blocks (text blocks count their text, images by Anthropic's formula,
// others their raw JSON).
func (w *promptWalk) content(role string, raw json.RawMessage) bool {
	w.add(MessageOverhead, role, false)
	if len(raw) == 0 || raw[0] != '[' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		w.add(CountTokens(s), s, false)
		return true
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return false
	}
	for _, br := range blocks {
		var b anthropicBlock
		if json.Unmarshal(br, &b) != nil {
			return false
		}
		cached := len(b.CacheControl) > 0 && string(b.CacheControl) != "null"
		switch {
		case b.Type == "text":
			w.add(CountTokens(b.Text), b.Text, cached)
		case b.Type == "image":
			iw, ih, _ := imageSize(b.Source.Data)
			w.add(anthropicImageTokens(iw, ih), string(br), cached)
		default:
			w.add(CountTokens(string(br)), string(br), cached)
		}
	}
	return true
}

// parse decodes a messages request, counts its prompt tokens and notes its
// prompt-cache breakpoints.
func (anthropicDialect) parse(body []byte) (parsed, *failure) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, anthropicInvalid("There was an error parsing the body of your request: it is not valid JSON.")
	}
	out := parsed{model: req.Model, stream: req.Stream}
	switch {
	case req.Model == "":
		return out, anthropicInvalid("model: Field required")
	case req.MaxTokens == nil:
		return out, anthropicInvalid("max_tokens: Field required")
	case *req.MaxTokens < 1:
		return out, anthropicInvalid("max_tokens: Input should be greater than or equal to 1")
	case len(req.Messages) == 0:
		return out, anthropicInvalid("messages: at least one message is required")
	}
	out.maxTokens, out.hasMax = *req.MaxTokens, true
	w := promptWalk{hash: fnvOffset}
	for _, t := range req.Tools {
		w.add(CountTokens(string(t)), string(t), bytes.Contains(t, []byte(`"cache_control"`)) && toolCached(t))
	}
	if len(req.System) > 0 && string(req.System) != "null" {
		if !w.content("system", req.System) {
			return out, anthropicInvalid("system: Input should be a valid string or a list of text blocks")
		}
	}
	for i, m := range req.Messages {
		if !w.content(m.Role, m.Content) {
			return out, anthropicInvalid(fmt.Sprintf("messages.%d.content: Input should be a valid string or a list of content blocks", i))
		}
	}
	out.input, out.breakpoints = w.tokens, w.bps
	out.shape = anthropicShape(&req)
	return out, nil
}

// anthropicShape is a call of the tool tool_choice names, else of the
// first tool, unless the last message carries a tool's result or
// tool_choice is "none".
func anthropicShape(req *anthropicRequest) answerShape {
	if len(req.Tools) == 0 || bytes.Contains(req.Messages[len(req.Messages)-1].Content, []byte(`"tool_result"`)) {
		return answerShape{}
	}
	var choice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(req.ToolChoice, &choice)
	if choice.Type == "none" {
		return answerShape{}
	}
	for _, raw := range req.Tools {
		var t struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" && (choice.Name == "" || choice.Name == t.Name) && len(t.InputSchema) > 0 {
			return answerShape{tool: t.Name, args: exampleJSON(t.InputSchema)}
		}
	}
	return answerShape{}
}

func toolCached(raw json.RawMessage) bool {
	var t struct {
		CacheControl json.RawMessage `json:"cache_control"`
	}
	return json.Unmarshal(raw, &t) == nil && len(t.CacheControl) > 0 && string(t.CacheControl) != "null"
}

// prepare checks max_tokens and the context window.
func (anthropicDialect) prepare(m *Model, req *parsed) (demand, *failure) {
	d := demand{provider: Anthropic, input: req.input, maxTokens: req.maxTokens, breakpoints: req.breakpoints}
	if req.maxTokens > m.MaxOutputTokens {
		return d, anthropicInvalid(fmt.Sprintf("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s",
			req.maxTokens, m.MaxOutputTokens, m.Name))
	}
	if req.input > m.ContextWindow {
		f := anthropicInvalid(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", req.input, m.ContextWindow))
		f.cause = CauseContextLength
		return d, f
	}
	if req.input+req.maxTokens > m.ContextWindow {
		f := anthropicInvalid(fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again",
			req.input, req.maxTokens, m.ContextWindow))
		f.cause = CauseContextLength
		return d, f
	}
	return d, nil
}

func (anthropicDialect) unauthorized() failure {
	return failure{status: http.StatusUnauthorized, cause: CauseUnauthorized, errType: "authentication_error", message: "invalid x-api-key"}
}

func (anthropicDialect) unknownModel(name string) failure {
	return failure{status: http.StatusNotFound, cause: CauseUnknownModel, errType: "not_found_error", message: "model: " + name}
}

func (anthropicDialect) bodyTooLarge() failure {
	return failure{status: http.StatusRequestEntityTooLarge, cause: CauseBadRequest, errType: "request_too_large",
		message: "Request exceeds the maximum allowed number of bytes."}
}

func (anthropicDialect) badRequestStatus(status int, msg string) failure {
	return failure{status: status, cause: CauseBadRequest, errType: "invalid_request_error", message: msg}
}

const anthropicLimitsDoc = " For details, refer to: https://docs.claude.com/en/api/rate-limits."

// refused renders an admission refusal in Anthropic's shape.
func (anthropicDialect) refused(dec *decision, model string) failure {
	f := failure{status: http.StatusTooManyRequests, cause: dec.cause, errType: "rate_limit_error"}
	switch dec.cause {
	case CauseDailyQuota:
		f.status, f.errType = http.StatusBadRequest, "invalid_request_error"
		f.message = "You have reached your specified API usage limits. You will regain access on " +
			dec.resetAt.UTC().Format("2006-01-02") + " at 00:00 UTC."
	case CauseConcurrency:
		f.retryAfter = time.Second
		f.message = "Number of concurrent connections has exceeded your rate limit. Please try again later or contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."
	default:
		what := "requests"
		switch dec.dim {
		case InputTokens:
			what = "input tokens"
		case OutputTokens:
			what = "output tokens"
		}
		if dec.cause != CauseTooLarge {
			f.retryAfter = max(dec.wait, 1)
		}
		f.message = "This request would exceed the rate limit for your organization of " + commas(dec.limit) + " " + what + " per minute." + anthropicLimitsDoc
	}
	return f
}

// injected renders an injected fault.
func (anthropicDialect) injected(c Cause, model string) failure {
	switch c {
	case CauseOverloaded:
		return failure{status: 529, cause: c, errType: "overloaded_error", message: "Overloaded"}
	case CauseServerError:
		return failure{status: http.StatusInternalServerError, cause: c, errType: "api_error", message: "Internal server error"}
	}
	return failure{status: http.StatusTooManyRequests, cause: c, errType: "rate_limit_error",
		message: "Your account's rate limit has been exceeded. Please try again later." + anthropicLimitsDoc}
}

// rateHeaders sets anthropic-ratelimit-{requests,input-tokens,output-tokens,
// tokens}-{limit,remaining,reset}. reset is the RFC 3339 time the bucket is
// full again; tokens-* is the combined view of input + output.
func (anthropicDialect) rateHeaders(h http.Header, sn *snapshot) {
	set := func(name string, s dimState) {
		h["Anthropic-Ratelimit-"+name+"-Limit"] = []string{strconv.FormatInt(s.limit, 10)}
		h["Anthropic-Ratelimit-"+name+"-Remaining"] = []string{strconv.FormatInt(s.remaining, 10)}
		h["Anthropic-Ratelimit-"+name+"-Reset"] = []string{anthropicTime(sn.now, s.reset)}
	}
	if r := sn.dims[Requests]; r.limit > 0 {
		set("Requests", r)
	}
	in, out := sn.dims[InputTokens], sn.dims[OutputTokens]
	if in.limit > 0 {
		set("Input-Tokens", in)
	}
	if out.limit > 0 {
		set("Output-Tokens", out)
	}
	if in.limit > 0 || out.limit > 0 {
		set("Tokens", dimState{limit: in.limit + out.limit, remaining: in.remaining + out.remaining, reset: max(in.reset, out.reset)})
	}
}

func anthropicRequestID(seq uint64) string { return "req_011Cfake" + strconv.FormatUint(seq, 36) }

type anthropicErrorBody struct {
	Type      string         `json:"type"`
	Error     anthropicError `json:"error"`
	RequestID string         `json:"request_id"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// writeFailure writes {"type":"error","error":{"type","message"},"request_id"}.
func (anthropicDialect) writeFailure(w http.ResponseWriter, seq uint64, f *failure) {
	id := anthropicRequestID(seq)
	h := w.Header()
	h["Request-Id"] = []string{id}
	if f.retryAfter > 0 {
		h["Retry-After"] = []string{retryAfterSeconds(f.retryAfter)}
	}
	body := marshal(anthropicErrorBody{Type: "error", RequestID: id,
		Error: anthropicError{Type: f.errType, Message: f.message}})
	writeJSON(w, f.status, body)
}

type anthropicAnswer struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"` // text blocks, then a tool_use block
	StopReason   string         `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	ServiceTier              string `json:"service_tier"`
}

// writeAnswer writes a message with usage. Its input_tokens excludes cache
// reads and writes, as Anthropic's does.
func (anthropicDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	stop := "end_turn"
	if a.usage.OutputTokens >= a.maxTok {
		stop = "max_tokens"
	}
	u := a.usage
	msg := anthropicAnswer{
		ID: "msg_fake" + strconv.FormatUint(seq, 36), Type: "message", Role: "assistant", Model: a.model,
		Content:    []any{anthropicTextBlock{Type: "text", Text: answer(u.OutputTokens)}},
		StopReason: stop,
		Usage: anthropicUsage{InputTokens: u.InputTokens - u.CacheReadTokens - u.CacheCreationTokens,
			CacheCreationInputTokens: u.CacheCreationTokens, CacheReadInputTokens: u.CacheReadTokens,
			OutputTokens: u.OutputTokens, ServiceTier: "standard"},
	}
	if a.shape.tool != "" {
		msg.Content = append(msg.Content, anthropicToolUse{Type: "tool_use", ID: "toolu_fake" + strconv.FormatUint(seq, 36),
			Name: a.shape.tool, Input: json.RawMessage(a.shape.args)})
		msg.StopReason = "tool_use"
	}
	w.Header()["Request-Id"] = []string{anthropicRequestID(seq)}
	if a.stream {
		writeAnthropicStream(w, &msg)
		return
	}
	body := marshal(msg)
	writeJSON(w, http.StatusOK, body)
}

// writeAnthropicStream writes message msg as Anthropic's server-sent
// events: message_start (the input usage), each content block (text a
// delta per token, a tool use with its input at once), message_delta (the
// stop reason and the output usage) and message_stop.
func writeAnthropicStream(w http.ResponseWriter, msg *anthropicAnswer) {
	w.Header()["Content-Type"] = []string{"text/event-stream"}
	w.WriteHeader(http.StatusOK)
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		_, _ = w.Write([]byte("event: " + typ + "\ndata: " + string(marshal(data)) + "\n\n"))
	}
	start := *msg
	start.Content, start.StopReason = []any{}, ""
	start.Usage.OutputTokens = 1
	event("message_start", map[string]any{"message": start})
	for i, block := range msg.Content {
		switch b := block.(type) {
		case anthropicTextBlock:
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range strings.SplitAfter(b.Text, " ") {
				if piece != "" {
					event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
				}
			}
		case anthropicToolUse:
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": msg.StopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": msg.Usage.OutputTokens}})
	event("message_stop", map[string]any{})
}
