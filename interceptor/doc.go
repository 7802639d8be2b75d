// Package interceptor is the Temporal worker plugin that gates every LLM
// model-call activity on shared capacity.
//
//	plugin, err := interceptor.NewPlugin(interceptor.Options{
//		Store:  store, // capacity.NewMemoryStore(...) or a redisstore.Store
//		Limits: func(s capacity.Scope) (capacity.Limits, bool) { l, ok := limits[s.LimitGroup]; return l, ok },
//	})
//	w := worker.New(c, "llm", worker.Options{Plugins: []worker.Plugin{plugin}})
//
// # Which activities are gated
//
// An activity is a model call when its first argument implements ModelCall
// (or when Options.Resolve says so). TollgateCall describes the call: its
// provider, model, credential scope name (never a key), estimated Demand and
// Class. Its result reports usage and response headers by implementing
// ModelResult, or the activity calls SetReport — on failure too, and with
// NotSent when the request never left, so the reservation is refunded. A
// failed call returns the provider SDK's error as it is: the gate
// classifies it with Options.Classifier, which reads an SDK's typed errors
// once the worker imports that SDK's reader (errors/openaierr,
// errors/anthropicerr, errors/geminierr; the activities package imports the
// first two).
//
// # Class
//
// A call's class is stated once, by the workflow: workflows.CallModel (or
// WithClass, for workflows that schedule activities themselves) puts it in
// the workflow context, the plugin on the workflow's worker writes it into
// each activity's ClassHeader, and the gate ranks the call by it. A
// request's own Call.Class is then redundant: left zero (Standard) it takes
// the workflow's class; set to a different class, the call fails
// non-retryable with tollgate.Misconfigured. With no class in the header
// (no WithClass, or no plugin on the workflow's worker) the gate uses
// Call.Class, Standard by default. The Temporal priority CallModel also sets
// orders task queues only; the gate does not read it. See
// docs/decisions/0003-class-in-a-header.md.
//
// Options.Classes replaces the built-in classes with user-defined ones
// (capacity.ClassDef); a call then names its class (WithClassName,
// workflows.Options.ClassName, or Call.ClassName), and the gate sends the
// store the class's rule, aged on the worker's clock. An unknown name is
// Misconfigured.
//
// # Fairness keys
//
// Inside a class, a call's fairness key (a tenant, a customer: a name, never
// a secret) places it in the store's weighted fair queuing: while several
// keys wait on a scope, each is granted tokens in proportion to its weight
// in Options.Fairness, which may also cap a key at a share of the scope
// (the call waits) or at tokens per day (the call fails non-retryable with
// tollgate.QuotaExhausted, reason key_quota; the scope is not blocked). The
// key is stated like the class: WithFairnessKey (workflows.Options.FairnessKey)
// writes the FairnessKeyHeader, which takes the place of Call.FairnessKey;
// a differing Call.FairnessKey is Misconfigured.
//
// # Key pools
//
// Options.Pools names pools of credentials, each member its own scope. A call
// whose Call.Credential names a pool goes, at each attempt, on the member
// with room now (the least used), else on the one with the shortest wait,
// read from the store; the activity gets the member's name from Credential.
// A member's 429, refused key, missing access or spent quota blocks the
// member (a refused or unpaid key on every model of its credential) and
// sends the call to another member at once; with every member out, the call
// fails non-retryable with reason pool_exhausted, naming each.
//
// # What the gate does
//
// Before the call it reserves the call's charges in every dimension of its
// scope. If the budget has room later, the activity waits in-process
// (heartbeating) up to Options.MaxLocalWait; a longer wait returns a benign,
// retryable tollgate.CapacityWait error whose NextRetryDelay is the time the
// store booked for the call, so the worker slot is freed and the retry is
// granted on arrival. After the call it settles the reservation with the
// actual usage and corrects the budget from the rate-limit headers,
// heartbeating until the store has answered; once the provider has answered,
// the activity returns the answer after at most Options.SettleTimeout even if
// the store stalls, so an answered call is never run again. A 429
// blocks the scope for every worker until retry-after and returns
// tollgate.RateLimited with NextRetryDelay; an exhausted quota blocks the
// scope and fails non-retryable (tollgate.QuotaExhausted, with the reset time
// and scope in its Details); a refused credential blocks every scope on it
// until a single half-open probe succeeds; clustered overloads open a
// per-scope breaker. See the errors package for the types and Details.
//
// Each call that settles with usage also teaches the store (a
// capacity.Learner) its scope and kind's output and input: Anthropic calls
// then reserve their kind's learned p95 output instead of max_tokens, and
// estimated inputs are calibrated (see LearnOptions; `tollgate advise`
// shows what was learned).
//
// With Options.Ledger, each call that settles with usage is recorded once in
// the store's cost ledger (ledger.Ledger) by day, scope, tenant (fairness
// key) and workflow type, with its tokens and their cost at Options.Prices;
// Options.SpendCaps then refuses, before admission, a call whose worst case
// would take its tenant or connection past its cap for the day
// (tollgate.QuotaExhausted, reason spend_cap, reset at the day window's
// end). A failed record is logged and counted in tollgate.ledger.failures,
// a refusal in tollgate.spend.refused (tags: scope, and op or cap).
//
// # Required activity options
//
// Every delayed retry costs a Temporal attempt, and the server checks
// MaximumAttempts before it applies NextRetryDelay. A model-call activity
// therefore needs RetryPolicy.MaximumAttempts 0 (unlimited; or at least
// Options.MinMaximumAttempts) and a ScheduleToCloseTimeout that bounds it;
// tollgate counts real failures itself (Options.MaxFailures) in the store,
// and never counts rate-limit waits. Other settings are refused with a
// non-retryable tollgate.Misconfigured error. A call that cannot be admitted
// before its schedule-to-close deadline fails non-retryable with
// tollgate.DeadlineUnmeetable, and a call is never dispatched past its
// deadline. Local activities are gated without local waits (they have no
// heartbeats and retry in the worker).
//
// # Composition
//
// The plugin appends its interceptor to the worker's, so it runs innermost.
// Temporal honours NextRetryDelay and NonRetryable only when the error an
// activity returns is itself a *temporal.ApplicationError: an outer
// interceptor that wraps errors with %w silently drops both. A plugin set on
// both a client and its worker is applied twice; it gates each call once.
// New returns the bare interceptor for users who compose by hand: put it last.
//
// # Telemetry
//
// Metrics go to the worker's Temporal metrics handler
// (client.Options.MetricsHandler), the exporter that already carries
// Temporal's own metrics; Options.MeterProvider overrides it. Counters
// tollgate.admissions, tollgate.provider.errors, tollgate.tokens.reserved,
// tollgate.tokens.settled, tollgate.lease.lost, tollgate.settle.failures,
// tollgate.deadline.missed and tollgate.calls.ungated (a model call that
// ran without the gate: its input's TollgateCall has a pointer receiver, or
// the workflow scheduled it as a model call but its input is no ModelCall;
// also logged once per activity type) and the timer tollgate.admission.wait
// carry the activity's tags plus
// scope, class (its name), dimension, result, reason or attempt; never
// prompts or API keys. The timer tollgate.queue.age (from a call's first
// scheduling to its admission) and the counters tollgate.tokens.granted
// (tokens charged at admission) and tollgate.tokens.used (tokens finally
// charged, at settle) carry scope, class and fairness_key ("none" without
// a key): a series per key a worker serves, so fairness keys must be
// names of bounded number (tenants, tiers), never secrets or ids per call.
// The gauges tollgate.budget.level (scope, dimension) and tollgate.inflight
// (scope) carry the client's tags: the plugin reads each gated scope's
// budget every Options.MetricsInterval while a worker it is set on runs,
// and stops when the worker stops. The gauges tollgate.provider.remaining
// and tollgate.provider.limit (scope, dimension; the client's tags) are
// what the provider itself reported, in rate-limit headers or a 429: the
// least remaining reported in the current minute of Options.Clock, and the
// last limit reported. docs/operations.md lists every metric and the
// alerts built on them. The tollgate.admit span nests under the span of
// Temporal's OpenTelemetry tracing interceptor.
package interceptor
