package errors

import (
	"bytes"
	"encoding/json"
)

// errorObject is the "error" member of the three providers' error bodies:
//
//	OpenAI:    {"error": {"message", "type", "param", "code"}}
//	Anthropic: {"type": "error", "error": {"type", "message"}, "request_id"}
//	Gemini:    {"error": {"code": 429, "message", "status", "details": [...]}}
type errorObject struct {
	Message string            `json:"message"`
	Type    string            `json:"type"`
	Code    json.RawMessage   `json:"code"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details"`
}

type errorEnvelope struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
}

// parseBody fills ev from a response body. A body that is not one of the
// known shapes leaves its text as the message, for the last, text-based
// rules. It never fails: whatever does not parse is left out.
func parseBody(ev *evidence, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		// Gemini's REST streaming endpoints wrap the error in an array.
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = bytes.TrimSpace(arr[0])
		}
	}
	var env errorEnvelope
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &env) != nil {
		ev.message = string(body[:min(len(body), maxScanLen)])
		return
	}
	if len(env.Error) > 0 && env.Error[0] == '"' {
		var s string
		_ = json.Unmarshal(env.Error, &s)
		ev.message = s
		return
	}
	var obj errorObject
	if len(env.Error) == 0 || json.Unmarshal(env.Error, &obj) != nil && obj.Message == "" && obj.Type == "" {
		ev.message = env.Message
		return
	}
	fillFromObject(ev, obj)
}

func fillFromObject(ev *evidence, obj errorObject) {
	ev.message = obj.Message
	ev.typ = obj.Type
	ev.code = codeString(obj.Code)
	ev.gstatus = obj.Status
	if len(obj.Details) > 0 {
		parseGoogleDetails(&ev.google, obj.Details)
	}
}

// codeString returns a string error code; Gemini's numeric code repeats the
// HTTP status and is dropped.
func codeString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
