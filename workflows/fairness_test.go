package workflows_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestActivityOptionsFairness(t *testing.T) {
	ao := workflows.Options{FairnessKey: "acme", FairnessWeight: 3}.ActivityOptions(capacity.Interactive)
	assert.Equal(t, temporal.Priority{PriorityKey: 1, FairnessKey: "acme", FairnessWeight: 3}, ao.Priority)
	ao = workflows.Options{}.ActivityOptions(capacity.Standard)
	assert.Equal(t, temporal.Priority{PriorityKey: 3}, ao.Priority, "no key: the priority key only, as before")
}

// Seen is what an activity's interceptor saw of its call: the tollgate
// headers. (The test environment does not pass an activity's priority on;
// TestFairnessKeyOnADevServer reads it on a real server.)
type Seen struct {
	Class     string
	Key       string
	HasHeader bool
}

// seer is a worker interceptor that records the tollgate headers of each
// activity it runs (headers are read in interceptors).
type seer struct {
	sdkinterceptor.WorkerInterceptorBase
	seen []Seen
}

func (s *seer) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	i := &seeInbound{s: s}
	i.Next = next
	return i
}

type seeInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	s *seer
}

func (i *seeInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	var seen Seen
	h := sdkinterceptor.Header(ctx)
	dc := converter.GetDefaultDataConverter()
	if p := h[interceptor.ClassHeader]; p != nil {
		_ = dc.FromPayload(p, &seen.Class)
	}
	if p := h[interceptor.FairnessKeyHeader]; p != nil {
		seen.HasHeader = true
		_ = dc.FromPayload(p, &seen.Key)
	}
	i.s.seen = append(i.s.seen, seen)
	return i.Next.ExecuteActivity(ctx, in)
}

// fairCall runs CallModel (class Bulk) with opts, on a context that carries
// ctxKey (WithFairnessKey) if set, and returns what the activity saw or
// CallModel's error.
func fairCall(opts workflows.Options, ctxKey string) func(ctx workflow.Context) (Seen, error) {
	return func(ctx workflow.Context) (Seen, error) {
		if ctxKey != "" {
			ctx = interceptor.WithFairnessKey(ctx, ctxKey)
		}
		var s Seen
		_, err := workflows.CallModel(ctx, opts, capacity.Bulk, []workflows.Call{{Activity: "See", Input: Input{}}}, &s)
		return s, err
	}
}

func runFair(t *testing.T, wf func(ctx workflow.Context) (Seen, error)) (Seen, int, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true },
		// The test reads the headers the plugin writes: nothing is gated.
		Resolve: func(context.Context, activity.Info, []any) (interceptor.Call, bool, error) {
			return interceptor.Call{}, false, nil
		},
	})
	require.NoError(t, err)
	see := &seer{}
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout, Plugins: []worker.Plugin{plugin}, Interceptors: []sdkinterceptor.WorkerInterceptor{see}})
	calls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in Input) (Seen, error) {
		calls++
		return Seen{}, nil
	}, activity.RegisterOptions{Name: "See"})
	env.ExecuteWorkflow(wf)
	require.True(t, env.IsWorkflowCompleted())
	var seen Seen
	werr := env.GetWorkflowError()
	if werr == nil {
		require.Len(t, see.seen, 1)
		seen = see.seen[0]
	}
	return seen, calls, werr
}

// TestCallModelCarriesTheFairnessKey: CallModel's fairness key reaches the
// activity in the tollgate header, for the gate (ActivityOptions puts it in
// the priority, TestActivityOptionsFairness); with none in its options it
// uses the key on the workflow context; its ClassName replaces its class in
// the header.
func TestCallModelCarriesTheFairnessKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   workflows.Options
		ctxKey string
		want   Seen
	}{
		{"key and weight", workflows.Options{FairnessKey: "acme", FairnessWeight: 3},
			"", Seen{Class: "bulk", Key: "acme", HasHeader: true}},
		{"the context's key", workflows.Options{}, "beta",
			Seen{Class: "bulk", Key: "beta", HasHeader: true}},
		{"the options' key over the context's", workflows.Options{FairnessKey: "acme"}, "beta",
			Seen{Class: "bulk", Key: "acme", HasHeader: true}},
		{"no key", workflows.Options{}, "",
			Seen{Class: "bulk"}},
		{"a class name", workflows.Options{ClassName: "premium"}, "",
			Seen{Class: "premium"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen, calls, err := runFair(t, fairCall(tc.opts, tc.ctxKey))
			require.NoError(t, err)
			assert.Equal(t, 1, calls)
			assert.Equal(t, tc.want, seen)
		})
	}
}

// TestCallModelRefusesInvalidFairness: a fairness key the gate or
// Temporal's matching would refuse, or a negative weight, returns
// ErrInvalidOptions before anything is scheduled, without the key's value.
func TestCallModelRefusesInvalidFairness(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   workflows.Options
		ctxKey string
	}{
		{"a space", workflows.Options{FairnessKey: "acme corp"}, ""},
		{"longer than Temporal takes", workflows.Options{FairnessKey: strings.Repeat("k", workflows.MaxFairnessKeyLength+1)}, ""},
		{"the context's key is invalid", workflows.Options{}, "acme/eu"},
		{"negative weight", workflows.Options{FairnessKey: "acme", FairnessWeight: -1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, calls, err := runFair(t, fairCall(tc.opts, tc.ctxKey))
			require.Error(t, err)
			assert.Contains(t, err.Error(), workflows.ErrInvalidOptions.Error())
			assert.NotContains(t, err.Error(), "acme")
			assert.Zero(t, calls)
		})
	}
}
