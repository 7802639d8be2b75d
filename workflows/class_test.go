package workflows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

// deadlockTimeout is the test environments' DeadlockDetectionTimeout. The
// SDK's default, 1 s of wall time without a workflow goroutine yielding,
// fails a test on a loaded machine; a minute only catches a workflow that
// really hangs.
const deadlockTimeout = time.Minute

// warnings is a logger that keeps the warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Debug(string, ...any) {}
func (w *warnings) Info(string, ...any)  {}
func (w *warnings) Error(string, ...any) {}
func (w *warnings) Warn(msg string, _ ...any) {
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
}

func (w *warnings) about(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// Without the plugin on the workflow's worker the class given to CallModel
// cannot reach the gate: CallModel says so instead of failing silently.
func TestCallModelWarnsWhenItsClassCannotReachTheGate(t *testing.T) {
	for _, withPlugin := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		logs := &warnings{}
		s.SetLogger(logs)
		env := s.NewTestWorkflowEnvironment()
		if withPlugin {
			plugin, err := interceptor.NewPlugin(interceptor.Options{
				Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
				Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true },
			})
			require.NoError(t, err)
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout, Plugins: []worker.Plugin{plugin}})
		}
		env.RegisterActivityWithOptions(func(context.Context, Input) (string, error) { return "ok", nil }, activity.RegisterOptions{Name: "Primary"})
		env.RegisterActivityWithOptions(func(context.Context, Input) (string, error) { return "ok", nil }, activity.RegisterOptions{Name: "Fallback"})
		env.ExecuteWorkflow(callWorkflow(workflows.Options{}, chain)) // class Bulk
		require.NoError(t, env.GetWorkflowError())
		want := 1
		if withPlugin {
			want = 0
		}
		assert.Equal(t, want, logs.about("no tollgate plugin"), "with plugin: %v", withPlugin)
	}
}
