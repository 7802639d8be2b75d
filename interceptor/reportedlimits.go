package interceptor

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// Limits a user need not know. A scope whose configured limits state no rate
// (Options.Limits nil, or returning limits without a per-minute or per-day
// limit) runs on the limits its provider reports in every answer's headers
// (OpenAI's x-ratelimit-limit-*, Anthropic's anthropic-ratelimit-*-limit):
// the store adopts a reported limit where none is configured and follows it
// when a tier changes (capacity.Store.Observe). Until this worker has seen a
// report, the scope is gated conservatively: one call in flight at a time.
// The store forgets reported limits LoweredLimitMemory after the last, so a
// report older than half of that no longer counts and the scope is
// conservative again until the next answer.

// followedReportAge is how old the last report of a scope's limits may be
// for the worker to run on the limits the store adopted from it.
const followedReportAge = tuning.LoweredLimitMemory / 2

// unreportedMaxInFlight is the calls in flight on a scope that runs on
// reported limits while none has been seen.
const unreportedMaxInFlight = 1

// rateLimited reports whether l states any rate: a per-minute or per-day
// limit. MaxInFlight alone is not a rate.
func rateLimited(l capacity.Limits) bool {
	for _, d := range capacity.Dimensions() {
		if d != capacity.InFlight && l.Limit(d) > 0 {
			return true
		}
	}
	return false
}

// reportedLimits remembers, per scope, the limits its provider last
// reported to this worker, for scopes that run on them.
type reportedLimits struct {
	mu     sync.Mutex
	scopes map[string]*scopeReport // by scope key
}

// scopeReport is the last report of one scope's limits.
type scopeReport struct {
	at     time.Time
	limits [capacity.NumDimensions]int64 // 0: not reported
}

// String lists the reported limits, as "requests 500/min, tokens 30000/min".
func (r *scopeReport) String() string {
	var parts []string
	for _, d := range capacity.Dimensions() {
		if n := r.limits[d]; n > 0 {
			per := "/min"
			if d.PerDay() {
				per = "/day"
			}
			parts = append(parts, fmt.Sprintf("%s %d%s", d, n, per))
		}
	}
	return strings.Join(parts, ", ")
}

// limits returns the limits a call on scope runs on, given the configured
// ones: those, where they state a rate; else those with at most one call in
// flight until a report of the scope's limits no older than
// followedReportAge; else those, the store applying the reported limits. A
// provider that reports no limits (Gemini) cannot be followed: its scope
// needs configured limits, and the error names the option.
func (r *reportedLimits) limits(scope capacity.Scope, configured capacity.Limits, now time.Time) (capacity.Limits, error) {
	if rateLimited(configured) {
		return configured, nil
	}
	if scope.Provider == capacity.Gemini {
		return configured, fmt.Errorf("no rate limits configured for scope %s, and Gemini reports none in its answers: "+
			"set interceptor.Options.Limits for it (capacity.Limits{RequestsPerMinute, InputTokensPerMinute, RequestsPerDay} of your tier)", scope.Key())
	}
	fresh := false
	if r != nil {
		r.mu.Lock()
		rep := r.scopes[scope.Key()]
		fresh = rep != nil && now.Sub(rep.at) <= followedReportAge
		r.mu.Unlock()
	}
	if !fresh && (configured.MaxInFlight == 0 || configured.MaxInFlight > unreportedMaxInFlight) {
		configured.MaxInFlight = unreportedMaxInFlight
	}
	return configured, nil
}

// observed records the limits obs reports for scope as of now. It returns
// the report and whether the reported limits differ from the last ones
// (the first report included), for the gate to log; ok is false when obs
// reports no limit.
func (r *reportedLimits) observed(scope capacity.Scope, obs capacity.Observation, now time.Time) (rep scopeReport, changed, ok bool) {
	for d, od := range obs.Dims {
		if od.HasLimit && od.Limit > 0 {
			rep.limits[d], ok = od.Limit, true
		}
	}
	if !ok {
		return rep, false, false
	}
	rep.at = now
	if r == nil {
		return rep, false, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scopes == nil {
		r.scopes = map[string]*scopeReport{}
	}
	last := r.scopes[scope.Key()]
	changed = last == nil || last.limits != rep.limits || now.Sub(last.at) > followedReportAge
	r.scopes[scope.Key()] = &rep
	return rep, changed, true
}
