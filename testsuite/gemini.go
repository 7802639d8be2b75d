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

// geminiDialect is the Gemini API generateContent wire format. The model is
// named in the path, not the body.
type geminiDialect struct {
	model string
}

const geminiMethod = ":generateContent"

// geminiPath reports whether path is /v1beta/models/{model}:generateContent
// (or /v1/...).
func geminiPath(path string) bool {
	return (strings.HasPrefix(path, "/v1beta/models/") || strings.HasPrefix(path, "/v1/models/")) &&
		strings.HasSuffix(path, geminiMethod)
}

// geminiModel returns the {model} of a generateContent path.
func geminiModel(path string) string {
	path = strings.TrimSuffix(path, geminiMethod)
	return path[strings.Index(path, "/models/")+len("/models/"):]
}

type geminiRequest struct {
	Contents          []geminiContent   `json:"contents"`
	SystemInstruction *geminiContent    `json:"systemInstruction"`
	Tools             []json.RawMessage `json:"tools"`
	GenerationConfig  *struct {
		MaxOutputTokens *int64 `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			ThinkingBudget *int64 `json:"thinkingBudget"`
		} `json:"thinkingConfig"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// shape is a call of the first function declared, unless the last content
// carries a function's response; else structured output from the response
// schema.
func (req *geminiRequest) shape() answerShape {
	last := req.Contents[len(req.Contents)-1]
	answered := false
	for _, p := range last.Parts {
		answered = answered || bytes.Contains(p, []byte(`"functionResponse"`))
	}
	if !answered {
		for _, raw := range req.Tools {
			var t struct {
				FunctionDeclarations []struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"functionDeclarations"`
			}
			if json.Unmarshal(raw, &t) == nil && len(t.FunctionDeclarations) > 0 && t.FunctionDeclarations[0].Name != "" {
				f := t.FunctionDeclarations[0]
				return answerShape{tool: f.Name, args: exampleJSON(f.Parameters)}
			}
		}
	}
	if gc := req.GenerationConfig; gc != nil {
		for _, schema := range []json.RawMessage{gc.ResponseSchema, gc.ResponseJSONSchema} {
			if len(schema) > 0 && string(schema) != "null" {
				return answerShape{json: exampleJSON(schema)}
			}
		}
	}
	return answerShape{}
}

type geminiContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

func (geminiDialect) provider() Provider { return Gemini }

// apiKey reads x-goog-api-key, else the key query parameter.
func (geminiDialect) apiKey(r *http.Request) string {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// googleStatus names the google.rpc code Gemini sends with an HTTP status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusInternalServerError:
		return "INTERNAL"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return "UNKNOWN"
}

func geminiInvalid(msg string) *failure {
	return &failure{status: http.StatusBadRequest, cause: CauseBadRequest, errType: "INVALID_ARGUMENT", message: msg}
}

// content counts one Content: MessageOverhead, then each part's text, an
// inline image by Gemini's formula, or its raw JSON for any other part.
func geminiContentTokens(c *geminiContent) (int64, bool) {
	n := int64(MessageOverhead)
	for _, raw := range c.Parts {
		var p struct {
			Text       *string `json:"text"`
			InlineData *struct {
				MIMEType string `json:"mimeType"`
				Data     string `json:"data"`
			} `json:"inlineData"`
		}
		if json.Unmarshal(raw, &p) != nil {
			return 0, false
		}
		switch {
		case p.Text != nil:
			n += CountTokens(*p.Text)
		case p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, "image/"):
			w, h, _ := imageSize(p.InlineData.Data)
			n += geminiImageTokens(w, h)
		default:
			n += CountTokens(string(raw))
		}
	}
	return n, true
}

// parse decodes a generateContent request and counts its prompt tokens
// (a system instruction counts as its own message).
func (g geminiDialect) parse(body []byte) (parsed, *failure) {
	out := parsed{model: g.model}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return out, geminiInvalid("Invalid JSON payload received. Unexpected token.")
	}
	if len(req.Contents) == 0 {
		return out, geminiInvalid("* GenerateContentRequest.contents: contents is not specified\n")
	}
	if gc := req.GenerationConfig; gc != nil {
		if gc.MaxOutputTokens != nil {
			if *gc.MaxOutputTokens < 1 {
				return out, geminiInvalid("* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must be positive.\n")
			}
			out.maxTokens, out.hasMax = *gc.MaxOutputTokens, true
		}
		if tc := gc.ThinkingConfig; tc != nil && tc.ThinkingBudget != nil {
			out.thinking = max(*tc.ThinkingBudget, 0)
		}
	}
	for _, t := range req.Tools {
		out.input += CountTokens(string(t))
	}
	if req.SystemInstruction != nil {
		n, ok := geminiContentTokens(req.SystemInstruction)
		if !ok {
			return out, geminiInvalid("Invalid JSON payload received. Unknown name \"parts\" at 'system_instruction'.")
		}
		out.input += n
	}
	for i := range req.Contents {
		n, ok := geminiContentTokens(&req.Contents[i])
		if !ok {
			return out, geminiInvalid(fmt.Sprintf("Invalid JSON payload received. Unknown name \"parts\" at 'contents[%d]'.", i))
		}
		out.input += n
	}
	out.shape = req.shape()
	return out, nil
}

// prepare checks maxOutputTokens and the context window; an absent
// maxOutputTokens is the model's MaxOutputTokens.
func (geminiDialect) prepare(m *Model, req *parsed) (demand, *failure) {
	d := demand{provider: Gemini, input: req.input, maxTokens: req.maxTokens}
	if !req.hasMax {
		d.maxTokens = m.MaxOutputTokens
	}
	if d.maxTokens > m.MaxOutputTokens {
		return d, geminiInvalid(fmt.Sprintf("The specified maxOutputTokens (%d) exceeds the maximum number of output tokens allowed (%d).", d.maxTokens, m.MaxOutputTokens))
	}
	if req.input > m.ContextWindow {
		f := geminiInvalid(fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", req.input, m.ContextWindow))
		f.cause = CauseContextLength
		return d, f
	}
	return d, nil
}

// unauthorized is Gemini's answer to a bad key: 400 with ErrorInfo
// API_KEY_INVALID.
func (geminiDialect) unauthorized() failure {
	return failure{status: http.StatusBadRequest, cause: CauseUnauthorized, errType: "INVALID_ARGUMENT",
		message: "API key not valid. Please pass a valid API key.", reason: "API_KEY_INVALID"}
}

func (geminiDialect) unknownModel(name string) failure {
	return failure{status: http.StatusNotFound, cause: CauseUnknownModel, errType: "NOT_FOUND",
		message: "models/" + name + " is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."}
}

func (geminiDialect) bodyTooLarge() failure {
	return failure{status: http.StatusBadRequest, cause: CauseBadRequest, errType: "INVALID_ARGUMENT",
		message: "Request payload size exceeds the limit."}
}

func (geminiDialect) badRequestStatus(status int, msg string) failure {
	return failure{status: status, cause: CauseBadRequest, errType: googleStatus(status), message: msg}
}

// geminiQuotaMessage is the message of every Gemini quota 429: only the
// QuotaFailure's quotaId tells per-minute from per-day.
const geminiQuotaMessage = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."

// geminiQuota is the QuotaFailure violation of a refusal.
type geminiQuota struct {
	metric string
	id     string
	value  int64
}

// Gemini's quota metrics and ids (the free tier's, as captured in
// errors/testdata/provider-errors.json).
const (
	geminiRequestsMetric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
	geminiInputMetric    = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"
)

// geminiQuotaFor names the quota of dimension d.
func geminiQuotaFor(d Dimension, limit int64) *geminiQuota {
	switch d {
	case InputTokens:
		return &geminiQuota{geminiInputMetric, "GenerateContentInputTokensPerModelPerMinute-FreeTier", limit}
	case RequestsPerDay:
		return &geminiQuota{geminiRequestsMetric, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", limit}
	case TokensPerDay:
		return &geminiQuota{geminiInputMetric, "GenerateContentInputTokensPerModelPerDay-FreeTier", limit}
	}
	return &geminiQuota{geminiRequestsMetric, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", limit}
}

// refused renders an admission refusal as Gemini's 429 RESOURCE_EXHAUSTED
// with a QuotaFailure naming the quota and a RetryInfo: the bucket's wait for
// a per-minute quota, the time to midnight Pacific for a per-day one.
// Concurrency has no Gemini quota: it is a bare 429.
func (g geminiDialect) refused(dec *decision, _ string) failure {
	f := failure{status: http.StatusTooManyRequests, cause: dec.cause, errType: "RESOURCE_EXHAUSTED", message: geminiQuotaMessage}
	switch dec.cause {
	case CauseConcurrency:
		f.message = "Resource has been exhausted (e.g. check quota)."
		f.retryAfter = time.Second
	case CauseDailyQuota:
		f.quota = geminiQuotaFor(dec.dim, dec.limit)
		f.retryAfter = dec.resetAt.Sub(dec.snap.now)
	case CauseTooLarge:
		f.quota = geminiQuotaFor(dec.dim, dec.limit) // waiting never helps: no RetryInfo
	default:
		f.quota = geminiQuotaFor(dec.dim, dec.limit)
		f.retryAfter = max(dec.wait, 1)
	}
	return f
}

// injected renders an injected fault.
func (geminiDialect) injected(c Cause, _ string) failure {
	switch c {
	case CauseOverloaded:
		return failure{status: http.StatusServiceUnavailable, cause: c, errType: "UNAVAILABLE", message: "The model is overloaded. Please try again later."}
	case CauseServerError:
		return failure{status: http.StatusInternalServerError, cause: c, errType: "INTERNAL",
			message: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"}
	}
	return failure{status: http.StatusTooManyRequests, cause: c, errType: "RESOURCE_EXHAUSTED", message: "Resource has been exhausted (e.g. check quota)."}
}

// rateHeaders sets nothing: Gemini sends no rate-limit headers.
func (geminiDialect) rateHeaders(http.Header, *snapshot) {}

type geminiErrorBody struct {
	Error geminiError `json:"error"`
}

type geminiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

type geminiQuotaFailure struct {
	Type       string                 `json:"@type"`
	Violations []geminiQuotaViolation `json:"violations"`
}

type geminiQuotaViolation struct {
	QuotaMetric     string            `json:"quotaMetric"`
	QuotaID         string            `json:"quotaId"`
	QuotaDimensions map[string]string `json:"quotaDimensions"`
	QuotaValue      string            `json:"quotaValue"`
}

type geminiHelp struct {
	Type  string `json:"@type"`
	Links []struct {
		Description string `json:"description"`
		URL         string `json:"url"`
	} `json:"links"`
}

type geminiRetryInfo struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

type geminiErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata"`
}

// geminiRetryDelay renders a wait as RetryInfo.retryDelay does: a
// google.protobuf.Duration in JSON, whole seconds rounded up ("38s").
func geminiRetryDelay(d time.Duration) string {
	return strconv.FormatInt(int64(ceilDuration(max(d, time.Second), time.Second)/time.Second), 10) + "s"
}

// writeFailure writes {"error":{"code","message","status","details"}}: a
// 429 has QuotaFailure, Help and RetryInfo, in that order, as Gemini sends
// them; a bad key has ErrorInfo.
func (g geminiDialect) writeFailure(w http.ResponseWriter, _ uint64, f *failure) {
	e := geminiError{Code: f.status, Message: f.message, Status: f.errType}
	if f.reason != "" {
		e.Details = append(e.Details, geminiErrorInfo{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: f.reason,
			Domain: "googleapis.com", Metadata: map[string]string{"service": "generativelanguage.googleapis.com"}})
	}
	if q := f.quota; q != nil {
		e.Details = append(e.Details, geminiQuotaFailure{Type: "type.googleapis.com/google.rpc.QuotaFailure",
			Violations: []geminiQuotaViolation{{QuotaMetric: q.metric, QuotaID: q.id,
				QuotaDimensions: map[string]string{"location": "global", "model": g.model},
				QuotaValue:      strconv.FormatInt(q.value, 10)}}})
		help := geminiHelp{Type: "type.googleapis.com/google.rpc.Help"}
		help.Links = append(help.Links, struct {
			Description string `json:"description"`
			URL         string `json:"url"`
		}{"Learn more about Gemini API quotas", "https://ai.google.dev/gemini-api/docs/rate-limits"})
		e.Details = append(e.Details, help)
	}
	if f.status == http.StatusTooManyRequests && f.retryAfter > 0 {
		e.Details = append(e.Details, geminiRetryInfo{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: geminiRetryDelay(f.retryAfter)})
	}
	writeJSON(w, f.status, marshal(geminiErrorBody{Error: e}))
}

type geminiAnswer struct {
	Candidates    []geminiCandidate   `json:"candidates"`
	UsageMetadata geminiUsageMetadata `json:"usageMetadata"`
	ModelVersion  string              `json:"modelVersion"`
	ResponseID    string              `json:"responseId"`
}

type geminiCandidate struct {
	Content      geminiAnswerContent `json:"content"`
	FinishReason string              `json:"finishReason"`
	Index        int                 `json:"index"`
}

type geminiAnswerContent struct {
	Parts []any  `json:"parts"` // text parts, or a function call
	Role  string `json:"role"`
}

type geminiFunctionCall struct {
	FunctionCall struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type geminiTextPart struct {
	Text string `json:"text"`
}

type geminiUsageMetadata struct {
	PromptTokenCount     int64                  `json:"promptTokenCount"`
	CandidatesTokenCount int64                  `json:"candidatesTokenCount"`
	TotalTokenCount      int64                  `json:"totalTokenCount"`
	PromptTokensDetails  []geminiModalityTokens `json:"promptTokensDetails"`
	ThoughtsTokenCount   int64                  `json:"thoughtsTokenCount,omitempty"`
}

type geminiModalityTokens struct {
	Modality   string `json:"modality"`
	TokenCount int64  `json:"tokenCount"`
}

// writeAnswer writes a candidate with usageMetadata. With a thinking budget,
// up to half the output (at most the budget) is reported as
// thoughtsTokenCount, and candidatesTokenCount is the rest: the visible text.
func (geminiDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	finish := "STOP"
	if a.usage.OutputTokens >= a.maxTok {
		finish = "MAX_TOKENS"
	}
	thoughts := min(a.thinking, a.usage.OutputTokens/2)
	visible := a.usage.OutputTokens - thoughts
	msg := geminiAnswer{
		Candidates: []geminiCandidate{{Content: geminiAnswerContent{Parts: geminiParts(a.shape, visible), Role: "model"},
			FinishReason: finish}},
		UsageMetadata: geminiUsageMetadata{PromptTokenCount: a.usage.InputTokens, CandidatesTokenCount: visible,
			ThoughtsTokenCount: thoughts, TotalTokenCount: a.usage.InputTokens + a.usage.OutputTokens,
			PromptTokensDetails: []geminiModalityTokens{{Modality: "TEXT", TokenCount: a.usage.InputTokens}}},
		ModelVersion: a.model,
		ResponseID:   "fake" + strconv.FormatUint(seq, 36),
	}
	writeJSON(w, http.StatusOK, marshal(msg))
}

// geminiParts is the answer's parts: a function call, structured output,
// or visible tokens of text.
func geminiParts(shape answerShape, visible int64) []any {
	switch {
	case shape.tool != "":
		var call geminiFunctionCall
		call.FunctionCall.Name, call.FunctionCall.Args = shape.tool, json.RawMessage(shape.args)
		return []any{call}
	case shape.json != "":
		return []any{geminiTextPart{Text: shape.json}}
	}
	return []any{geminiTextPart{Text: answer(visible)}}
}

// geminiPacific is where Gemini's per-day quotas reset: midnight Pacific.
var geminiPacific = func() *time.Location {
	if loc, err := time.LoadLocation("America/Los_Angeles"); err == nil {
		return loc
	}
	return time.FixedZone("PST", -8*60*60) // no time zone database: standard time
}()

// dayLocation returns where provider p's per-day quotas reset at midnight:
// Pacific time for Gemini, UTC (nil) for the others.
func dayLocation(p Provider) *time.Location {
	if p == Gemini {
		return geminiPacific
	}
	return nil
}
