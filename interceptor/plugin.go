package interceptor

import (
	"context"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
)

// PluginName is the name of the plugin NewPlugin returns.
const PluginName = "tollgate.ModelCallGate"

// NewPlugin returns the worker plugin that gates every model-call activity
// of the workers it is set on (worker.Options.Plugins, or client.Options.Plugins
// for every worker of that client). Its interceptor is appended to the
// worker's interceptors, so it runs innermost: an outer interceptor that
// wraps errors with %w would hide the *temporal.ApplicationError and Temporal
// would drop its NextRetryDelay and NonRetryable. Set on both a client and
// its worker, the plugin still gates each call once.
//
// The plugin's metrics go to the worker's Temporal metrics handler (see
// Options.MeterProvider). Its budget gauges are updated by one goroutine
// from the start of the first worker it runs on to the stop of the last;
// stopping that worker ends it.
func NewPlugin(options Options) (*temporal.SimplePlugin, error) {
	wi, err := newWorkerInterceptor(options)
	if err != nil {
		return nil, err
	}
	return temporal.NewSimplePlugin(temporal.SimplePluginOptions{
		Name:               PluginName,
		WorkerInterceptors: []interceptor.WorkerInterceptor{wi},
		RunContextBefore: func(_ context.Context, o temporal.SimplePluginRunContextBeforeOptions) error {
			if !o.WorkflowReplayer {
				wi.tel.workerStarted(o.InstanceKey)
			}
			return nil
		},
		RunContextAfter: func(_ context.Context, o temporal.SimplePluginRunContextAfterOptions) {
			wi.tel.workerStopped(o.InstanceKey) // a replayer's key is not known: ignored
		},
	})
}

// New returns the bare worker interceptor, for users who compose
// interceptors by hand. Put it last (innermost) in worker.Options.Interceptors.
// It records the per-call metrics and spans but not the budget gauges,
// which need the plugin's worker start and stop.
func New(options Options) (interceptor.WorkerInterceptor, error) {
	return newWorkerInterceptor(options)
}

func newWorkerInterceptor(options Options) (*workerInterceptor, error) {
	o, err := options.withDefaults()
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(o)
	if err != nil {
		return nil, err
	}
	return &workerInterceptor{opts: o, tel: tel, learn: newLearning(o), ledger: newLedgerGate(o)}, nil
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	opts   Options
	tel    *telemetry
	learn  *learning
	ledger *ledgerGate
	// ungated logs model calls that run ungated, once per activity type.
	ungated ungatedLog
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityInbound{root: w}
	a.Next = next
	return a
}
