package testsuite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// openaiResponsesDialect is OpenAI's Responses API (POST /v1/responses):
// the chat dialect's keys, errors, limits and headers, its own request and
// answer. It is charged as chat completions are: the input, and
// max_output_tokens at admission.
type openaiResponsesDialect struct{ openaiDialect }

type openaiResponsesRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	MaxOutputTokens *int64            `json:"max_output_tokens"`
	Stream          bool              `json:"stream"`
	Tools           []json.RawMessage `json:"tools"`
	Text            *struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// responsesItem is one input item: a message (role and content) or a
// function call's output.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parse decodes a Responses request and counts its input: the
// instructions as a message, each input message (text, and images by
// OpenAI's formula), other items and tools as their JSON.
func (openaiResponsesDialect) parse(body []byte) (parsed, *failure) {
	var req openaiResponsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, openaiInvalid(openaiBadJSON, "", "")
	}
	out := parsed{model: req.Model, stream: req.Stream}
	switch {
	case req.Model == "":
		return out, openaiInvalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
	case len(req.Input) == 0 || string(req.Input) == "null":
		return out, openaiInvalid("Missing required parameter: 'input'.", "input", "missing_required_parameter")
	case req.Stream:
		return out, openaiInvalid("Streaming is not supported by the tollgate fake provider.", "stream", "unsupported_value")
	}
	if req.Instructions != nil {
		out.input += MessageOverhead + CountTokens(*req.Instructions)
	}
	for _, t := range req.Tools {
		out.input += CountTokens(string(t))
	}
	var text string
	var items []json.RawMessage
	lastCall := false
	switch {
	case json.Unmarshal(req.Input, &text) == nil:
		out.input += MessageOverhead + CountTokens(text)
	case json.Unmarshal(req.Input, &items) == nil:
		for i, raw := range items {
			var it responsesItem
			if json.Unmarshal(raw, &it) != nil {
				return out, openaiInvalid(fmt.Sprintf("Invalid type for 'input[%d]'.", i), fmt.Sprintf("input[%d]", i), "invalid_type")
			}
			if it.Type != "" && it.Type != "message" {
				out.input += CountTokens(string(raw))
				lastCall = it.Type == "function_call_output"
				continue
			}
			n, ok := responsesContentTokens(it.Content)
			if !ok {
				return out, openaiInvalid(fmt.Sprintf("Invalid type for 'input[%d].content'.", i), fmt.Sprintf("input[%d].content", i), "invalid_type")
			}
			out.input += MessageOverhead + n
			lastCall = false
		}
	default:
		return out, openaiInvalid("Invalid type for 'input': expected a string or an array of input items.", "input", "invalid_type")
	}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 16 {
			return out, openaiInvalid(fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *req.MaxOutputTokens),
				"max_output_tokens", "integer_below_min_value")
		}
		out.maxTokens, out.hasMax = *req.MaxOutputTokens, true
	}
	out.shape = req.shape(lastCall)
	return out, nil
}

// shape is a call of the first function tool unless the input ends with a
// function's output; else structured output from text.format.
func (req *openaiResponsesRequest) shape(answered bool) answerShape {
	if !answered {
		for _, raw := range req.Tools {
			var t struct {
				Type       string          `json:"type"`
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			}
			if json.Unmarshal(raw, &t) == nil && t.Type == "function" && t.Name != "" {
				return answerShape{tool: t.Name, args: exampleJSON(t.Parameters)}
			}
		}
	}
	if req.Text != nil && req.Text.Format.Type == "json_schema" {
		return answerShape{json: exampleJSON(req.Text.Format.Schema)}
	}
	return answerShape{}
}

// responsesContentTokens counts a message's content: a string, or parts
// (input_text and output_text their text, input_image by OpenAI's formula,
// others their JSON).
func responsesContentTokens(raw json.RawMessage) (int64, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return CountTokens(s), true
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return 0, false
	}
	var n int64
	for _, pr := range parts {
		var p struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL string `json:"image_url"`
			Detail   string `json:"detail"`
		}
		if json.Unmarshal(pr, &p) != nil {
			return 0, false
		}
		switch p.Type {
		case "input_text", "output_text":
			n += CountTokens(p.Text)
		case "input_image":
			w, h, _ := dataURLSize(p.ImageURL)
			n += openaiImageTokens(w, h, p.Detail)
		default:
			n += CountTokens(string(pr))
		}
	}
	return n, true
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// writeAnswer writes a completed response: a message with output text, a
// function call, or structured output, and its usage.
func (openaiResponsesDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	id := strconv.FormatUint(seq, 36)
	var item map[string]any
	switch {
	case a.shape.tool != "":
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": a.shape.tool,
			"arguments": a.shape.args, "status": "completed"}
	default:
		text := answer(a.usage.OutputTokens)
		if a.shape.json != "" {
			text = a.shape.json
		}
		item = map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	status, incomplete := "completed", any(nil)
	if a.shape.tool == "" && a.usage.OutputTokens >= a.maxTok {
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	u := responsesUsage{InputTokens: a.usage.InputTokens, OutputTokens: a.usage.OutputTokens,
		TotalTokens: a.usage.InputTokens + a.usage.OutputTokens}
	body := marshal(map[string]any{"id": "resp_" + id, "object": "response", "created_at": a.now.Unix(), "status": status,
		"incomplete_details": incomplete, "model": a.model, "output": []any{item}, "usage": u})
	w.Header()["X-Request-Id"] = []string{openaiRequestID(seq)}
	writeJSON(w, http.StatusOK, body)
}
