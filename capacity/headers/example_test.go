package headers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/headers"
)

// Parse reads what an OpenAI response said about the scope's budgets; a
// store applies it with Store.Observe.
func ExampleParse() {
	h := http.Header{}
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("X-Ratelimit-Remaining-Requests", "499")
	h.Set("X-Ratelimit-Reset-Requests", "120ms")
	h.Set("X-Ratelimit-Limit-Tokens", "30000")
	h.Set("X-Ratelimit-Remaining-Tokens", "not a number")
	obs := headers.Parse(capacity.OpenAI, h, time.Now())
	r, t := obs.Dims[capacity.Requests], obs.Dims[capacity.Tokens]
	fmt.Println("requests:", r.Remaining, "of", r.Limit, "back in", r.ResetIn)
	fmt.Println("tokens:", t.Limit, "remaining known:", t.HasRemaining)
	// Output:
	// requests: 499 of 500 back in 120ms
	// tokens: 30000 remaining known: false
}

// ParseReset reads a wait in any form providers and gateways send it.
func ExampleParseReset() {
	date := time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"6m0s", "20", "2026-10-15T12:00:30Z", "Thu, 15 Oct 2026 12:01:00 GMT", "soon"} {
		wait, ok := headers.ParseReset(v, time.Second, date)
		fmt.Println(v, "→", wait, ok)
	}
	// Output:
	// 6m0s → 6m0s true
	// 20 → 20s true
	// 2026-10-15T12:00:30Z → 30s true
	// Thu, 15 Oct 2026 12:01:00 GMT → 1m0s true
	// soon → 0s false
}
