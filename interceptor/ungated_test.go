package interceptor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// PointerCall has TollgateCall on its pointer only; an activity that takes
// it as a value is a model call the gate cannot see.
type PointerCall struct{ Prompt string }

func (*PointerCall) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: capacity.OpenAI, Model: "gpt-4o", Credential: "team-a"}
}

// PlainInput implements nothing.
type PlainInput struct{ Prompt string }

// warnings is a log.Logger that keeps its warnings.
type warnings struct {
	log.Logger
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Warn(msg string, keyvals ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, fmt.Sprint(append([]any{msg}, keyvals...)...))
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// TestUngatedModelCallIsCountedAndLogged: an activity the gate lets through
// although it is a model call (its input's TollgateCall has a pointer
// receiver, or the workflow scheduled it as one with WithClass) is counted
// in tollgate.calls.ungated on every call and logged once per activity
// type; an ordinary activity is neither.
func TestUngatedModelCallIsCountedAndLogged(t *testing.T) {
	tests := []struct {
		name     string
		activity string
		classed  bool // scheduled with interceptor.WithClass
		ungated  bool
		reason   string
	}{
		{"pointer receiver on a value input", "PointerChat", false, true, "pointer receiver"},
		{"scheduled as a model call, input no ModelCall", "PlainChat", true, true, "scheduled it as a model call"},
		{"an ordinary activity", "PlainChat", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecording()
			logs := &warnings{Logger: log.NewStructuredLogger(nil)}
			var s testsuite.WorkflowTestSuite
			s.SetMetricsHandler(rec)
			e := s.NewTestWorkflowEnvironment()
			plugin, err := interceptor.NewPlugin(interceptor.Options{
				Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
				Limits: func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(6000), true },
				Logger: logs,
			})
			require.NoError(t, err)
			e.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}, DeadlockDetectionTimeout: deadlockTimeout})
			ran := 0
			e.RegisterActivityWithOptions(func(_ context.Context, in PointerCall) (string, error) {
				ran++
				return "ok", nil
			}, activity.RegisterOptions{Name: "PointerChat"})
			e.RegisterActivityWithOptions(func(_ context.Context, in PlainInput) (string, error) {
				ran++
				return "ok", nil
			}, activity.RegisterOptions{Name: "PlainChat"})
			e.ExecuteWorkflow(func(ctx workflow.Context) error {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
				if tt.classed {
					ctx = interceptor.WithClass(ctx, capacity.Bulk)
				}
				for range 2 {
					var out string
					if err := workflow.ExecuteActivity(ctx, tt.activity, PointerCall{Prompt: "prompt-7f3a"}).Get(ctx, &out); err != nil {
						return err
					}
				}
				return nil
			})
			require.True(t, e.IsWorkflowCompleted())
			require.NoError(t, e.GetWorkflowError())
			assert.Equal(t, 2, ran, "an ungated call still runs")

			counted := rec.find("tollgate.calls.ungated", map[string]string{"activity_type": tt.activity})
			if !tt.ungated {
				assert.Empty(t, counted)
				assert.Empty(t, logs.all())
				return
			}
			require.Len(t, counted, 1, rec.dump())
			assert.Equal(t, 2.0, counted[0].Value, "every call is counted")
			msgs := logs.all()
			require.Len(t, msgs, 1, "logged once per activity type: %q", msgs)
			assert.Contains(t, msgs[0], tt.activity)
			assert.Contains(t, msgs[0], tt.reason)
			assert.NotContains(t, msgs[0], "prompt-7f3a", "never the prompt")
		})
	}
}
