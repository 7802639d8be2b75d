package errors

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/capacity"
)

// evidence is what a failed response said: its status, headers and parsed
// body.
type evidence struct {
	// sdk is the provider a Reader named; empty for raw HTTP.
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
