package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/samples/goodput/figures"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// Strategies, in the table's order.
const (
	Naive         = "naive"          // SDK retries (2) inside Temporal's default retry policy
	TemporalRate  = "temporal-rate"  // the task queue's activities per second at RPM/60
	RequestsOnly  = "requests-only"  // a client-side RPM limiter, exponential backoff with jitter on 429
	Cookbook      = "cookbook"       // x/time/rate on every per-minute limit at 100 %, pause after a 429
	Tollgate      = "tollgate"       // the plugin on a memory store, limits only
	TollgateRedis = "tollgate-redis" // the plugin in redisWorkers processes on one Redis
)

// Strategies lists the strategies compared by default.
var Strategies = []string{Naive, TemporalRate, RequestsOnly, Cookbook, Tollgate, TollgateRedis}

// The plugin with limits other than the provider's, to measure what
// configuring them costs or saves (run them with -strategies).
const (
	TollgateReported = "tollgate-reported" // no limits configured: the provider's reported ones
	TollgateLow      = "tollgate-low"      // limits configured at half the provider's
	TollgateHigh     = "tollgate-high"     // limits configured at twice the provider's
)

// LimitStrategies lists the strategies of configured limits.
var LimitStrategies = []string{TollgateReported, TollgateLow, TollgateHigh}

// tollgate-redis on each redisstore.Engine by name (run them with
// -strategies): tollgate-redis runs the default, the records engine.
const (
	TollgateRecords = "tollgate-records" // redisstore.EngineRecords: the store deciding in the workers
	TollgateScripts = "tollgate-scripts" // redisstore.EngineScripts: the store deciding in Redis's scripts
)

// knownStrategies is every strategy -strategies may name.
var knownStrategies = slices.Concat(Strategies, LimitStrategies, []string{TollgateRecords, TollgateScripts})

// gated reports whether strategy s runs the tollgate plugin (its workflows
// then schedule calls with workflows.CallModel).
func gated(s string) bool {
	return s == Tollgate || onRedis(s) || slices.Contains(LimitStrategies, s)
}

// onRedis reports whether strategy s runs in worker processes sharing a
// Redis store.
func onRedis(s string) bool {
	return s == TollgateRedis || s == TollgateRecords || s == TollgateScripts
}

// configuredLimits is what strategy s configures for a provider of limits
// l; ok is false for none (Options.Limits unset).
func configuredLimits(s string, l testsuite.Limits) (capacity.Limits, bool) {
	limits := TollgateLimits(l)
	switch s {
	case TollgateReported:
		return capacity.Limits{}, false
	case TollgateLow:
		return scaleLimits(limits, 0.5), true
	case TollgateHigh:
		return scaleLimits(limits, 2), true
	}
	return limits, true
}

// scaleLimits is l with every per-minute limit times f.
func scaleLimits(l capacity.Limits, f float64) capacity.Limits {
	for _, d := range capacity.Dimensions() {
		if d.PerMinute() && l.Limit(d) > 0 {
			l = l.SetLimit(d, max(1, int64(float64(l.Limit(d))*f)))
		}
	}
	return l
}

// apiKey is the fake provider's only key.
const apiKey = "sk-goodput-fake-7f3a"

// ErrSkipped is returned (wrapped) for a run that cannot be made here, such
// as tollgate-redis without Redis.
var ErrSkipped = errors.New("skipped")

// workerSpec is what a worker of a run needs; it crosses to the
// tollgate-redis worker processes as JSON.
type workerSpec struct {
	HostPort, Namespace, Queue   string
	OpenAIBaseURL, AnthropicBase string
	Limits                       testsuite.Limits
	Redis, Prefix                string // the strategies on Redis only (onRedis)
	Engine                       redisstore.Engine
}

// startWorkers starts strategy s's workers for a run and returns the
// function that stops them.
func startWorkers(ctx context.Context, env *Env, s string, spec workerSpec) (stop func(), err error) {
	if !slices.Contains(knownStrategies, s) {
		return nil, fmt.Errorf("unknown strategy %q (want one of %v)", s, knownStrategies)
	}
	if onRedis(s) {
		switch s {
		case TollgateRecords:
			spec.Engine = redisstore.EngineRecords
		case TollgateScripts:
			spec.Engine = redisstore.EngineScripts
		}
		return startRedisWorkers(ctx, env, spec)
	}
	oa, an, err := modelActivities(spec)
	if err != nil {
		return nil, err
	}
	var (
		opts worker.Options
		acts = []any{oa, an}
	)
	switch s {
	case Naive:
		acts = []any{&sdkRetrying{openAIBaseURL: spec.OpenAIBaseURL, anthropicBaseURL: spec.AnthropicBase, key: apiKey}}
	case TemporalRate:
		opts.TaskQueueActivitiesPerSecond = float64(spec.Limits.RequestsPerMinute) / 60
	case RequestsOnly:
		acts = []any{&limitedActivities{openAI: oa, anthropic: an, limiter: newRequestsOnly(spec.Limits)}}
	case Cookbook:
		acts = []any{&limitedActivities{openAI: oa, anthropic: an, limiter: newCookbook(spec.Limits)}}
	case Tollgate, TollgateReported, TollgateLow, TollgateHigh:
		plugin, err := tollgatePlugin(capacity.NewMemoryStore(capacity.MemoryOptions{}), s, spec.Limits)
		if err != nil {
			return nil, err
		}
		opts.Plugins = []worker.Plugin{plugin}
	}
	w := newWorker(env.Client, spec.Queue, opts, acts...)
	if err := w.Start(); err != nil {
		return nil, err
	}
	return w.Stop, nil
}

// modelActivities are the activities package's OpenAI and Anthropic
// activities on the run's fake provider, their requests tagged for its
// record (tagTransport).
func modelActivities(spec workerSpec) (*activities.OpenAI, *activities.Anthropic, error) {
	creds := activities.StaticCredentials{Credential: apiKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: spec.OpenAIBaseURL, HTTPClient: taggingClient})
	if err != nil {
		return nil, nil, err
	}
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: spec.AnthropicBase, HTTPClient: taggingClient})
	return oa, an, err
}

// taggingClient is every strategy's HTTP client: the default one, with
// the batch's requests tagged (tagTransport).
var taggingClient = &http.Client{Transport: tagTransport{http.DefaultTransport}}

// tagTransport sets testsuite.TagHeader on a request an activity of
// BatchWorkflow sends to figures.BatchTag, so the figures find the batch's
// calls in the fake provider's record.
type tagTransport struct{ base http.RoundTripper }

func (t tagTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).WorkflowType.Name == batchWorkflowName {
		r = r.Clone(ctx)
		r.Header.Set(testsuite.TagHeader, figures.BatchTag)
	}
	return t.base.RoundTrip(r)
}

// tollgatePlugin is tollgate strategy s's plugin: store and the limits s
// configures for a provider of limits l (configuredLimits), every other
// option at its default.
func tollgatePlugin(store capacity.Store, s string, l testsuite.Limits) (worker.Plugin, error) {
	o := interceptor.Options{Store: store}
	if limits, ok := configuredLimits(s, l); ok {
		o.Limits = func(capacity.Scope) (capacity.Limits, bool) { return limits, true }
	}
	return interceptor.NewPlugin(o)
}

// newWorker returns a worker on queue running the sample's workflows and acts.
func newWorker(c client.Client, queue string, opts worker.Options, acts ...any) worker.Worker {
	w := worker.New(c, queue, opts)
	w.RegisterWorkflowWithOptions(BatchWorkflow, workflow.RegisterOptions{Name: batchWorkflowName})
	w.RegisterWorkflow(InteractiveWorkflow)
	for _, a := range acts {
		w.RegisterActivity(a)
	}
	return w
}
