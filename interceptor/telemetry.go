package interceptor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// instrumentationName names tollgate's tracer and the meter of
// Options.MeterProvider.
const instrumentationName = "github.com/tollgate-dev/tollgate"

// DefaultMetricsInterval is the default of Options.MetricsInterval.
const DefaultMetricsInterval = 10 * time.Second

// gaugeStopTimeout bounds the last gauge update a stopping worker waits for.
const gaugeStopTimeout = time.Second

// Metric names. Their tags are scope keys (names), class names, fairness
// keys (names, never secrets; "none" for a call without one), dimensions,
// results and reasons: never prompts or API keys. The fairness_key tag makes
// a series per scope, class and key a worker served: as many as its
// tenants, so a deployment with thousands of keys should aggregate it away
// (or name keys by tenant tier).
const (
	metricAdmissions     = "tollgate.admissions"      // counter: scope, class, result
	metricAdmissionWait  = "tollgate.admission.wait"  // timer: scope, class
	metricQueueAge       = "tollgate.queue.age"       // timer: scope, class, fairness_key
	metricTokensGranted  = "tollgate.tokens.granted"  // counter: scope, class, fairness_key
	metricTokensUsed     = "tollgate.tokens.used"     // counter: scope, class, fairness_key
	metricProviderErrors = "tollgate.provider.errors" // counter: scope, class, dimension, attempt
	metricReserved       = "tollgate.tokens.reserved" // counter: scope, dimension
	metricSettled        = "tollgate.tokens.settled"  // counter: scope, dimension
	metricLeaseLost      = "tollgate.lease.lost"      // counter: scope
	metricSettleFailures = "tollgate.settle.failures" // counter: scope, reason (error, timeout)
	metricDeadlineMissed = "tollgate.deadline.missed" // counter: scope, class
	metricCallsUngated   = "tollgate.calls.ungated"   // counter: activity's tags
	metricBudgetLevel    = "tollgate.budget.level"    // gauge: scope, dimension
	metricInFlight       = "tollgate.inflight"        // gauge: scope
	// The provider's own report (rate-limit headers, a 429's): the least
	// remaining it reported in the current minute, and the limit it last
	// reported, per dimension.
	metricProviderRemaining = "tollgate.provider.remaining" // gauge: scope, dimension
	metricProviderLimit     = "tollgate.provider.limit"     // gauge: scope, dimension
)

// telemetry records tollgate's metrics through the worker's Temporal
// metrics handler (or Options.MeterProvider) and its admission spans.
//
// Per-call metrics go to the handler of the call's activity. The budget
// gauges read the store (Store.Snapshot, one per scope gated during the
// run) every MetricsInterval between the start of the first worker the
// plugin runs on and the stop of the last, and once more at that stop.
type telemetry struct {
	tracer   trace.Tracer          // Options.TracerProvider's; nil: the parent span's provider, else the global one
	handler  client.MetricsHandler // Options.MeterProvider's; nil: the activity's
	interval time.Duration
	store    capacity.Store

	// scopes maps each scope gated during the run to the handler its
	// gauges go to.
	scopes sync.Map // capacity.Scope → client.MetricsHandler

	mu      sync.Mutex
	workers map[string]struct{} // instance keys of the running workers
	cancel  context.CancelFunc  // ends the gauge loop
	done    chan struct{}       // closed when the gauge loop has ended

	// reportMu guards reports: per scope and dimension, what the provider
	// reported in the current minute (tollgate.provider.remaining and
	// .limit). Its gauges are updated under reportMu, so a report never
	// overwrites a lower one of the same minute.
	reportMu sync.Mutex
	reports  map[dimReportKey]*dimReport
}

// dimReportKey names the provider's reports on one dimension of a scope.
type dimReportKey struct {
	scope capacity.Scope
	dim   capacity.Dimension
}

// dimReport is what a provider reported on one dimension of a scope: the
// least remaining in the minute starting at minute, and the last limit.
type dimReport struct {
	minute       time.Time
	least        int64
	hasRemaining bool
	limit        int64
}

func newTelemetry(o Options) (*telemetry, error) {
	if o.MetricsInterval < 0 {
		return nil, fmt.Errorf("%w: MetricsInterval is %v; want >= 0 (0 means the default)", ErrInvalidOptions, o.MetricsInterval)
	}
	t := &telemetry{interval: o.MetricsInterval, store: o.Store, workers: map[string]struct{}{}, reports: map[dimReportKey]*dimReport{}}
	if t.interval == 0 {
		t.interval = DefaultMetricsInterval
	}
	if o.TracerProvider != nil {
		t.tracer = o.TracerProvider.Tracer(instrumentationName)
	}
	if o.MeterProvider != nil {
		t.handler = opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{
			Meter:                o.MeterProvider.Meter(instrumentationName),
			OnError:              func(error) {}, // only invalid names fail; the handler then records nothing
			UseMonotonicCounters: true,
		})
	}
	return t, nil
}

// metrics returns the handler of a call's metrics: Options.MeterProvider's,
// else the activity's (the worker's handler, tagged with namespace, task
// queue, workflow and activity type).
func (t *telemetry) metrics(ctx context.Context) client.MetricsHandler {
	if t.handler != nil {
		return t.handler
	}
	if !activity.IsActivity(ctx) {
		return client.MetricsNopHandler
	}
	return activity.GetMetricsHandler(ctx)
}

// tracerFor returns the tracer of a call's span: Options.TracerProvider's,
// else the provider of the span the call runs in (Temporal's tracing
// interceptor's), else the global provider.
func (t *telemetry) tracerFor(ctx context.Context) trace.Tracer {
	if t.tracer != nil {
		return t.tracer
	}
	if span := trace.SpanFromContext(ctx); span.SpanContext().IsValid() {
		return span.TracerProvider().Tracer(instrumentationName)
	}
	return otel.GetTracerProvider().Tracer(instrumentationName)
}

// track remembers a scope for the budget gauges, with the handler they go
// to: the activity's with its workflow, activity, task queue and worker
// tags reset to "none", as on Temporal's client-level metrics (a budget is
// the same for every worker and activity sharing the store).
func (t *telemetry) track(ctx context.Context, sc capacity.Scope) {
	if _, ok := t.scopes.Load(sc); ok {
		return
	}
	h := t.metrics(ctx)
	if t.handler == nil {
		h = h.WithTags(map[string]string{"workflow_type": "none", "activity_type": "none", "task_queue": "none", "worker_type": "none"})
	}
	t.scopes.LoadOrStore(sc, h)
}

// gauges returns the handler of sc's gauges (see track).
func (t *telemetry) gauges(ctx context.Context, sc capacity.Scope) client.MetricsHandler {
	t.track(ctx, sc)
	h, _ := t.scopes.Load(sc)
	if h == nil { // forgotten by a stopping worker since
		return t.metrics(ctx)
	}
	return h.(client.MetricsHandler)
}

// observed records what a provider reported about sc at now (the worker's
// clock): per reported dimension, tollgate.provider.remaining is the least
// remaining reported since the start of now's minute (a report of a new
// minute starts it again), and tollgate.provider.limit the limit last
// reported. Their ratio is how close the quota is to its ceiling, by the
// provider's own count.
func (t *telemetry) observed(ctx context.Context, sc capacity.Scope, obs capacity.Observation, now time.Time) {
	var h client.MetricsHandler
	minute := now.Truncate(time.Minute)
	for i, o := range obs.Dims {
		if !o.HasRemaining && !o.HasLimit {
			continue
		}
		if h == nil {
			h = t.gauges(ctx, sc)
		}
		d := capacity.Dimension(i)
		hd := h.WithTags(map[string]string{"scope": sc.Key(), "dimension": d.String()})
		t.reportMu.Lock()
		r := t.reports[dimReportKey{sc, d}]
		if r == nil {
			r = &dimReport{}
			t.reports[dimReportKey{sc, d}] = r
		}
		if o.HasRemaining {
			if !r.hasRemaining || !r.minute.Equal(minute) || o.Remaining < r.least {
				r.least = o.Remaining
			}
			r.minute, r.hasRemaining = minute, true
			hd.Gauge(metricProviderRemaining).Update(float64(max(r.least, 0)))
		}
		if o.HasLimit {
			r.limit = o.Limit
			hd.Gauge(metricProviderLimit).Update(float64(r.limit))
		}
		t.reportMu.Unlock()
	}
}

// workerStarted starts the gauge loop when the first worker starts.
func (t *telemetry) workerStarted(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.workers[key]; ok {
		return
	}
	t.workers[key] = struct{}{}
	if len(t.workers) > 1 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go t.gaugeLoop(ctx, t.done)
}

// workerStopped ends the gauge loop when the last worker stops: it updates
// the gauges once more (within gaugeStopTimeout), forgets the scopes and
// returns when the loop has ended. Keys it does not know (replayers) are
// ignored.
func (t *telemetry) workerStopped(key string) {
	t.mu.Lock()
	if _, ok := t.workers[key]; !ok {
		t.mu.Unlock()
		return
	}
	delete(t.workers, key)
	if len(t.workers) > 0 {
		t.mu.Unlock()
		return
	}
	cancel, done := t.cancel, t.done
	t.cancel, t.done = nil, nil
	t.mu.Unlock()
	cancel()
	<-done
}

// gaugeLoop updates the budget gauges every interval until ctx ends, then
// a last time.
func (t *telemetry) gaugeLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.Background(), min(t.interval, gaugeStopTimeout))
			t.updateGauges(last)
			cancel()
			t.scopes.Clear()
			t.reportMu.Lock()
			clear(t.reports)
			t.reportMu.Unlock()
			return
		case <-tick.C:
			c, cancel := context.WithTimeout(ctx, t.interval)
			t.updateGauges(c)
			cancel()
		}
	}
}

// updateGauges reads the budget of every tracked scope and updates
// tollgate.budget.level (per limited dimension) and tollgate.inflight. A
// scope whose snapshot fails is skipped until the next update.
func (t *telemetry) updateGauges(ctx context.Context) {
	t.scopes.Range(func(k, v any) bool {
		if ctx.Err() != nil {
			return false
		}
		sc, h := k.(capacity.Scope), v.(client.MetricsHandler)
		snap, err := readSummary(ctx, t.store, sc, "")
		if err != nil {
			return true
		}
		for d := capacity.Dimension(0); int(d) < capacity.NumDimensions; d++ {
			if snap.Budget[d].Limited && d != capacity.InFlight {
				h.WithTags(map[string]string{"scope": sc.Key(), "dimension": d.String()}).Gauge(metricBudgetLevel).Update(snap.Level[d])
			}
		}
		h.WithTags(map[string]string{"scope": sc.Key()}).Gauge(metricInFlight).Update(float64(snap.InFlight))
		return true
	})
}

func (t *telemetry) admitted(ctx context.Context, g *gatedCall, res capacity.Reservation, err error, waited time.Duration) {
	t.track(ctx, g.scope)
	result := "granted"
	switch {
	case err != nil && !res.Granted && res.Reason != 0:
		result = "denied_" + res.Reason.String()
	case err != nil:
		result = "error"
	}
	h := t.metrics(ctx)
	h.WithTags(map[string]string{"scope": g.scope.Key(), "class": g.call.ClassName, "result": result}).Counter(metricAdmissions).Inc(1)
	h.WithTags(map[string]string{"scope": g.scope.Key(), "class": g.call.ClassName}).Timer(metricAdmissionWait).Record(waited)
	if err == nil && res.Granted {
		hf := t.fair(h, g)
		if !g.info.ScheduledTime.IsZero() {
			hf.Timer(metricQueueAge).Record(max(g.opts.Clock.Now().Sub(g.info.ScheduledTime), 0))
		}
		hf.Counter(metricTokensGranted).Inc(tokensOf(res.Lease.Charges))
	}
	_, span := t.tracerFor(ctx).Start(ctx, "tollgate.admit",
		trace.WithTimestamp(time.Now().Add(-waited)),
		trace.WithAttributes(
			attribute.String("tollgate.scope", g.scope.Key()),
			attribute.String("tollgate.class", g.call.ClassName),
			attribute.String("tollgate.fairness_key", g.call.FairnessKey),
			attribute.String("tollgate.result", result),
			attribute.Int("tollgate.attempt", int(g.info.Attempt)),
		))
	if err != nil && result == "error" {
		span.SetStatus(codes.Error, "admission failed")
	}
	span.End()
}

func (t *telemetry) settled(ctx context.Context, g *gatedCall, reserved, final capacity.Charges) {
	h := t.metrics(ctx)
	for _, d := range []capacity.Dimension{capacity.InputTokens, capacity.OutputTokens, capacity.Tokens} {
		hd := h.WithTags(map[string]string{"scope": g.scope.Key(), "dimension": d.String()})
		hd.Counter(metricReserved).Inc(reserved[d])
		hd.Counter(metricSettled).Inc(final[d])
	}
	t.used(ctx, g, final)
}

// used counts the tokens a sent call was finally charged (its settle), per
// class and fairness key.
func (t *telemetry) used(ctx context.Context, g *gatedCall, final capacity.Charges) {
	t.fair(t.metrics(ctx), g).Counter(metricTokensUsed).Inc(tokensOf(final))
}

// fair returns h tagged with a call's scope, class name and fairness key.
func (t *telemetry) fair(h client.MetricsHandler, g *gatedCall) client.MetricsHandler {
	key := g.call.FairnessKey
	if key == "" {
		key = "none"
	}
	return h.WithTags(map[string]string{"scope": g.scope.Key(), "class": g.call.ClassName, "fairness_key": key})
}

// tokensOf is the tokens in c: combined tokens, or input plus output where
// only those are charged.
func tokensOf(c capacity.Charges) int64 {
	if c[capacity.Tokens] > 0 {
		return c[capacity.Tokens]
	}
	return max(c[capacity.InputTokens], 0) + max(c[capacity.OutputTokens], 0)
}

func (t *telemetry) failed(ctx context.Context, g *gatedCall, v tgerrors.Verdict) {
	dim := ""
	if v.HasDimension {
		dim = v.Dimension.String()
	}
	t.metrics(ctx).WithTags(map[string]string{
		"scope": g.scope.Key(), "class": v.Class.String(), "dimension": dim, "attempt": attemptBucket(g.info.Attempt),
	}).Counter(metricProviderErrors).Inc(1)
}

func (t *telemetry) leaseLost(ctx context.Context, g *gatedCall) {
	t.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key()}).Counter(metricLeaseLost).Inc(1)
}

// deadlineMissed counts a call refused with tollgate.DeadlineUnmeetable:
// it could not be sent before its schedule-to-close deadline.
func (t *telemetry) deadlineMissed(ctx context.Context, g *gatedCall) {
	t.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key(), "class": g.call.ClassName}).Counter(metricDeadlineMissed).Inc(1)
}

// ungated counts a model call that ran without the gate: its activity
// (activityType) is marked as a model call, but Resolve did not gate it.
func (t *telemetry) ungated(ctx context.Context, activityType string) {
	t.metrics(ctx).WithTags(map[string]string{"activity_type": activityType}).Counter(metricCallsUngated).Inc(1)
}

// settleFailed counts a settlement that failed or timed out; reason is
// "error" or "timeout".
func (t *telemetry) settleFailed(ctx context.Context, g *gatedCall, reason string) {
	t.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key(), "reason": reason}).Counter(metricSettleFailures).Inc(1)
}

// attemptBucket keeps the attempt tag's cardinality small.
func attemptBucket(a int32) string {
	switch {
	case a <= 1:
		return "1"
	case a <= 3:
		return "2-3"
	case a <= 10:
		return "4-10"
	}
	return ">10"
}
