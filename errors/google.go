package errors

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// googleDetails is what Gemini's google.rpc error details say.
type googleDetails struct {
	// reason is ErrorInfo.reason ("API_KEY_INVALID").
	reason string
	// quota is the binding QuotaFailure violation.
	quota quotaViolation
	// retryDelay is RetryInfo.retryDelay as sent ("37s"), read by
	// headers.ParseReset like every other stated wait.
	retryDelay string
}

// quotaViolation is one QuotaFailure violation, interpreted.
type quotaViolation struct {
	id     string
	window quotaWindow
	dim    capacity.Dimension
	hasDim bool
}

// quotaWindow is the period of a Gemini quota, read from its id.
type quotaWindow int

const (
	windowUnknown quotaWindow = iota
	windowMinute
	windowDay
)

// googleDetail is one entry of a google.rpc Status's details: ErrorInfo,
// QuotaFailure or RetryInfo; other types leave these fields empty.
type googleDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"`
	Violations []struct {
		QuotaID     string `json:"quotaId"`
		QuotaMetric string `json:"quotaMetric"`
	} `json:"violations"`
}

func parseGoogleDetails(g *googleDetails, details []json.RawMessage) {
	for _, raw := range details {
		var d googleDetail
		if json.Unmarshal(raw, &d) != nil && d.Type == "" {
			continue
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo"):
			if g.reason == "" {
				g.reason = d.Reason
			}
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			g.retryDelay = d.RetryDelay
		case strings.HasSuffix(d.Type, "google.rpc.QuotaFailure"):
			for _, v := range d.Violations {
				q := interpretQuota(v.QuotaID, v.QuotaMetric)
				// The longest window binds: a spent daily quota outlasts a
				// per-minute one.
				if g.quota.id == "" && q.id != "" || q.window > g.quota.window {
					g.quota = q
				}
			}
		}
	}
}

// interpretQuota reads a Gemini quota's window and dimension from its id
// ("GenerateRequestsPerDayPerProjectPerModel-FreeTier",
// "GenerateContentInputTokensPerModelPerMinute-FreeTier"), falling back to
// its metric ("generativelanguage.googleapis.com/generate_content_free_tier_requests").
func interpretQuota(id, metric string) quotaViolation {
	q := quotaViolation{id: sanitizeToken(id)}
	switch {
	case strings.Contains(id, "PerDay"):
		q.window = windowDay
	case strings.Contains(id, "PerMinute"):
		q.window = windowMinute
	}
	perDay := q.window == windowDay
	switch {
	case strings.Contains(id, "InputTokens"), strings.Contains(metric, "input_token"):
		q.dim, q.hasDim = pick(perDay, capacity.TokensPerDay, capacity.InputTokens), true
	case strings.Contains(id, "OutputTokens"), strings.Contains(metric, "output_token"):
		q.dim, q.hasDim = pick(perDay, capacity.TokensPerDay, capacity.OutputTokens), true
	case strings.Contains(id, "Tokens"), strings.Contains(metric, "token"):
		q.dim, q.hasDim = pick(perDay, capacity.TokensPerDay, capacity.Tokens), true
	case strings.Contains(id, "Requests"), strings.Contains(metric, "requests"):
		q.dim, q.hasDim = pick(perDay, capacity.RequestsPerDay, capacity.Requests), true
	}
	return q
}

func pick(cond bool, a, b capacity.Dimension) capacity.Dimension {
	if cond {
		return a
	}
	return b
}

// isBadKeyReason reports whether an ErrorInfo reason says the credential is
// unusable for the whole service, not just one model.
func isBadKeyReason(reason string) bool {
	switch reason {
	case "API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED",
		"ACCESS_TOKEN_EXPIRED", "ACCESS_TOKEN_TYPE_UNSUPPORTED", "CREDENTIALS_MISSING",
		"SERVICE_DISABLED", "CONSUMER_INVALID":
		return true
	}
	return false
}

// geminiDayReset is when Gemini's daily quotas reset: midnight Pacific.
var geminiDayReset = capacity.DayBoundary{Location: pacific()}

func pacific() *time.Location {
	if loc, err := time.LoadLocation("America/Los_Angeles"); err == nil {
		return loc
	}
	// Without a time zone database, standard time: at most an hour late.
	return time.FixedZone("PST", -8*60*60)
}
