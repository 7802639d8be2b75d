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
func NewPlugin(options Options) (*temporal.SimplePlugin, error) {
	wi, err := New(options)
	if err != nil {
		return nil, err
	}
	return temporal.NewSimplePlugin(temporal.SimplePluginOptions{
		Name:               PluginName,
		WorkerInterceptors: []interceptor.WorkerInterceptor{wi},
	})
}

// New returns the bare worker interceptor, for users who compose
// interceptors by hand. Put it last (innermost) in worker.Options.Interceptors.
func New(options Options) (interceptor.WorkerInterceptor, error) {
	o, err := options.withDefaults()
	if err != nil {
		return nil, err
	}
	return &workerInterceptor{opts: o, tel: newTelemetry(o)}, nil
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	opts Options
	tel  *telemetry
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityInbound{root: w}
	a.Next = next
	return a
}
