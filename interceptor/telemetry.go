package interceptor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// instrumentationName names tollgate's meter and tracer.
const instrumentationName = "github.com/tollgate-dev/tollgate"

// telemetry records admission metrics and spans. Attributes are scope keys
// (names), classes, dimensions and outcomes: never prompts or keys.
type telemetry struct {
	tracer     trace.Tracer
	admissions metric.Int64Counter
	wait       metric.Float64Histogram
	providerEr metric.Int64Counter
	estimated  metric.Int64Counter
	actual     metric.Int64Counter
	lost       metric.Int64Counter
	settleErr  metric.Int64Counter

	store  capacity.Store
	scopes sync.Map // capacity.Scope → struct{}: the scopes this worker gated
}

func newTelemetry(o Options) *telemetry {
	mp := o.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	tp := o.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName)}
	// Instrument creation only fails on invalid names; the no-op
	// instruments the API returns alongside keep recording safe.
	t.admissions, _ = m.Int64Counter("tollgate.admissions", metric.WithDescription("Admission decisions by scope, class and result."))
	t.wait, _ = m.Float64Histogram("tollgate.admission.wait", metric.WithUnit("s"), metric.WithDescription("Time spent waiting for admission in-process."))
	t.providerEr, _ = m.Int64Counter("tollgate.provider.errors", metric.WithDescription("Provider failures by class and dimension."))
	t.estimated, _ = m.Int64Counter("tollgate.tokens.reserved", metric.WithDescription("Tokens reserved at admission, by dimension."))
	t.actual, _ = m.Int64Counter("tollgate.tokens.settled", metric.WithDescription("Tokens charged at settlement, by dimension."))
	t.lost, _ = m.Int64Counter("tollgate.lease.lost", metric.WithDescription("Leases that expired before their call ended."))
	t.settleErr, _ = m.Int64Counter("tollgate.settle.failures", metric.WithDescription("Settlements that failed (reason error) or were given up after SettleTimeout (reason timeout); their leases expire by themselves."))
	t.store = o.Store
	level, _ := m.Float64ObservableGauge("tollgate.budget.level", metric.WithDescription("Budget level per scope and dimension (negative: debt and booked tickets)."))
	inflight, _ := m.Int64ObservableGauge("tollgate.inflight", metric.WithDescription("Calls in flight per scope, across workers sharing the store."))
	_, _ = m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		t.scopes.Range(func(k, _ any) bool {
			sc := k.(capacity.Scope)
			snap, err := t.store.Snapshot(ctx, sc)
			if err != nil {
				return true
			}
			for d := capacity.Dimension(0); int(d) < capacity.NumDimensions; d++ {
				if snap.Budget[d].Limited && d != capacity.InFlight {
					obs.ObserveFloat64(level, snap.Level[d], metric.WithAttributes(
						attribute.String("scope", sc.Key()), attribute.String("dimension", d.String())))
				}
			}
			obs.ObserveInt64(inflight, int64(len(snap.Leases)), metric.WithAttributes(attribute.String("scope", sc.Key())))
			return true
		})
		return nil
	}, level, inflight)
	return t
}

// track remembers a scope for the budget gauges.
func (t *telemetry) track(sc capacity.Scope) { t.scopes.LoadOrStore(sc, struct{}{}) }

func (t *telemetry) admitted(ctx context.Context, g *gatedCall, res capacity.Reservation, err error, waited time.Duration) {
	t.track(g.scope)
	result := "granted"
	switch {
	case err != nil && !res.Granted && res.Reason != 0:
		result = "denied_" + res.Reason.String()
	case err != nil:
		result = "error"
	}
	attrs := metric.WithAttributes(
		attribute.String("scope", g.scope.Key()),
		attribute.String("class", g.call.Class.String()),
		attribute.String("result", result),
	)
	t.admissions.Add(ctx, 1, attrs)
	t.wait.Record(ctx, waited.Seconds(), metric.WithAttributes(
		attribute.String("scope", g.scope.Key()), attribute.String("class", g.call.Class.String())))
	_, span := t.tracer.Start(ctx, "tollgate.admit",
		trace.WithTimestamp(time.Now().Add(-waited)),
		trace.WithAttributes(
			attribute.String("tollgate.scope", g.scope.Key()),
			attribute.String("tollgate.class", g.call.Class.String()),
			attribute.String("tollgate.result", result),
			attribute.Int("tollgate.attempt", int(g.info.Attempt)),
		))
	if err != nil && result == "error" {
		span.SetStatus(codes.Error, "admission failed")
	}
	span.End()
}

func (t *telemetry) settled(ctx context.Context, g *gatedCall, reserved, final capacity.Charges) {
	for _, d := range []capacity.Dimension{capacity.InputTokens, capacity.OutputTokens, capacity.Tokens} {
		attrs := metric.WithAttributes(attribute.String("scope", g.scope.Key()), attribute.String("dimension", d.String()))
		t.estimated.Add(ctx, reserved[d], attrs)
		t.actual.Add(ctx, final[d], attrs)
	}
}

func (t *telemetry) failed(ctx context.Context, g *gatedCall, v tgerrors.Verdict) {
	dim := ""
	if v.HasDimension {
		dim = v.Dimension.String()
	}
	t.providerEr.Add(ctx, 1, metric.WithAttributes(
		attribute.String("scope", g.scope.Key()), attribute.String("class", v.Class.String()),
		attribute.String("dimension", dim), attribute.String("attempt", attemptBucket(g.info.Attempt))))
}

func (t *telemetry) leaseLost(ctx context.Context, g *gatedCall) {
	t.lost.Add(ctx, 1, metric.WithAttributes(attribute.String("scope", g.scope.Key())))
}

// settleFailed counts a settlement that failed or timed out; reason is
// "error" or "timeout".
func (t *telemetry) settleFailed(ctx context.Context, g *gatedCall, reason string) {
	t.settleErr.Add(ctx, 1, metric.WithAttributes(attribute.String("scope", g.scope.Key()), attribute.String("reason", reason)))
}

// attemptBucket keeps the attempt attribute's cardinality small.
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
