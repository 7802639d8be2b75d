package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// E2EChatWorkflow makes one model call with the options a model call needs
// (or MaximumAttempts attempts, to show they are refused).
func E2EChatWorkflow(ctx workflow.Context, in ChatInput, maxAttempts int32) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: 5 * time.Minute,
		StartToCloseTimeout:    time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: maxAttempts},
	})
	var r ChatResult
	err := workflow.ExecuteActivity(ctx, "Chat", in).Get(ctx, &r)
	return r.Text, err
}

func TestEndToEndOnDevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := srv.Client()

	provider := newScripted(t, rateLimited("1"), reply{status: 200}, quotaExhausted())
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(6000), true },
	})
	require.NoError(t, err)
	const queue = "tollgate-e2e"
	w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
	acts := &chatActivities{baseURL: provider.srv.URL, keys: map[string]string{"team-a": "sk-test-a"}}
	w.RegisterActivityWithOptions(acts.Chat, activity.RegisterOptions{Name: "Chat"})
	w.RegisterWorkflow(E2EChatWorkflow)
	require.NoError(t, w.Start())
	defer w.Stop()

	start := func(id string, maxAttempts int32) client.WorkflowRun {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, E2EChatWorkflow, call("gpt-4o", "team-a"), maxAttempts)
		require.NoError(t, err)
		return run
	}

	t.Run("429 becomes a NextRetryDelay retry", func(t *testing.T) {
		run := start("e2e-rate-limited", 0)
		var text string
		require.NoError(t, run.Get(ctx, &text))
		assert.Equal(t, "ok", text)
		started := activityStarted(t, ctx, c, run)
		require.NotNil(t, started)
		assert.Equal(t, int32(2), started.GetAttempt(), "the second attempt succeeded")
		info := started.GetLastFailure().GetApplicationFailureInfo()
		require.NotNil(t, info, "the first attempt's failure is recorded")
		assert.Equal(t, tgerrors.TypeRateLimited, info.GetType())
		assert.False(t, info.GetNonRetryable())
		assert.GreaterOrEqual(t, info.GetNextRetryDelay().AsDuration(), time.Second, "retry-after honoured")
		assert.Equal(t, enumspb.APPLICATION_ERROR_CATEGORY_BENIGN, info.GetCategory())
		t.Logf("attempt 1: %s, NextRetryDelay %v", info.GetType(), info.GetNextRetryDelay().AsDuration())
	})

	t.Run("quota becomes a non-retryable failure", func(t *testing.T) {
		run := start("e2e-quota", 0)
		err := run.Get(ctx, nil)
		require.Error(t, err)
		assert.True(t, tgerrors.IsQuotaExhausted(err))
		d, ok := tgerrors.DetailsOf(err)
		require.True(t, ok)
		assert.Equal(t, gpt4o.Key(), d.Scope)
		failed := activityFailed(t, ctx, c, run)
		require.NotNil(t, failed)
		info := failed.GetFailure().GetCause().GetApplicationFailureInfo()
		if info == nil {
			info = failed.GetFailure().GetApplicationFailureInfo()
		}
		require.NotNil(t, info)
		assert.Equal(t, tgerrors.TypeQuotaExhausted, info.GetType())
		assert.True(t, info.GetNonRetryable())
	})

	t.Run("a plugin on both client and worker gates once", func(t *testing.T) {
		twiceStore := capacity.NewMemoryStore(capacity.MemoryOptions{})
		// 10 tokens/s in a 600-token bucket: a second settle's debt would show.
		l := capacity.Limits{RequestsPerMinute: 6000, TokensPerMinute: 600, SafetyMargin: 1, Burst: time.Minute}
		twice, err := interceptor.NewPlugin(interceptor.Options{
			Store:  twiceStore,
			Limits: func(capacity.Scope) (capacity.Limits, bool) { return l, true },
		})
		require.NoError(t, err)
		c2, err := client.NewClientFromExisting(c, client.Options{Plugins: []client.Plugin{twice}})
		require.NoError(t, err)
		w2 := worker.New(c2, "tollgate-e2e-twice", worker.Options{Plugins: []worker.Plugin{twice}})
		w2.RegisterActivityWithOptions(acts.Chat, activity.RegisterOptions{Name: "Chat"})
		w2.RegisterWorkflow(E2EChatWorkflow)
		require.NoError(t, w2.Start())
		defer w2.Stop()
		run, err := c2.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "e2e-twice", TaskQueue: "tollgate-e2e-twice"}, E2EChatWorkflow, call("gpt-4o", "team-a"), int32(0))
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil))
		snap, err := twiceStore.Snapshot(ctx, gpt4o)
		require.NoError(t, err)
		// 100 tokens used (61 reserved) leave 500 of 600, plus a few seconds' refill at 10/s.
		assert.InDelta(t, 520, snap.Level[capacity.Tokens], 20, "charged and settled once")
	})

	t.Run("a small MaximumAttempts is refused", func(t *testing.T) {
		calls := provider.calls.Load()
		err := start("e2e-misconfigured", 3).Get(ctx, nil)
		require.Error(t, err)
		var ae *temporal.ApplicationError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, interceptor.TypeMisconfigured, ae.Type())
		assert.Contains(t, ae.Message(), "MaximumAttempts")
		assert.Equal(t, calls, provider.calls.Load(), "refused before calling the provider")
	})
}

func history(t *testing.T, ctx context.Context, c client.Client, run client.WorkflowRun) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	return events
}

func activityStarted(t *testing.T, ctx context.Context, c client.Client, run client.WorkflowRun) *historypb.ActivityTaskStartedEventAttributes {
	for _, ev := range history(t, ctx, c, run) {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			return a
		}
	}
	return nil
}

func activityFailed(t *testing.T, ctx context.Context, c client.Client, run client.WorkflowRun) *historypb.ActivityTaskFailedEventAttributes {
	for _, ev := range history(t, ctx, c, run) {
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			return a
		}
	}
	return nil
}
