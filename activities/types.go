package activities

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// Message is one chat message.
type Message struct {
	Role    string // "user", "assistant" (and "system"/"developer" for OpenAI)
	Content string
}

// Result is what a model-call activity returns: the text, the usage the
// provider reported, and the response's rate-limit headers (no other
// headers: nothing secret reaches workflow history).
type Result struct {
	Text         string
	Model        string
	FinishReason string
	Usage        capacity.Usage
	Header       http.Header
}

// TollgateReport implements interceptor.ModelResult.
func (r Result) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: true, Header: r.Header}
}

// RateLimitHeaders keeps of h the headers the gate reads, and only those:
// rate limits, retry-after, date and request ids. A result carries these to
// the gate (interceptor.Report.Header) without putting anything secret in
// workflow history.
func RateLimitHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-ratelimit-") || strings.HasPrefix(lk, "anthropic-ratelimit-") ||
			lk == "retry-after" || lk == "retry-after-ms" || lk == "date" || lk == "x-request-id" || lk == "request-id" {
			out[k] = v
		}
	}
	return out
}
