package interceptor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/spend"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// Defaults of Options.
const (
	DefaultMaxLocalWait        = time.Minute
	DefaultLeaseTTL            = time.Minute
	DefaultMinCallTime         = 5 * time.Second
	DefaultMaxFailures         = 5
	DefaultMinMaximumAttempts  = 1000
	DefaultCredentialBlock     = time.Minute
	DefaultHalfOpen            = 30 * time.Second
	DefaultBreakerThreshold    = 5
	DefaultBreakerWindow       = 10 * time.Second
	DefaultBreakerCooldown     = 15 * time.Second
	DefaultQuotaBlockUnknown   = time.Hour
	DefaultMinRetryDelay       = 100 * time.Millisecond
	DefaultSettleTimeout       = 3 * time.Second
	defaultFailureCountHorizon = 24 * time.Hour
)

// Options configures the gate. Store is required; every other field has a
// documented default.
type Options struct {
	// Store holds the shared budgets: capacity.NewMemoryStore for one
	// process, a redisstore.Store for many workers. Required.
	Store capacity.Store
	// Limits returns the limits of a quota scope; ok is false for a scope
	// the worker has no limits for, which fails the call non-retryable
	// (tollgate.Misconfigured). If nil, or where the limits it returns
	// state no per-minute or per-day rate, a scope runs on the limits its
	// provider reports in its answers (OpenAI, Anthropic, and services
	// using their headers): one call in flight until the first answer,
	// then the reported limits, followed when they change (logged, and
	// shown by tollgate status). Gemini reports none: its scopes need
	// limits here.
	Limits func(capacity.Scope) (l capacity.Limits, ok bool)
	// Resolve says whether an activity is a model call and describes it. If
	// nil, an activity is a model call when its first argument implements
	// ModelCall.
	Resolve func(ctx context.Context, info activity.Info, args []any) (Call, bool, error)
	// LimitGroups maps model names to limit groups. The zero value strips
	// snapshot date suffixes.
	LimitGroups capacity.LimitGroups
	// Profiles overrides the accounting profile per provider. Providers not
	// in it use accounting.ProfileFor.
	Profiles map[capacity.Provider]accounting.Profile
	// Classifier classifies provider failures. The zero value uses its
	// documented defaults.
	Classifier tgerrors.Classifier
	// Classes defines the classes calls may name (capacity.ClassDef: name,
	// rank, weight, floor, aging). If nil, the built-in classes standard,
	// interactive and bulk, ranked and floored by each scope's Limits
	// (StandardFloor, BulkFloor, AgingAfter). When set, those Limits fields
	// no longer apply: a call's class is found by name (the ClassHeader
	// that WithClass, WithClassName and workflows.CallModel write, else
	// Call.ClassName, else the name of Call.Class), and the gate gives the
	// store the class's rule (capacity.ClassSet.Rule), aged on the
	// worker's clock from the time the call was first scheduled. A name
	// not defined fails the call non-retryable with
	// tollgate.Misconfigured; a call that names no class is of the class
	// named "standard" if defined, else of the first. A class is stored as
	// its index, so every worker sharing a store needs the same Classes in
	// the same order; capacity.DefaultClasses(limits) returns the built-in
	// classes at their indexes, to extend.
	Classes []capacity.ClassDef
	// Fairness is the policy of each fairness key (Call.FairnessKey,
	// WithFairnessKey): its weight against the other keys of its class
	// while they wait, and its caps (capacity.Fairness). A key not in it
	// has weight 1 and no caps. The map's keys are the fairness keys; a
	// value's Key is ignored.
	Fairness map[string]capacity.Fairness
	// FairStart is how long the first calls with a fairness key gather on
	// a scope at rest before any is granted (capacity.Request.FairStart),
	// so tenants whose batches start together share the first burst by
	// weight instead of the first to reach the gate taking it. Each gathering
	// delays those first calls by up to FairStart. Zero (the default):
	// none. At most capacity.MaxFairStart.
	FairStart time.Duration
	// Pools names key pools: several credentials (of one provider, serving
	// the same models) that calls share, each its own quota scope. The
	// map's keys are pool names, its values the member credential names. A
	// call whose Call.Credential names a pool goes, at each attempt, on the
	// member with room now (else the one with the shortest wait), the least
	// used first, read from the shared store, so every worker on it
	// chooses alike; a member whose credential was refused, that has no
	// access to the model, or that is out of quota is skipped until its
	// block ends, and a 429 cools only its member. The activity learns the
	// member through Credential(ctx, name) (the activities package reads
	// it). When every member is out, the call fails non-retryable with
	// reason pool_exhausted, naming each member and why. A name may not be
	// both a pool and a member; names appear in scopes, so never secrets.
	// Nil: no pools.
	Pools map[string][]string

	// MaxLocalWait is the longest an activity waits for capacity in-process
	// (heartbeating) before it returns a delayed retry that frees the
	// worker slot. If zero, DefaultMaxLocalWait; negative means never wait
	// locally.
	MaxLocalWait time.Duration
	// LeaseTTL is the lifetime of a reservation, renewed while the call
	// runs; a crashed worker's slots come back after it. If zero,
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MinCallTime is the time an attempt must have left, after admission,
	// for the call itself; a call that cannot be admitted that early is
	// refused. If zero, DefaultMinCallTime.
	MinCallTime time.Duration
	// SettleTimeout bounds the store work after a provider answered
	// (settle, rate-limit headers, lifting a probe's block); the attempt
	// heartbeats meanwhile. Past it the activity returns the answer anyway,
	// so a store stall never runs an answered call again: the settle goes
	// on in the background (a lease it never settles expires after
	// LeaseTTL) and tollgate.settle.failures counts it. It is kept under
	// half the attempt's time left and, where the gate may not heartbeat,
	// half the heartbeat timeout. If zero, DefaultSettleTimeout.
	SettleTimeout time.Duration
	// MinMaximumAttempts is the smallest RetryPolicy.MaximumAttempts a
	// model-call activity may have other than 0 (unlimited): every
	// rate-limit wait costs an attempt, so a small cap turns waiting into
	// failing. If zero, DefaultMinMaximumAttempts.
	MinMaximumAttempts int32
	// MaxFailures is how many real failures (not rate-limit waits) a call
	// may have before it fails non-retryable. If zero, DefaultMaxFailures.
	MaxFailures int
	// CredentialBlock is how long a refused credential blocks every scope
	// on it before a single probe is let through. If zero,
	// DefaultCredentialBlock.
	CredentialBlock time.Duration
	// HalfOpen is how long a probe holds the others off. If zero,
	// DefaultHalfOpen.
	HalfOpen time.Duration
	// BreakerThreshold overloads (529/503) on a scope, each within
	// BreakerWindow of the one before, open its breaker for BreakerCooldown
	// (then a single probe tests the provider). If zero, the defaults.
	BreakerThreshold int
	BreakerWindow    time.Duration
	BreakerCooldown  time.Duration
	// QuotaBlockUnknown is how long an exhausted quota with no reset time
	// blocks its scope. If zero, DefaultQuotaBlockUnknown.
	QuotaBlockUnknown time.Duration
	// Rand returns a uniform number in [0, 1) for jitter. If nil,
	// math/rand/v2.Float64.
	Rand func() float64
	// Clock is the worker's clock (local waits, deadlines, lease
	// keepalive). If nil, capacity.SystemClock. The store keeps its own
	// clock (MemoryOptions.Clock, or Redis TIME).
	Clock capacity.Clock
	// Logger logs admission decisions (never prompts or keys). If nil, the
	// activity's logger.
	Logger log.Logger
	// MeterProvider, if set, receives tollgate's metrics instead of the
	// worker's Temporal metrics handler: an override for keeping them
	// apart. If nil (the default), they go where Temporal's own metrics go,
	// the client.MetricsHandler of the worker's client
	// (client.Options.MetricsHandler: tally, Prometheus, OpenTelemetry):
	// per-call metrics with the tags of the activity's metrics, the budget
	// gauges with the client's.
	MeterProvider metric.MeterProvider
	// MetricsInterval is how often the plugin reads the budget of each
	// scope it gated (one Store.Snapshot) for the tollgate.budget.level and
	// tollgate.inflight gauges, while a worker it is set on runs. If zero,
	// DefaultMetricsInterval.
	MetricsInterval time.Duration
	// Learning configures what the gate learns from settled calls to size
	// reservations (see LearnOptions). The zero value learns, where the
	// store implements capacity.Learner, with the documented defaults.
	Learning LearnOptions
	// Ledger, if set, records the tokens and cost of every call that
	// settles with usage, per day, scope, tenant (fairness key) and
	// workflow type, once per lease (ledger.Ledger: the Redis store is one,
	// pass it; in one process, ledger.NewMemory). A failed record is logged and
	// counted (tollgate.ledger.failures), never fails the call. If nil, no
	// ledger: nothing is recorded and SpendCaps cannot be set.
	Ledger ledger.Ledger
	// Prices costs the calls the Ledger records, per provider and model
	// (spend.Prices, per million tokens). A call whose model has no
	// price is recorded with its tokens, at cost 0, and counted as
	// unpriced. If nil, every call is unpriced.
	Prices spend.Prices
	// SpendCaps caps what a tenant (fairness key) and a connection
	// (credential) may spend per day, in the Prices' unit: a call whose
	// worst case would pass a cap fails non-retryable with
	// tollgate.QuotaExhausted, reason spend_cap, ResetAt the end of the
	// scope's day window, before it reaches the store or the provider. Caps
	// are checked against the Ledger's settled spend plus the worst case of
	// this worker's unrecorded calls, so calls in flight on other workers
	// may together pass a cap by what they cost; a ledger that cannot be
	// read holds no call back. Each capped call costs one read of the
	// store. Setting a cap needs Ledger and Prices. The zero value caps
	// nothing.
	SpendCaps spend.Caps
	// TracerProvider receives the tollgate.admit spans. If nil, the
	// provider of the span the activity runs in (that of Temporal's
	// OpenTelemetry tracing interceptor), else otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// classes is Classes validated; nil for the built-in classes.
	classes *capacity.ClassSet
	// reports is what providers reported of the limits of scopes that run
	// on them (reportedLimits); set by withDefaults.
	reports *reportedLimits
}

// ErrInvalidOptions is returned (wrapped) for options that cannot work.
var ErrInvalidOptions = errors.New("tollgate: invalid interceptor options")

func (o Options) withDefaults() (Options, error) {
	if o.Store == nil {
		return o, fmt.Errorf("%w: Store is required", ErrInvalidOptions)
	}
	for name, d := range map[string]time.Duration{
		"LeaseTTL": o.LeaseTTL, "MinCallTime": o.MinCallTime, "CredentialBlock": o.CredentialBlock,
		"HalfOpen": o.HalfOpen, "BreakerWindow": o.BreakerWindow, "BreakerCooldown": o.BreakerCooldown,
		"QuotaBlockUnknown": o.QuotaBlockUnknown, "SettleTimeout": o.SettleTimeout,
	} {
		if d < 0 {
			return o, fmt.Errorf("%w: %s is %v; want >= 0 (0 means the default)", ErrInvalidOptions, name, d)
		}
	}
	if o.MaxFailures < 0 || o.BreakerThreshold < 0 || o.MinMaximumAttempts < 0 {
		return o, fmt.Errorf("%w: MaxFailures, BreakerThreshold and MinMaximumAttempts must be >= 0", ErrInvalidOptions)
	}
	if o.LeaseTTL != 0 && o.LeaseTTL < 3*time.Second {
		return o, fmt.Errorf("%w: LeaseTTL is %v; want >= 3s (it is renewed every third)", ErrInvalidOptions, o.LeaseTTL)
	}
	if o.FairStart < 0 || o.FairStart > capacity.MaxFairStart {
		return o, fmt.Errorf("%w: FairStart is %v; want 0 to %v", ErrInvalidOptions, o.FairStart, capacity.MaxFairStart)
	}
	var err error
	if o.Pools, err = checkPools(o.Pools); err != nil {
		return o, err
	}
	for key, f := range o.Fairness {
		f.Key = key
		if err := f.Validate(); err != nil {
			return o, fmt.Errorf("%w: Fairness: %v", ErrInvalidOptions, err)
		}
	}
	if o.Classes != nil {
		if o.classes, err = capacity.NewClassSet(o.Classes...); err != nil {
			return o, fmt.Errorf("%w: Classes: %w", ErrInvalidOptions, err)
		}
	}
	if o.Learning, err = o.Learning.withDefaults(); err != nil {
		return o, err
	}
	if err := o.validateLedger(); err != nil {
		return o, err
	}
	if o.Resolve == nil {
		o.Resolve = defaultResolve
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.MaxLocalWait, DefaultMaxLocalWait)
	def(&o.LeaseTTL, DefaultLeaseTTL)
	def(&o.MinCallTime, DefaultMinCallTime)
	def(&o.CredentialBlock, DefaultCredentialBlock)
	def(&o.HalfOpen, DefaultHalfOpen)
	def(&o.BreakerWindow, DefaultBreakerWindow)
	def(&o.BreakerCooldown, DefaultBreakerCooldown)
	def(&o.QuotaBlockUnknown, DefaultQuotaBlockUnknown)
	def(&o.SettleTimeout, DefaultSettleTimeout)
	if o.MinMaximumAttempts == 0 {
		o.MinMaximumAttempts = DefaultMinMaximumAttempts
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.BreakerThreshold == 0 {
		o.BreakerThreshold = DefaultBreakerThreshold
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Clock == nil {
		o.Clock = capacity.SystemClock{}
	}
	o.reports = &reportedLimits{}
	return o, nil
}

// scopeLimits returns the limits a call on scope runs on as of now: those
// Limits gives, or the provider's reported ones where they state no rate
// (reportedLimits), with p's day boundary. follows reports the latter. The
// error says what is misconfigured.
func (o *Options) scopeLimits(scope capacity.Scope, p accounting.Profile, now time.Time) (l capacity.Limits, follows bool, err error) {
	if o.Limits != nil {
		var ok bool
		if l, ok = o.Limits(scope); !ok {
			return l, false, errors.New("no limits configured for scope " + scope.Key())
		}
	}
	if err := l.Validate(); err != nil {
		return l, false, err
	}
	follows = !rateLimited(l)
	if l, err = o.reports.limits(scope, l, now); err != nil {
		return l, false, err
	}
	return accounting.ProfileDayReset(l, p), follows, nil
}

func (o Options) profile(p capacity.Provider) (accounting.Profile, bool) {
	if pr, ok := o.Profiles[p]; ok && pr != nil {
		return pr, true
	}
	return accounting.ProfileFor(p)
}
