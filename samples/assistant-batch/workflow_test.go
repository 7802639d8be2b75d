package assistantbatch_test

import (
	"context"
	"go.temporal.io/sdk/worker"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

func TestWorkflowsRouteClassesToTheirQueues(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	// A minute, not a second: a loaded machine can pause a workflow longer.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	var (
		mu      sync.Mutex
		classes []capacity.Class
	)
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.OpenAIChatRequest) (activities.Result, error) {
		mu.Lock()
		classes = append(classes, in.Class)
		mu.Unlock()
		return activities.Result{Text: "ok"}, nil
	}, activity.RegisterOptions{Name: "Chat"})
	env.ExecuteWorkflow(ab.BatchClassifyWorkflow, 5)
	require.NoError(t, env.GetWorkflowError())
	var r ab.BatchResult
	require.NoError(t, env.GetWorkflowResult(&r))
	assert.Equal(t, ab.BatchResult{Classified: 5}, r)
	assert.Equal(t, []capacity.Class{capacity.Bulk, capacity.Bulk, capacity.Bulk, capacity.Bulk, capacity.Bulk}, classes)
	assert.Equal(t, ab.BatchQueue, ab.Options.ActivityOptions(capacity.Bulk).TaskQueue)
	assert.Equal(t, ab.InteractiveQueue, ab.Options.ActivityOptions(capacity.Interactive).TaskQueue)
}

// The demo end to end, scaled down: a batch and an assistant share one
// quota on a real dev server; nothing is refused by the provider and every
// question is answered. Latencies are printed, not asserted.
func TestDemoOnDevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := ab.DemoOptions{Docs: 60, Questions: 6, Every: 300 * time.Millisecond}
	r, err := ab.RunDemo(ctx, srv.Client(), o, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ab.BatchResult{Classified: 60}, r.Batch)
	assert.Equal(t, 6, r.Answered)
	assert.Zero(t, r.Provider429s)
	assert.True(t, r.LedgerMatches(), "the cost ledger holds the provider's tokens: %+v against %+v", r.Ledger, r.ProviderTokens)
	t.Logf("batch %v; assistant p50 %v, p95 %v", r.BatchTime.Round(time.Millisecond), r.LatencyP50.Round(time.Millisecond), r.LatencyP95.Round(time.Millisecond))

	// The HTML report of this run (what `make demo` writes), opened in
	// headless Chromium.
	tl := r.Timeline
	assert.Len(t, tl.Calls, 66, "calls admitted")
	assert.Equal(t, []capacity.Dimension{capacity.Requests, capacity.Tokens}, tl.Dimensions)
	require.NotEmpty(t, tl.Samples)
	maxInFlight := 0
	for _, s := range tl.Samples {
		maxInFlight = max(maxInFlight, s.InFlight)
	}
	assert.Positive(t, maxInFlight, "calls in flight at some sample")
	path, err := r.SaveHTML(filepath.Join(t.TempDir(), "demo-report.html"), o)
	require.NoError(t, err)
	t.Run("report in Chromium", func(t *testing.T) {
		check, _ := openReport(t, path)
		assert.Equal(t, renderCheck{Charts: 4, Lines: 7, Drawn: 7, Points: 7 * len(tl.Samples)}, check)
		t.Logf("%d samples; %+v", len(tl.Samples), check)
	})
}
