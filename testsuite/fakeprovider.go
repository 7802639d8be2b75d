package testsuite

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Provider names a wire format and its accounting.
type Provider string

// Providers the fake speaks.
const (
	// OpenAI is POST /v1/chat/completions; TPM is charged input + max_tokens
	// at admission.
	OpenAI Provider = "openai"
	// Anthropic is POST /v1/messages; ITPM is charged input without cache
	// reads at admission, OTPM the output produced.
	Anthropic Provider = "anthropic"
	// Gemini is POST /v1beta/models/{model}:generateContent; TPM is charged
	// the input tokens at admission (output is not metered per minute), and
	// the per-day quotas reset at midnight America/Los_Angeles.
	Gemini Provider = "gemini"
)

// Defaults used when Options leaves a field empty.
const (
	// DefaultKey is the only API key accepted when Options.Keys is empty.
	DefaultKey = "sk-tollgate-test"
	// DefaultOpenAIModel is served, without limits, when Options.Models is empty.
	DefaultOpenAIModel = "gpt-4o-mini"
	// DefaultAnthropicModel is served, without limits, when Options.Models is empty.
	DefaultAnthropicModel = "claude-sonnet-4-5"
	// DefaultGeminiModel names the Gemini model of the examples; it is not
	// served unless listed in Options.Models.
	DefaultGeminiModel = "gemini-2.5-flash"
	// DefaultOrganization names the organization in OpenAI's 429 messages.
	DefaultOrganization = "org-tollgatefake"
	// DefaultMaxBodyBytes is the largest request body accepted (413 beyond).
	DefaultMaxBodyBytes = 32 << 20
)

// Errors returned by Spend and the limit setters.
var (
	// ErrUnknownModel reports a model the provider does not serve.
	ErrUnknownModel = errors.New("testsuite: unknown model")
	// ErrUnknownKey reports an API key the provider does not accept.
	ErrUnknownKey = errors.New("testsuite: unknown API key")
)

// Model is one model the fake provider serves.
type Model struct {
	// Name is the model id requests name ("gpt-4o-mini"). Required, unique.
	Name string
	// Provider is the wire format (endpoint) that serves it. Required; the
	// other endpoint answers 404 for this model.
	Provider Provider
	// Limits is the budget of each scope (this model + one key): every key
	// gets its own copy.
	Limits Limits
	// ContextWindow is the most tokens of prompt + max_tokens. If zero,
	// 128000 for OpenAI, 200000 for Anthropic and 1048576 for Gemini.
	ContextWindow int64
	// MaxOutputTokens is the largest max_tokens accepted, and OpenAI's
	// max_tokens when a request omits it (capped by the context left). If
	// zero, 16384 for OpenAI, 64000 for Anthropic and 65536 for Gemini.
	MaxOutputTokens int64
	// Embeddings makes it an embedding model, served at the embeddings
	// endpoints only (OpenAI /v1/embeddings, Gemini :embedContent and
	// :batchEmbedContents) and charged its input only. Its ContextWindow is
	// the most tokens of one input: if zero, 8192 for OpenAI, 2048 for
	// Gemini.
	Embeddings bool
	// Dimensions is an embedding model's vector length, the most a request
	// may ask for: if zero, 1536 for OpenAI, 3072 for Gemini.
	Dimensions int
}

// Options configure a FakeProvider. The zero Options serves DefaultOpenAIModel
// and DefaultAnthropicModel without limits to DefaultKey, on the wall clock.
type Options struct {
	// Models are the models served. If empty, DefaultOpenAIModel and
	// DefaultAnthropicModel, without limits.
	Models []Model
	// Keys are the API keys accepted; any other key gets 401. If empty,
	// only DefaultKey.
	Keys []string
	// Clock is the time source for metering, latency and the record;
	// latency waits on its timers. If nil, capacity.SystemClock (the wall
	// clock). Tests pass a capacitytest.ManualClock and move it instead of
	// sleeping.
	Clock capacity.Clock
	// Seed seeds the default OutputFunc and the fault generator.
	Seed uint64
	// Output decides each answer's length. If nil, SeededOutput(Seed).
	Output OutputFunc
	// Latency decides how long each admitted request takes. If nil, no
	// latency (only Faults.SlowLatency).
	Latency LatencyFunc
	// Faults are the failures injected from the start; see SetFaults.
	Faults Faults
	// Organization names the organization in OpenAI's 429 messages. If
	// empty, DefaultOrganization.
	Organization string
	// MaxBodyBytes bounds request bodies. If zero, DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// NoRecord turns the record off (Entries and Report see nothing), for
	// long benchmarks that do not need it.
	NoRecord bool
	// HeadersAt is when an answer's rate-limit headers are computed. If
	// zero, HeadersAtAnswer.
	HeadersAt HeadersTime
}

// FakeProvider is an HTTP server on 127.0.0.1 that speaks the OpenAI chat
// completions and Anthropic messages wire formats and enforces rate limits
// the way those services do, so that the official SDKs can be pointed at it
// unchanged (OpenAIBaseURL, AnthropicBaseURL).
//
// Each scope (model + API key) has its own continuously refilling request
// and token buckets, daily quotas and concurrency cap (see Limits); every
// response of a known scope carries the provider's rate-limit headers for
// its limited dimensions (401 and 404 answers have no scope); refusals carry
// the provider's 429 bodies and retry-after. Every request is recorded (Entries) and the oracle
// (Report, Analyze) checks the record against the limits.
//
// It shares no metering code with tollgate's capacity package (only its Clock
// type): it is an independent yardstick. Its methods are safe for concurrent use. Close it when done.
type FakeProvider struct {
	opts   Options
	clock  capacity.Clock
	server *httptest.Server
	done   chan struct{}
	close  sync.Once

	models map[string]*Model // immutable after New; Limits are read under mu

	mu      sync.Mutex // guards the fields below and scope creation
	keys    map[string]bool
	revoked map[string]bool
	scopes  sync.Map // Scope → *scopeState; written under mu

	authOK   atomic.Pointer[map[string]bool] // keys minus revoked, copy-on-write
	faults   atomic.Pointer[Faults]
	faultSrc *faultSource
	seq      atomic.Uint64
	rec      recorder
}

// New validates opts, fills in defaults and starts a FakeProvider on a
// loopback port.
func New(opts Options) (*FakeProvider, error) {
	p, err := newProvider(opts)
	if err != nil {
		return nil, err
	}
	p.server = httptest.NewServer(p)
	return p, nil
}

func newProvider(opts Options) (*FakeProvider, error) {
	if len(opts.Models) == 0 {
		opts.Models = []Model{
			{Name: DefaultOpenAIModel, Provider: OpenAI},
			{Name: DefaultAnthropicModel, Provider: Anthropic},
		}
	}
	if len(opts.Keys) == 0 {
		opts.Keys = []string{DefaultKey}
	}
	if opts.Clock == nil {
		opts.Clock = capacity.SystemClock{}
	}
	if opts.Output == nil {
		opts.Output = SeededOutput(opts.Seed)
	}
	if opts.Organization == "" {
		opts.Organization = DefaultOrganization
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("testsuite: MaxBodyBytes %d is negative", opts.MaxBodyBytes)
	}
	if err := opts.Faults.validate(); err != nil {
		return nil, err
	}
	if err := opts.HeadersAt.validate(); err != nil {
		return nil, err
	}
	p := &FakeProvider{
		opts:     opts,
		clock:    opts.Clock,
		done:     make(chan struct{}),
		models:   make(map[string]*Model, len(opts.Models)),
		keys:     make(map[string]bool, len(opts.Keys)),
		revoked:  make(map[string]bool),
		faultSrc: newFaultSource(opts.Seed),
	}
	p.rec.off = opts.NoRecord
	for i := range opts.Models {
		m := opts.Models[i]
		if err := m.fill(); err != nil {
			return nil, err
		}
		if _, dup := p.models[m.Name]; dup {
			return nil, fmt.Errorf("testsuite: model %q listed twice", m.Name)
		}
		p.models[m.Name] = &m
	}
	for _, k := range opts.Keys {
		if k == "" {
			return nil, errors.New("testsuite: empty API key in Options.Keys")
		}
		p.keys[k] = true
	}
	f := opts.Faults
	p.faults.Store(&f)
	p.publishKeysLocked()
	return p, nil
}

// fill validates m and fills its defaults.
// fillEmbeddings fills an embedding model's defaults.
func (m *Model) fillEmbeddings() error {
	window, dims := int64(0), 0
	switch m.Provider {
	case OpenAI:
		window, dims = 8192, 1536
	case Gemini:
		window, dims = 2048, 3072
	default:
		return fmt.Errorf("testsuite: embedding model %q: Provider %q serves no embeddings (want %q or %q)", m.Name, m.Provider, OpenAI, Gemini)
	}
	if m.ContextWindow == 0 {
		m.ContextWindow = window
	}
	if m.Dimensions == 0 {
		m.Dimensions = dims
	}
	if m.ContextWindow < 0 || m.Dimensions < 0 || m.MaxOutputTokens != 0 {
		return fmt.Errorf("testsuite: embedding model %q: negative ContextWindow or Dimensions, or a MaxOutputTokens (embeddings have no output)", m.Name)
	}
	if err := m.Limits.validate(m.Provider); err != nil {
		return fmt.Errorf("testsuite: model %q: %w", m.Name, err)
	}
	return nil
}

func (m *Model) fill() error {
	if m.Name == "" {
		return errors.New("testsuite: model with an empty Name")
	}
	if m.Embeddings {
		return m.fillEmbeddings()
	}
	switch m.Provider {
	case OpenAI:
		if m.ContextWindow == 0 {
			m.ContextWindow = 128000
		}
		if m.MaxOutputTokens == 0 {
			m.MaxOutputTokens = 16384
		}
	case Anthropic:
		if m.ContextWindow == 0 {
			m.ContextWindow = 200000
		}
		if m.MaxOutputTokens == 0 {
			m.MaxOutputTokens = 64000
		}
	case Gemini:
		if m.ContextWindow == 0 {
			m.ContextWindow = 1 << 20
		}
		if m.MaxOutputTokens == 0 {
			m.MaxOutputTokens = 65536
		}
	default:
		return fmt.Errorf("testsuite: model %q: unknown Provider %q (want %q, %q or %q)", m.Name, m.Provider, OpenAI, Anthropic, Gemini)
	}
	if m.ContextWindow < 0 || m.MaxOutputTokens < 0 {
		return fmt.Errorf("testsuite: model %q: negative ContextWindow or MaxOutputTokens", m.Name)
	}
	if err := m.Limits.validate(m.Provider); err != nil {
		return fmt.Errorf("testsuite: model %q: %w", m.Name, err)
	}
	return nil
}

// publishKeysLocked publishes the accepted keys for the hot path. p.mu must
// be held (or p unshared).
func (p *FakeProvider) publishKeysLocked() {
	ok := make(map[string]bool, len(p.keys))
	for k := range p.keys {
		if !p.revoked[k] {
			ok[k] = true
		}
	}
	p.authOK.Store(&ok)
}

// URL returns the server's root URL, such as "http://127.0.0.1:41234".
func (p *FakeProvider) URL() string { return p.server.URL }

// OpenAIBaseURL returns the base URL for openai-go's option.WithBaseURL
// (URL + "/v1"): the SDK then posts to /v1/chat/completions.
func (p *FakeProvider) OpenAIBaseURL() string { return p.server.URL + "/v1" }

// AnthropicBaseURL returns the base URL for the Anthropic SDK's
// option.WithBaseURL (URL itself): the SDK then posts to /v1/messages.
func (p *FakeProvider) AnthropicBaseURL() string { return p.server.URL }

// GeminiBaseURL returns the base URL for genai's HTTPOptions.BaseURL (URL
// itself): the SDK then posts to /v1beta/models/{model}:generateContent.
func (p *FakeProvider) GeminiBaseURL() string { return p.server.URL + "/" }

// Close answers the requests still waiting out their latency as canceled,
// and shuts the server down. It is safe to call more than once.
func (p *FakeProvider) Close() {
	p.close.Do(func() {
		close(p.done)
		if p.server != nil {
			p.server.Close()
		}
	})
}

// Now returns the time on the provider's clock.
func (p *FakeProvider) Now() time.Time { return p.clock.Now() }

// scope returns the state of s, creating it with its model's limits.
func (p *FakeProvider) scope(s Scope) *scopeState {
	if st, ok := p.scopes.Load(s); ok {
		return st.(*scopeState)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scopeLocked(s)
}

// scopeLocked is scope with p.mu held.
func (p *FakeProvider) scopeLocked(s Scope) *scopeState {
	if st, ok := p.scopes.Load(s); ok {
		return st.(*scopeState)
	}
	m := p.models[s.Model]
	st := newScopeState(m.Limits, p.clock.Now())
	st.day.loc = dayLocation(m.Provider)
	p.scopes.Store(s, st)
	return st
}

// SetLimits changes the limits of model for every key, now and for scopes
// created later, replacing any SetScopeLimits. It takes effect at once: the
// amount each bucket has used is kept, so a lowered limit lowers remaining
// (and the next response's headers) immediately — the provider reducing an
// advertised budget mid-run.
func (p *FakeProvider) SetLimits(model string, l Limits) error {
	m, ok := p.models[model]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	if err := l.validate(m.Provider); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m.Limits = l
	now := p.clock.Now()
	p.scopes.Range(func(k, v any) bool {
		if k.(Scope).Model == model {
			st := v.(*scopeState)
			st.mu.Lock()
			st.setLimits(l, now)
			st.mu.Unlock()
		}
		return true
	})
	return nil
}

// SetScopeLimits changes the limits of one scope only, as SetLimits does.
func (p *FakeProvider) SetScopeLimits(s Scope, l Limits) error {
	m, ok := p.models[s.Model]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownModel, s.Model)
	}
	if err := l.validate(m.Provider); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.scopeLocked(s)
	st.mu.Lock()
	st.setLimits(l, p.clock.Now())
	st.mu.Unlock()
	return nil
}

// Limits returns the limits in force for scope s.
func (p *FakeProvider) Limits(s Scope) (Limits, error) {
	if _, ok := p.models[s.Model]; !ok {
		return Limits{}, fmt.Errorf("%w %q", ErrUnknownModel, s.Model)
	}
	l, _ := p.scope(s).current(p.clock.Now())
	return l, nil
}

// SetFaults replaces the injected faults from the next request on.
func (p *FakeProvider) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	p.faults.Store(&f)
	return nil
}

// RevokeKey makes key unknown from the next request on: it gets 401, as a
// revoked or rotated credential does.
func (p *FakeProvider) RevokeKey(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revoked[key] = true
	p.publishKeysLocked()
}

// keyOK reports whether key is accepted.
func (p *FakeProvider) keyOK(key string) bool { return (*p.authOK.Load())[key] }

// Entries returns the record of every request so far, in arrival order
// (Seq). Requests still in flight are not in it yet.
func (p *FakeProvider) Entries() []Entry { return p.rec.snapshot(nil) }

// ScopeEntries returns the record of scope s, in arrival order.
func (p *FakeProvider) ScopeEntries(s Scope) []Entry {
	return p.rec.snapshot(func(e *Entry) bool { return e.Scope == s })
}

// ResetRecord forgets the record (budgets are unchanged).
func (p *FakeProvider) ResetRecord() { p.rec.reset() }

// Report runs the oracle (Analyze) on scope s's record under the scope's
// current limits. If the limits changed during the run, analyze each period
// separately with Analyze.
func (p *FakeProvider) Report(s Scope) Report {
	l, _ := p.Limits(s)
	return Analyze(p.ScopeEntries(s), l)
}
