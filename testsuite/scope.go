package testsuite

import (
	"sync"
	"time"
)

// Scope identifies one budget: a model and the API key calling it, as the
// providers meter them.
type Scope struct {
	Key   string
	Model string
}

// String returns "model/key" with all but the key's last four characters
// masked, so a Scope can be logged.
func (s Scope) String() string { return s.Model + "/" + maskKey(s.Key) }

func maskKey(k string) string {
	if len(k) <= 4 {
		return "****"
	}
	return "****" + k[len(k)-4:]
}

// cacheTTL is how long an Anthropic prompt-cache entry lives after its last use.
const cacheTTL = 5 * time.Minute

// breakpoint is an Anthropic cache_control mark: the hash of the prompt prefix
// up to and including the marked block, and that prefix's tokens.
type breakpoint struct {
	hash   uint64
	tokens int64
}

// demand is what one request asks of its scope.
type demand struct {
	provider      Provider
	input         int64 // every prompt token, cached or not
	maxTokens     int64 // effective max_tokens
	output        int64 // tokens the response will carry
	cacheRead     int64 // Anthropic: prompt tokens read from the cache
	cacheCreation int64 // Anthropic: prompt tokens written to the cache
	breakpoints   []breakpoint
}

// tokenDim returns the per-minute token dimension charged at admission:
// input tokens for Anthropic (ITPM) and Gemini (TPM, input only).
func (d *demand) tokenDim() Dimension {
	if d.provider == Anthropic || d.provider == Gemini {
		return InputTokens
	}
	return Tokens
}

// tokenCharge returns the tokens charged at admission: OpenAI charges input
// + max_tokens, Anthropic the input tokens that are not cache reads, Gemini
// the input tokens.
func (d *demand) tokenCharge() int64 {
	switch d.provider {
	case Anthropic:
		return d.input - d.cacheRead
	case Gemini:
		return d.input
	}
	return d.input + d.maxTokens
}

// dimState is what the rate-limit headers report of one bucket.
type dimState struct {
	limit     int64
	remaining int64
	reset     time.Duration // until the bucket is full again
}

// snapshot is the scope's per-minute buckets at one instant.
type snapshot struct {
	now  time.Time
	dims [numRate]dimState
}

// decision is the outcome of admission.
type decision struct {
	cause     Cause
	dim       Dimension // the refusing dimension (rate and quota causes)
	limit     int64     // its limit
	used      int64     // its use before this request
	requested int64     // what this request asked of it
	wait      time.Duration
	resetAt   time.Time // daily quota: when it resets
	charged   Charges
	remaining Charges
	snap      snapshot
}

// scopeState is the metering state of one scope. mu guards every field.
type scopeState struct {
	mu       sync.Mutex
	limits   Limits
	buckets  [numRate]bucket
	day      dayCounter
	inflight int64
	cache    map[uint64]time.Time // Anthropic prompt cache: prefix hash → expiry
}

func newScopeState(l Limits, now time.Time) *scopeState {
	s := &scopeState{}
	s.setLimits(l, now)
	return s
}

// setLimits applies l at now. s.mu must be held (or s unshared).
func (s *scopeState) setLimits(l Limits, now time.Time) {
	s.limits = l
	for d := range s.buckets {
		s.buckets[d].configure(l.Limit(Dimension(d)), l.burstWindow(), now)
	}
}

// advance refills the buckets and rolls the day. s.mu must be held.
func (s *scopeState) advance(now time.Time) {
	for d := range s.buckets {
		s.buckets[d].refill(now)
	}
	s.day.roll(now)
}

// lookupCache sets d.cacheRead and d.cacheCreation from the prompt cache.
// s.mu must be held.
func (s *scopeState) lookupCache(now time.Time, d *demand) {
	if len(d.breakpoints) == 0 {
		return
	}
	var read int64
	for i := len(d.breakpoints) - 1; i >= 0; i-- {
		if exp, ok := s.cache[d.breakpoints[i].hash]; ok && now.Before(exp) {
			read = d.breakpoints[i].tokens
			break
		}
	}
	d.cacheRead = read
	d.cacheCreation = d.breakpoints[len(d.breakpoints)-1].tokens - read
}

// storeCache writes (or refreshes) d's breakpoints. s.mu must be held.
func (s *scopeState) storeCache(now time.Time, d *demand) {
	if len(d.breakpoints) == 0 {
		return
	}
	if s.cache == nil {
		s.cache = make(map[uint64]time.Time)
	}
	if len(s.cache) > 4096 {
		for h, exp := range s.cache {
			if !now.Before(exp) {
				delete(s.cache, h)
			}
		}
	}
	for _, bp := range d.breakpoints {
		s.cache[bp.hash] = now.Add(cacheTTL)
	}
}

// admit decides whether d may run at now and charges it. Checks run in this
// order: request larger than the token limit, daily quotas, concurrency,
// requests, tokens (input), output. A refused request is still charged one
// request, with bounded debt. useCache selects the prompt-cache lookup (off
// for Spend, whose cache reads are given).
func (s *scopeState) admit(now time.Time, d *demand, useCache bool) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	if useCache {
		s.lookupCache(now, d)
	}
	l := &s.limits
	tdim := d.tokenDim()
	tok := d.tokenCharge()
	noBucket := bucket{}
	rq, tb, ob := &s.buckets[Requests], &s.buckets[tdim], &s.buckets[OutputTokens]
	if d.provider != Anthropic {
		ob = &noBucket // OpenAI and Gemini have no output bucket
	}

	var dec decision
	used := func(b *bucket) int64 { return max(0, b.limit-b.remaining()) }
	switch {
	case tb.enabled() && tok > l.Limit(tdim):
		dec.cause, dec.dim, dec.requested = CauseTooLarge, tdim, tok
	case l.RequestsPerDay > 0 && s.day.requests+1 > l.RequestsPerDay:
		dec.cause, dec.dim, dec.requested = CauseDailyQuota, RequestsPerDay, 1
		dec.used, dec.resetAt = s.day.requests, s.day.resetAt()
	case l.TokensPerDay > 0 && s.day.tokens+tok > l.TokensPerDay:
		dec.cause, dec.dim, dec.requested = CauseDailyQuota, TokensPerDay, tok
		dec.used, dec.resetAt = s.day.tokens, s.day.resetAt()
	case l.MaxConcurrent > 0 && s.inflight >= l.MaxConcurrent:
		dec.cause, dec.dim, dec.requested = CauseConcurrency, Requests, 1
		dec.used = s.inflight
	case !rq.fits(1):
		dec.cause, dec.dim, dec.requested, dec.used = CauseRequests, Requests, 1, used(rq)
	case !tb.fits(float64(tok)):
		dec.cause, dec.dim, dec.requested, dec.used = causeOf(tdim), tdim, tok, used(tb)
	case !ob.fits(1):
		dec.cause, dec.dim, dec.requested, dec.used = CauseOutputTokens, OutputTokens, 1, used(ob)
	}

	if dec.cause != CauseNone {
		if dec.cause == CauseConcurrency {
			dec.limit = l.MaxConcurrent
		} else {
			dec.limit = l.Limit(dec.dim)
		}
		rq.takeRefused(1)
		dec.charged[Requests] = 1
		if dec.cause.rateLimited() {
			// The wait is measured after the refused request's own charge.
			dec.wait = max(rq.wait(1), tb.wait(float64(tok)), ob.wait(1))
		}
		return s.finish(now, dec)
	}

	rq.take(1)
	tb.take(float64(tok))
	s.day.requests++
	s.day.tokens += tok
	s.inflight++
	if useCache {
		s.storeCache(now, d)
	}
	dec.charged[Requests] = 1
	dec.charged[tdim] = tok
	dec.charged[RequestsPerDay] = 1
	dec.charged[TokensPerDay] = tok
	return s.finish(now, dec)
}

// finish fills the remaining levels and header snapshot. s.mu must be held.
func (s *scopeState) finish(now time.Time, dec decision) decision {
	dec.remaining = s.remainingLocked()
	dec.snap = s.snapshotLocked(now)
	return dec
}

// settle ends an admitted request at now: it charges the output produced
// (Anthropic) and frees the concurrency slot. It returns the charges made
// and the snapshot for the response headers.
func (s *scopeState) settle(now time.Time, d *demand) (Charges, snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	s.inflight--
	var c Charges
	if d.provider == Anthropic {
		s.buckets[OutputTokens].take(float64(d.output))
		s.day.tokens += d.output
		c[OutputTokens] = d.output
		c[TokensPerDay] = d.output
	}
	return c, s.snapshotLocked(now)
}

// remainingLocked returns every dimension's remaining budget. s.mu must be held.
func (s *scopeState) remainingLocked() Charges {
	var r Charges
	for d := range s.buckets {
		r[d] = s.buckets[d].remaining()
	}
	if s.limits.RequestsPerDay > 0 {
		r[RequestsPerDay] = max(0, s.limits.RequestsPerDay-s.day.requests)
	}
	if s.limits.TokensPerDay > 0 {
		r[TokensPerDay] = max(0, s.limits.TokensPerDay-s.day.tokens)
	}
	return r
}

// snapshotLocked captures the per-minute buckets. s.mu must be held.
func (s *scopeState) snapshotLocked(now time.Time) snapshot {
	sn := snapshot{now: now}
	for d := range s.buckets {
		b := &s.buckets[d]
		if b.enabled() {
			sn.dims[d] = dimState{limit: b.limit, remaining: b.remaining(), reset: b.untilFull()}
		}
	}
	return sn
}

// current returns the scope's limits and a snapshot at now.
func (s *scopeState) current(now time.Time) (Limits, snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	return s.limits, s.snapshotLocked(now)
}
