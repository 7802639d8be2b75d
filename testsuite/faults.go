package testsuite

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Faults are failures the fake provider injects, each as a share of requests
// in [0, 1]. The zero Faults injects nothing. Faults are drawn after a
// request is authenticated and validated, from a generator seeded with
// Options.Seed.
type Faults struct {
	// Overloaded is the share answered with an overload before admission,
	// not charged: Anthropic 529 overloaded_error, OpenAI 503.
	Overloaded float64
	// ServerError is the share answered 500 before admission, not charged.
	ServerError float64
	// RateLimited is the share answered with a 429 before admission, not
	// charged, without retry-after (headers still show the real budget).
	RateLimited float64
	// NoRetryAfter is the share of genuine rate-limit 429s sent without
	// retry-after (and retry-after-ms): the client must fall back on the
	// reset headers.
	NoRetryAfter float64
	// ConnReset is the share of admitted requests whose connection is closed
	// without an answer (hijacked and closed): the provider charged them.
	ConnReset float64
	// Slow is the share of requests delayed by SlowLatency before answering.
	Slow float64
	// SlowLatency is the extra latency of slow requests, on the provider's
	// clock.
	SlowLatency time.Duration
	// Garbage is the share of admitted requests answered with status 200
	// and a body that is not an answer: an HTML error page (as a proxy in
	// front of the provider sends), the answer cut off halfway, the JSON
	// literal null, or a JSON object of another shape, drawn in turn with
	// equal odds. The provider charged them and produced the output; the
	// client cannot read it. The record says CauseGarbage.
	Garbage float64
	// BadHeaders is the share of successful answers whose rate-limit
	// headers (and retry-after and Date) are garbled: negative, not
	// numbers, overflowing, a limit of 0 or 1, a reset in the past, a Date
	// of 1970. The body is the real answer; the record marks
	// Entry.BadHeaders.
	BadHeaders float64
}

func (f Faults) validate() error {
	shares := []struct {
		name string
		v    float64
	}{
		{"Overloaded", f.Overloaded}, {"ServerError", f.ServerError},
		{"RateLimited", f.RateLimited}, {"NoRetryAfter", f.NoRetryAfter},
		{"ConnReset", f.ConnReset}, {"Slow", f.Slow},
		{"Garbage", f.Garbage}, {"BadHeaders", f.BadHeaders},
	}
	for _, s := range shares {
		if !(s.v >= 0 && s.v <= 1) {
			return fmt.Errorf("testsuite: Faults.%s = %v is not a share in [0, 1]", s.name, s.v)
		}
	}
	if sum := f.Overloaded + f.ServerError + f.RateLimited; sum > 1 {
		return fmt.Errorf("testsuite: Faults.Overloaded + ServerError + RateLimited = %v exceeds 1", sum)
	}
	if f.SlowLatency < 0 {
		return fmt.Errorf("testsuite: Faults.SlowLatency %v is negative", f.SlowLatency)
	}
	return nil
}

func (f *Faults) any() bool { return *f != Faults{} }

// fault is what was drawn for one request.
type fault struct {
	early      Cause // CauseOverloaded, CauseServerError, CauseInjectedRateLimit or none
	reset      bool
	noRetry    bool
	extraWait  time.Duration
	garbage    bool
	kind       garbageKind // the garbage answer's kind
	badHeaders bool
}

// faultSource draws faults; it is safe for concurrent use.
type faultSource struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newFaultSource(seed uint64) *faultSource {
	return &faultSource{rng: rand.New(rand.NewPCG(seed, 0x746f6c6c67617465))}
}

// draw draws one request's faults under f.
func (s *faultSource) draw(f *Faults) fault {
	if !f.any() {
		return fault{}
	}
	s.mu.Lock()
	u, r, n, w := s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64()
	s.mu.Unlock()
	var out fault
	switch {
	case u < f.Overloaded:
		out.early = CauseOverloaded
	case u < f.Overloaded+f.ServerError:
		out.early = CauseServerError
	case u < f.Overloaded+f.ServerError+f.RateLimited:
		out.early = CauseInjectedRateLimit
	}
	out.reset = r < f.ConnReset
	out.noRetry = n < f.NoRetryAfter
	if w < f.Slow {
		out.extraWait = f.SlowLatency
	}
	if f.Garbage > 0 || f.BadHeaders > 0 {
		// Drawn only when asked for, so that the other faults of a seed
		// come out as they did before these existed.
		s.mu.Lock()
		g, k, b := s.rng.Float64(), s.rng.IntN(int(numGarbageKinds)), s.rng.Float64()
		s.mu.Unlock()
		out.garbage, out.kind, out.badHeaders = g < f.Garbage, garbageKind(k), b < f.BadHeaders
	}
	return out
}
