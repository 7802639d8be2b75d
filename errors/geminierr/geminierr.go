// Package geminierr reads the Gemini SDK's errors (genai.APIError of
// google.golang.org/genai) for tollgate's classifier. Importing it registers
// Read with errors.RegisterReader, so Classify, and the gate in a worker that
// imports it, classify a genai.APIError an activity returns as it is:
//
//	import _ "github.com/tollgate-dev/tollgate/errors/geminierr"
package geminierr

import (
	"encoding/json"
	stderrors "errors"

	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

func init() { tgerrors.RegisterReader(Read) }

// Read returns the failed response behind the first genai.APIError (value
// or pointer) in err's chain: its status, and the body rebuilt from the
// fields genai parsed (code, message, status, google.rpc details). genai
// keeps no headers: Gemini sends no rate-limit headers, and its waits are in
// RetryInfo. ok is false if err holds none.
func Read(err error) (r tgerrors.Response, ok bool) {
	if e, ok := stderrors.AsType[genai.APIError](err); ok {
		return response(e), true
	}
	if e, ok := stderrors.AsType[*genai.APIError](err); ok && e != nil {
		return response(*e), true
	}
	return tgerrors.Response{}, false
}

func response(e genai.APIError) tgerrors.Response {
	if e.Status != "" && e.Status[0] >= '0' && e.Status[0] <= '9' {
		// A body genai could not parse: Status is the HTTP status line and
		// Message the body's text.
		e.Status = ""
	}
	body, err := json.Marshal(struct {
		Error genai.APIError `json:"error"`
	}{e})
	if err != nil {
		// Details genai decoded from JSON always encode; drop them if not.
		e.Details = nil
		body, _ = json.Marshal(struct {
			Error genai.APIError `json:"error"`
		}{e})
	}
	return tgerrors.Response{Provider: capacity.Gemini, Status: e.Code, Body: body}
}
