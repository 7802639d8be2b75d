package testsuite

import (
	"errors"
	"fmt"
	"net/http"
)

// Demand is one request sent with Spend.
type Demand struct {
	// InputTokens are the prompt tokens, cache reads included.
	InputTokens int64
	// MaxTokens is the request's max_tokens: OpenAI charges it to TPM at
	// admission. If zero, the model's MaxOutputTokens.
	MaxTokens int64
	// OutputTokens is the answer's length: Anthropic charges it to OTPM
	// when the request completes.
	OutputTokens int64
	// CacheReadTokens is the part of InputTokens read from Anthropic's prompt
	// cache, which ITPM does not charge.
	CacheReadTokens int64
}

// Spend sends one request on scope s from a client the code under test does
// not see — a second process sharing the same key. It is admitted or refused
// exactly as an HTTP request would be at the provider's current time (same
// buckets, quotas and concurrency), completes at once (no latency, no
// faults), and is recorded with Entry.Direct set. It returns the entry; a
// refusal is reported in Entry.Status and Entry.Cause, not as an error.
//
// A second raw HTTP client using the same key against URL() is the other
// way to share a budget; Spend is cheaper and exact.
func (p *FakeProvider) Spend(s Scope, d Demand) (Entry, error) {
	m, ok := p.models[s.Model]
	if !ok {
		return Entry{}, fmt.Errorf("%w %q", ErrUnknownModel, s.Model)
	}
	if !p.keyOK(s.Key) {
		return Entry{}, ErrUnknownKey
	}
	if d.InputTokens < 0 || d.MaxTokens < 0 || d.OutputTokens < 0 || d.CacheReadTokens < 0 || d.CacheReadTokens > d.InputTokens {
		return Entry{}, errors.New("testsuite: Demand has a negative field or more cache reads than input")
	}
	if d.MaxTokens == 0 {
		d.MaxTokens = m.MaxOutputTokens
	}
	dem := demand{provider: m.Provider, input: d.InputTokens, maxTokens: d.MaxTokens,
		output: d.OutputTokens, cacheRead: d.CacheReadTokens}
	now := p.clock.Now()
	e := Entry{Seq: p.seq.Add(1), Provider: m.Provider, Scope: s, Arrival: now, Direct: true}
	st := p.scope(s)
	dec := st.admit(now, &dem, false)
	e.Charged, e.Remaining = dec.charged, dec.remaining
	if dec.cause != CauseNone {
		var dl dialect = openaiDialect{org: p.opts.Organization}
		switch m.Provider {
		case Anthropic:
			dl = anthropicDialect{}
		case Gemini:
			dl = geminiDialect{model: m.Name}
		}
		p.record(&e, dl.refused(&dec, m.Name).status, dec.cause)
		return e, nil
	}
	e.Admitted = true
	e.Settled, _ = st.settle(now, &dem)
	e.Usage = Usage{InputTokens: d.InputTokens, OutputTokens: d.OutputTokens, CacheReadTokens: d.CacheReadTokens}
	p.record(&e, http.StatusOK, CauseNone)
	return e, nil
}
