package interceptor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/contrib/opentelemetry"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// With Options.TracerProvider and Options.MeterProvider set, the gate's
// admission span nests under the RunActivity span of Temporal's
// OpenTelemetry tracing interceptor, and its metrics, budget gauges
// included, go to the meter provider.
func TestTelemetryComposesWithTemporalTracing(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer("temporal")})
	require.NoError(t, err)

	l := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 60000, SafetyMargin: 1}
	e := newEnvWith(t, l, func(o *interceptor.Options) {
		o.TracerProvider = tp
		o.MeterProvider = mp
	}, []sdkinterceptor.WorkerInterceptor{tracing})
	out := e.run(t, Step{In: call("gpt-4o", "team-a")})
	require.True(t, out[0].OK)

	requireNestedAdmitSpan(t, spans)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	for _, n := range []string{"tollgate.admissions", "tollgate.admission.wait", "tollgate.tokens.reserved", "tollgate.tokens.settled", "tollgate.budget.level", "tollgate.inflight", "tollgate.provider.remaining", "tollgate.provider.limit"} {
		assert.True(t, names[n], "metric %s exported", n)
	}
}

// Without Options.TracerProvider, the admission span goes to the provider
// of the span it runs in: that of Temporal's tracing interceptor.
func TestAdmissionSpanUsesTemporalTracingsProvider(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer("temporal")})
	require.NoError(t, err)
	l := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 60000, SafetyMargin: 1}
	e := newEnvWith(t, l, nil, []sdkinterceptor.WorkerInterceptor{tracing})
	out := e.run(t, Step{In: call("gpt-4o", "team-a")})
	require.True(t, out[0].OK)
	requireNestedAdmitSpan(t, spans)
}

// requireNestedAdmitSpan requires a tollgate.admit span nested under
// Temporal's RunActivity span.
func requireNestedAdmitSpan(t *testing.T, spans *tracetest.SpanRecorder) {
	t.Helper()
	var admit, run sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch {
		case s.Name() == "tollgate.admit":
			admit = s
		case s.Name() == "RunActivity:Chat":
			run = s
		}
	}
	require.NotNil(t, admit, "an admission span")
	require.NotNil(t, run, "Temporal's activity span")
	assert.Equal(t, run.SpanContext().SpanID(), admit.Parent().SpanID(), "nested under RunActivity")
}
