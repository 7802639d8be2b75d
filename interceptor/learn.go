package interceptor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// Defaults of LearnOptions.
const (
	DefaultLearnQuantile   = 0.95
	DefaultLearnMinSamples = 20
	DefaultLearnRefresh    = time.Second
)

// learnReadTimeout bounds one read of what a (scope, kind) learned on the
// admission path; past it the call goes on with what the worker had.
const learnReadTimeout = 500 * time.Millisecond

// LearnOptions configures what the gate learns from settled calls, where
// the store implements capacity.Learner (the memory and Redis stores do).
// Each call that settles with usage teaches its scope and kind (Call.UsageKey,
// else the activity type) its output, input and max_tokens; then:
//
//   - where the provider settles output to actual use (a Profile that is a
//     accounting.OutputSettler: Anthropic), a call that states no expected
//     output reserves the Quantile of its kind's output, at most its
//     max_tokens, instead of max_tokens; settling corrects the rest (an
//     output above it is debt). OpenAI charges max_tokens at admission, so
//     its reservation does not change; its samples feed `tollgate advise`.
//   - an input that is an estimate (Demand.InputEstimated: the Anthropic
//     and Gemini activities' bytes / 3) is scaled by the Quantile of the
//     scope's actual over estimated input, held to [learn.MinInputRatio,
//     learn.MaxInputRatio].
//
// Neither applies before MinSamples samples. Learning never fails a call:
// a store error is logged and the call goes on as if nothing was learned.
type LearnOptions struct {
	// Disabled turns learning off: no sample is recorded and every call
	// reserves what its Demand says. The zero value learns.
	Disabled bool
	// Quantile of the learned output reserved, and of the input ratio
	// applied, in (0, 1]. If zero, DefaultLearnQuantile (p95).
	Quantile float64
	// MinSamples is how many samples a kind's output (or a scope's input
	// ratio) needs before it is used. If zero, DefaultLearnMinSamples.
	MinSamples int
	// Refresh is how long a worker uses what it read of a (scope, kind)
	// before it reads the store again, so a call costs no extra round trip.
	// If zero, DefaultLearnRefresh; negative: read at every call.
	Refresh time.Duration
}

func (o LearnOptions) withDefaults() (LearnOptions, error) {
	if math.IsNaN(o.Quantile) || o.Quantile < 0 || o.Quantile > 1 {
		return o, fmt.Errorf("%w: Learning.Quantile is %v; want in (0, 1] (0 means %v)", ErrInvalidOptions, o.Quantile, DefaultLearnQuantile)
	}
	if o.MinSamples < 0 {
		return o, fmt.Errorf("%w: Learning.MinSamples is %d; want >= 0 (0 means %d)", ErrInvalidOptions, o.MinSamples, DefaultLearnMinSamples)
	}
	if o.Quantile == 0 {
		o.Quantile = DefaultLearnQuantile
	}
	if o.MinSamples == 0 {
		o.MinSamples = DefaultLearnMinSamples
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultLearnRefresh
	}
	return o, nil
}

// learning is a worker's side of capacity.Learner: it records samples and
// keeps what it read per (scope, kind) for Refresh.
type learning struct {
	store capacity.Learner // nil: learning is off
	opts  LearnOptions
	clock capacity.Clock

	mu    sync.Mutex
	cache map[learnKey]*learnEntry
}

type learnKey struct {
	scope capacity.Scope
	kind  string
}

// learnEntry is what a worker read of one (scope, kind); its lock makes
// concurrent calls share one read.
type learnEntry struct {
	mu sync.Mutex
	l  learn.Learned
	at time.Time // when read (or tried); zero: never
}

func newLearning(o Options) *learning {
	l := &learning{opts: o.Learning, clock: o.Clock, cache: map[learnKey]*learnEntry{}}
	if ls, ok := o.Store.(capacity.Learner); ok && !o.Learning.Disabled {
		l.store = ls
	}
	return l
}

// kindOf returns the kind of call g learns as: its UsageKey, else its
// activity type; "" (nothing learned) for a name ValidateKind refuses.
func (l *learning) kindOf(ctx context.Context, g *gatedCall) string {
	if l.store == nil {
		return ""
	}
	kind := g.call.UsageKey
	if kind == "" {
		kind = g.info.ActivityType.Name
	}
	if err := capacity.ValidateKind(kind); err != nil {
		if g.call.UsageKey != "" {
			g.logger(ctx).Warn("tollgate: Call.UsageKey cannot name a kind of call; nothing is learned from this call", "scope", g.scope.Key(), "error", err)
		} else {
			g.logger(ctx).Debug("tollgate: the activity type cannot name a kind of call; set Call.UsageKey", "scope", g.scope.Key(), "error", err)
		}
		return ""
	}
	return kind
}

// demand returns the demand g is charged: its own, with its estimated input
// calibrated and its output reserved from what its kind learned.
func (l *learning) demand(ctx context.Context, g *gatedCall) capacity.Demand {
	d := g.call.Demand
	settles := settlesOutput(g.profile)
	if g.kind == "" || !d.InputEstimated && !(settles && d.OutputTokens <= 0 && d.MaxTokens > 0) {
		return d // nothing to learn from for this call: no read
	}
	learned, ok := l.learned(ctx, g)
	if !ok {
		return d
	}
	return learnedDemand(d, learned, l.opts, settles)
}

func settlesOutput(p accounting.Profile) bool {
	s, ok := p.(accounting.OutputSettler)
	return ok && s.SettlesOutput()
}

// learnedDemand returns d with what was learned applied (see LearnOptions).
func learnedDemand(d capacity.Demand, l learn.Learned, o LearnOptions, settlesOutput bool) capacity.Demand {
	minN := float64(o.MinSamples)
	if d.InputEstimated && l.InputRatio.Count() >= minN {
		if r, ok := l.InputRatio.Quantile(o.Quantile); ok {
			d.InputTokens = learn.CalibrateInput(d.InputTokens, r)
			d.CachedInputTokens = learn.CalibrateInput(d.CachedInputTokens, r)
		}
	}
	if settlesOutput && d.OutputTokens <= 0 && d.MaxTokens > 0 && l.Output.Count() >= minN {
		if q, ok := l.Output.Quantile(o.Quantile); ok {
			d.OutputTokens = max(1, min(d.MaxTokens, int64(math.Ceil(min(q, math.MaxInt64/2)))))
		}
	}
	return d
}

// learned returns what g's kind learned, read at most every Refresh per
// worker; false if nothing could be read yet.
func (l *learning) learned(ctx context.Context, g *gatedCall) (learn.Learned, bool) {
	k := learnKey{g.learnScope(), g.kind}
	l.mu.Lock()
	e := l.cache[k]
	if e == nil {
		e = &learnEntry{}
		l.cache[k] = e
	}
	l.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	now := l.clock.Now()
	if !e.at.IsZero() && l.opts.Refresh > 0 && now.Sub(e.at) < l.opts.Refresh {
		return e.l, true
	}
	rctx, cancel := context.WithTimeout(ctx, learnReadTimeout)
	defer cancel()
	learned, err := l.store.Learned(rctx, g.learnScope(), g.kind)
	wasRead := !e.at.IsZero()
	e.at = now // a failed read is not tried again before Refresh either
	if err != nil {
		logFailure(g.logger(ctx), "tollgate: reading what was learned failed; reserving as before", err, "scope", g.learnScope().Key(), "kind", g.kind)
		return e.l, wasRead
	}
	e.l = learned
	return learned, true
}

// record teaches g's kind the usage of its call, which settled; a failure
// is logged, never returned.
func (l *learning) record(ctx context.Context, g *gatedCall, u capacity.Usage) {
	if l.store == nil || g.kind == "" {
		return
	}
	d := g.call.Demand // as estimated, not as calibrated: the ratio is of the estimate
	s := learn.Sample{
		OutputTokens: u.OutputTokens + u.ExtraReasoningTokens,
		MaxTokens:    d.MaxTokens,
		InputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
	}
	if d.InputEstimated {
		s.InputEstimate = d.InputTokens + d.CachedInputTokens
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.SettleTimeout)
	defer cancel()
	if err := l.store.Learn(ctx, g.learnScope(), g.kind, s); err != nil {
		logFailure(g.logger(ctx), "tollgate: learning from a settled call failed", err, "scope", g.learnScope().Key(), "kind", g.kind)
	}
}

// logFailure logs a learning failure: at debug level when the store is
// unreachable (the store and the admission path already say so), else as a
// warning.
func logFailure(l log.Logger, msg string, err error, kv ...any) {
	kv = append(kv, "error", err)
	if errors.Is(err, capacity.ErrStoreUnavailable) {
		l.Debug(msg, kv...)
		return
	}
	l.Warn(msg, kv...)
}
