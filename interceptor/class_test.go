package interceptor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

// How ClassWorkflow states the class of its call.
const (
	viaRequest   = iota // only the request's own Class
	viaCallModel        // workflows.CallModel
	viaWithClass        // interceptor.WithClass and ExecuteActivity
	viaLocal            // interceptor.WithClass and ExecuteLocalActivity
)

// ClassCase is one call of ClassWorkflow.
type ClassCase struct {
	Via   int
	Class capacity.Class // the workflow's class (not viaRequest)
	In    ChatInput      // the request, with its own Class
	// Fallback adds a second call to CallModel's chain.
	Fallback bool
}

// ClassWorkflow makes one model call whose class is stated as c says.
func ClassWorkflow(ctx workflow.Context, c ClassCase) (Outcome, error) {
	var err error
	switch c.Via {
	case viaRequest:
		_, err = ChatWorkflow(ctx, []ChatInput{c.In})
	case viaCallModel:
		chain := []workflows.Call{{Activity: "Chat", Input: c.In}}
		if c.Fallback {
			chain = append(chain, workflows.Call{Activity: "Chat", Input: call("gpt-4o", "team-b")})
		}
		var r ChatResult
		_, err = workflows.CallModel(ctx, workflows.Options{}, c.Class, chain, &r)
	case viaWithClass:
		ctx = workflow.WithActivityOptions(interceptor.WithClass(ctx, c.Class), workflows.Options{}.ActivityOptions(c.Class))
		err = workflow.ExecuteActivity(ctx, "Chat", c.In).Get(ctx, nil)
	case viaLocal:
		ctx = workflow.WithLocalActivityOptions(interceptor.WithClass(ctx, c.Class), workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		err = workflow.ExecuteLocalActivity(ctx, "Chat", c.In).Get(ctx, nil)
	}
	o := Outcome{OK: err == nil}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		o.Type, o.NonRetryable = ae.Type(), ae.NonRetryable()
	}
	return o, nil
}

// classRecorder records the class of every request the gate makes.
type classRecorder struct {
	capacity.Store
	mu      sync.Mutex
	classes []capacity.Class
}

func (r *classRecorder) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	r.mu.Lock()
	r.classes = append(r.classes, req.Class)
	r.mu.Unlock()
	return r.Store.Reserve(ctx, req)
}

func (r *classRecorder) seen() []capacity.Class {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]capacity.Class(nil), r.classes...)
}

func runClassCase(t *testing.T, c ClassCase) (Outcome, []capacity.Class, int64) {
	t.Helper()
	rec := &classRecorder{}
	e := newEnv(t, capacity.Limits{RequestsPerMinute: 600}, func(o *interceptor.Options) {
		rec.Store, o.Store = o.Store, rec
	})
	e.RegisterWorkflow(ClassWorkflow)
	e.ExecuteWorkflow(ClassWorkflow, c)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var o Outcome
	require.NoError(t, e.GetWorkflowResult(&o))
	return o, rec.seen(), e.provider.calls.Load()
}

func withClass(c capacity.Class) ChatInput {
	in := call("gpt-4o", "team-a")
	in.Class = c
	return in
}

// TestClassFromCallModelReachesTheGate: the class given to CallModel (or
// WithClass) only is the class the gate reserves with; a request's own class
// that agrees is accepted, and a request with no class anywhere is Standard.
func TestClassFromCallModelReachesTheGate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ClassCase
		want capacity.Class
	}{
		{"interactive via CallModel only", ClassCase{Via: viaCallModel, Class: capacity.Interactive, In: call("gpt-4o", "team-a")}, capacity.Interactive},
		{"bulk via CallModel only", ClassCase{Via: viaCallModel, Class: capacity.Bulk, In: call("gpt-4o", "team-a")}, capacity.Bulk},
		{"CallModel and request agree", ClassCase{Via: viaCallModel, Class: capacity.Interactive, In: withClass(capacity.Interactive)}, capacity.Interactive},
		{"interactive via WithClass only", ClassCase{Via: viaWithClass, Class: capacity.Interactive, In: call("gpt-4o", "team-a")}, capacity.Interactive},
		{"bulk via WithClass on a local activity", ClassCase{Via: viaLocal, Class: capacity.Bulk, In: call("gpt-4o", "team-a")}, capacity.Bulk},
		{"request only, as before", ClassCase{Via: viaRequest, In: withClass(capacity.Bulk)}, capacity.Bulk},
		{"no class anywhere is standard", ClassCase{Via: viaRequest, In: call("gpt-4o", "team-a")}, capacity.Standard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, classes, calls := runClassCase(t, tc.c)
			require.True(t, o.OK, "failed: %s", o.Type)
			assert.Equal(t, []capacity.Class{tc.want}, classes)
			assert.Equal(t, int64(1), calls)
		})
	}
}

// TestClassDisagreementIsMisconfigured: a request whose own class differs
// from the workflow's fails non-retryable before it reserves or calls, and
// CallModel does not fall back from it.
func TestClassDisagreementIsMisconfigured(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ClassCase
	}{
		{"CallModel interactive, request bulk", ClassCase{Via: viaCallModel, Class: capacity.Interactive, In: withClass(capacity.Bulk), Fallback: true}},
		{"CallModel standard, request interactive", ClassCase{Via: viaCallModel, Class: capacity.Standard, In: withClass(capacity.Interactive)}},
		{"WithClass bulk, request interactive", ClassCase{Via: viaWithClass, Class: capacity.Bulk, In: withClass(capacity.Interactive)}},
		{"WithClass out of range", ClassCase{Via: viaWithClass, Class: capacity.Class(7), In: call("gpt-4o", "team-a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, classes, calls := runClassCase(t, tc.c)
			assert.False(t, o.OK)
			assert.Equal(t, tgerrors.TypeMisconfigured, o.Type)
			assert.True(t, o.NonRetryable)
			assert.Empty(t, classes, "refused before reserving")
			assert.Equal(t, int64(0), calls, "refused before calling the provider; no fallback")
		})
	}
}
