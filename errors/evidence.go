package errors

import (
	"encoding/json"
	stderrors "errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
)

// evidence is what a failed response said, gathered from an SDK's typed error
// or from the raw status, headers and body.
type evidence struct {
	// sdk is the provider whose SDK produced the error; empty for raw HTTP.
	sdk     capacity.Provider
	status  int
	header  http.Header
	code    string // OpenAI error.code
	typ     string // OpenAI error.type, Anthropic error.type
	gstatus string // Google error.status ("RESOURCE_EXHAUSTED")
	message string
	google  googleDetails
}

// providerCode is the code a Verdict reports.
func (ev *evidence) providerCode() string {
	switch {
	case ev.google.reason != "":
		return ev.google.reason
	case ev.code != "":
		return ev.code
	case ev.typ != "":
		return ev.typ
	}
	return ev.gstatus
}

// sdkEvidence gathers evidence from the official SDKs' typed errors anywhere
// in err's chain: *openai.Error, *anthropic.Error, genai.APIError.
func sdkEvidence(err error) (evidence, bool) {
	if e, ok := stderrors.AsType[*openai.Error](err); ok && e != nil {
		return openAIEvidence(e), true
	}
	if e, ok := stderrors.AsType[*anthropic.Error](err); ok && e != nil {
		return anthropicEvidence(e), true
	}
	if e, ok := stderrors.AsType[genai.APIError](err); ok {
		return geminiEvidence(&e), true
	}
	if e, ok := stderrors.AsType[*genai.APIError](err); ok && e != nil {
		return geminiEvidence(e), true
	}
	return evidence{}, false
}

// openAIEvidence reads *openai.Error: the SDK has already unwrapped the
// body's "error" object into Code, Type and Message.
func openAIEvidence(e *openai.Error) evidence {
	ev := evidence{sdk: capacity.OpenAI, status: e.StatusCode, code: e.Code, typ: e.Type, message: e.Message}
	if e.Response != nil {
		ev.header = e.Response.Header
		if ev.status == 0 {
			ev.status = e.Response.StatusCode
		}
	}
	if ev.message == "" && ev.code == "" && ev.typ == "" {
		// Not the documented shape: read what the SDK kept of the body.
		parseBody(&ev, []byte(e.RawJSON()))
	}
	return ev
}

// anthropicEvidence reads *anthropic.Error, whose RawJSON is the whole body.
func anthropicEvidence(e *anthropic.Error) evidence {
	ev := evidence{sdk: capacity.Anthropic, status: e.StatusCode}
	if e.Response != nil {
		ev.header = e.Response.Header
		if ev.status == 0 {
			ev.status = e.Response.StatusCode
		}
	}
	parseBody(&ev, []byte(e.RawJSON()))
	if t := string(e.Type()); t != "" {
		ev.typ = t
	}
	return ev
}

// geminiEvidence reads genai.APIError. genai keeps no headers: Gemini sends
// no rate-limit headers, and its waits are in RetryInfo.
func geminiEvidence(e *genai.APIError) evidence {
	ev := evidence{sdk: capacity.Gemini, status: e.Code, gstatus: e.Status, message: e.Message}
	if ev.gstatus != "" && isDigitByte(ev.gstatus[0]) {
		// A body genai could not parse: Status is the HTTP status line.
		ev.gstatus = ""
	}
	if len(e.Details) > 0 {
		raws := make([]json.RawMessage, 0, len(e.Details))
		for _, d := range e.Details {
			if raw, err := json.Marshal(d); err == nil {
				raws = append(raws, raw)
			}
		}
		parseGoogleDetails(&ev.google, raws)
	}
	return ev
}
