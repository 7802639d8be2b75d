package workflows_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/testsuite/replay"
)

// envRecord turns TestRecordHistories on (make histories).
const envRecord = "TOLLGATE_RECORD_HISTORIES"

// recorderIdentity is the client's and workers' identity in the histories
// (instead of pid@hostname).
const recorderIdentity = "tollgate-recorder"

// TestRecordHistories records the replay histories again on a dev server it
// starts, with the fake provider and the tollgate plugin, and writes them to
// historiesDir. It runs only with TOLLGATE_RECORD_HISTORIES set: `make
// histories`.
func TestRecordHistories(t *testing.T) {
	if os.Getenv(envRecord) == "" {
		t.Skip("records the replay histories on a dev server; run `make histories`")
	}
	if _, err := devserver.Path(); err != nil {
		t.Fatal(err)
	}
	srv := devserver.StartForTest(t)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Identity: recorderIdentity, Logger: devserver.QuietLogger()})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))

	for _, rec := range []struct {
		name   string
		record func(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun
		want   string
		path   func(h *historypb.History) error
	}{
		{name: histRateLimited, record: recordRateLimited, want: "0:" + chatModel, path: retriedActivity},
		{name: histSleepUntilReset, record: recordSleepUntilReset, want: "0:" + chatModel, path: hasEvent(enumspb.EVENT_TYPE_TIMER_FIRED)},
		{name: histFallback, record: recordFallback, want: "1:" + messagesModel, path: hasEvent(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED)},
		{name: histPauseUntilSignal, record: recordPauseUntilSignal, want: "0:" + chatModel, path: hasEvent(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)},
		{name: histAssistant, record: recordAssistant, path: hasEvent(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)},
		{name: histBatchClassify, record: recordBatchClassify, path: hasEvent(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)},
	} {
		t.Run(rec.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run := rec.record(t, ctx, c)
			var out any
			require.NoError(t, run.Get(ctx, &out))
			if rec.want != "" {
				assert.Equal(t, rec.want, out)
			}
			h, err := replay.Fetch(ctx, c, run.GetID(), run.GetRunID())
			require.NoError(t, err)
			require.NoError(t, rec.path(h), "the run did not take the path it records")
			path := historyPath(rec.name)
			require.NoError(t, replay.Save(h, path))
			found, err := historySecretInFile(path)
			require.NoError(t, err)
			if found != "" {
				_ = os.Remove(path)
				t.Fatalf("%s holds %q: not written", path, found)
			}
			t.Logf("%s: %d events", path, len(h.Events))
		})
	}
}

// startWorker starts a worker on queue with the tollgate plugin (opts with
// a fresh memory store and generous limits) and the OpenAI and Anthropic
// activities against fp.
func startWorker(t *testing.T, c client.Client, queue string, fp *testsuite.FakeProvider, opts interceptor.Options) {
	t.Helper()
	opts.Store = capacity.NewMemoryStore(capacity.MemoryOptions{})
	if opts.Limits == nil {
		opts.Limits = func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{RequestsPerMinute: 600}, true }
	}
	plugin, err := interceptor.NewPlugin(opts)
	require.NoError(t, err)
	creds := activities.StaticCredentials{credential: testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL()})
	require.NoError(t, err)
	w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}, Identity: recorderIdentity})
	w.RegisterActivity(oa)
	w.RegisterActivity(an)
	registerWorkflows(w)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

func newProvider(t *testing.T, models ...testsuite.Model) *testsuite.FakeProvider {
	t.Helper()
	fp, err := testsuite.New(testsuite.Options{Models: models, Seed: 14})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	return fp
}

// spendOne spends one request of model from another client, as if a second
// process shared the key.
func spendOne(t *testing.T, fp *testsuite.FakeProvider, model string) {
	t.Helper()
	e, err := fp.Spend(testsuite.Scope{Key: testsuite.DefaultKey, Model: model}, testsuite.Demand{InputTokens: 10, MaxTokens: 10})
	require.NoError(t, err)
	require.Equal(t, 200, e.Status)
}

func start(t *testing.T, ctx context.Context, c client.Client, id, queue string, wf any, args ...any) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, wf, args...)
	require.NoError(t, err)
	return run
}

// One request every three seconds: the request after another client's gets
// a 429 with a retry-after of a few seconds, and Temporal retries the
// activity after that delay.
func recordRateLimited(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	fp := newProvider(t, testsuite.Model{Name: chatModel, Provider: testsuite.OpenAI,
		Limits: testsuite.Limits{RequestsPerMinute: 20, BurstWindow: testsuite.PerSecond}})
	startWorker(t, c, "replay-rate-limited", fp, interceptor.Options{})
	spendOne(t, fp, chatModel)
	return start(t, ctx, c, "replay-rate-limited", "replay-rate-limited", RateLimitedWorkflow)
}

// One request every three seconds, and a classifier for which any wait past
// a second is an exhausted quota: the 429 is QuotaExhausted with ResetAt
// seconds away, and CallModel sleeps until then.
func recordSleepUntilReset(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	fp := newProvider(t, testsuite.Model{Name: chatModel, Provider: testsuite.OpenAI,
		Limits: testsuite.Limits{RequestsPerMinute: 20, BurstWindow: testsuite.PerSecond}})
	startWorker(t, c, "replay-sleep", fp, interceptor.Options{Classifier: tgerrors.Classifier{MaxRateLimitWait: time.Second}})
	spendOne(t, fp, chatModel)
	return start(t, ctx, c, "replay-sleep-until-reset", "replay-sleep", SleepUntilResetWorkflow)
}

// OpenAI's only daily request is spent (insufficient_quota, no reset):
// CallModel falls back to Anthropic.
func recordFallback(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	fp := newProvider(t,
		testsuite.Model{Name: chatModel, Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerDay: 1}},
		testsuite.Model{Name: messagesModel, Provider: testsuite.Anthropic})
	startWorker(t, c, "replay-fallback", fp, interceptor.Options{})
	spendOne(t, fp, chatModel)
	return start(t, ctx, c, "replay-fallback", "replay-fallback", FallbackWorkflow)
}

// OpenAI's only daily request is spent and there is no fallback: CallModel
// pauses; the quota is raised, the signal sent, and the call runs again.
func recordPauseUntilSignal(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	fp := newProvider(t, testsuite.Model{Name: chatModel, Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerDay: 1}})
	const block = 500 * time.Millisecond
	startWorker(t, c, "replay-pause", fp, interceptor.Options{QuotaBlockUnknown: block})
	spendOne(t, fp, chatModel)
	run := start(t, ctx, c, "replay-pause-until-signal", "replay-pause", PauseUntilSignalWorkflow)
	// Paused: the failure is in the history and the workflow task after it
	// completed.
	require.NoError(t, waitForHistory(ctx, c, run, func(h *historypb.History) bool {
		failed := false
		for _, e := range h.Events {
			switch e.EventType {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
				failed = true
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				if failed {
					return true
				}
			}
		}
		return false
	}))
	require.NoError(t, fp.SetLimits(chatModel, testsuite.Limits{}))
	time.Sleep(2 * block) // the gate's block of the scope ends
	require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), resumeSignal, nil))
	return run
}

// startSampleWorkers starts the sample's two workers, on the interactive and
// the batch queue, with the sample's limits.
func startSampleWorkers(t *testing.T, c client.Client) {
	fp := newProvider(t)
	plugin := interceptor.Options{Limits: func(capacity.Scope) (capacity.Limits, bool) { return ab.Limits, true }}
	startWorker(t, c, ab.InteractiveQueue, fp, plugin)
	startWorker(t, c, ab.BatchQueue, fp, plugin)
}

func recordAssistant(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	startSampleWorkers(t, c)
	return start(t, ctx, c, "replay-assistant", ab.InteractiveQueue, ab.AssistantWorkflow, "How do I export the weekly report?")
}

func recordBatchClassify(t *testing.T, ctx context.Context, c client.Client) client.WorkflowRun {
	startSampleWorkers(t, c)
	return start(t, ctx, c, "replay-batch-classify", ab.BatchQueue, ab.BatchClassifyWorkflow, 3)
}

func waitForHistory(ctx context.Context, c client.Client, run client.WorkflowRun, done func(*historypb.History) bool) error {
	for {
		h, err := replay.Fetch(ctx, c, run.GetID(), run.GetRunID())
		if err == nil && done(h) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", run.GetID(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func hasEvent(t enumspb.EventType) func(*historypb.History) error {
	return func(h *historypb.History) error {
		for _, e := range h.Events {
			if e.EventType == t {
				return nil
			}
		}
		return fmt.Errorf("no %v event", t)
	}
}

// retriedActivity reports whether an activity completed on a later attempt
// (a retry after a delay, not a new activity).
func retriedActivity(h *historypb.History) error {
	for _, e := range h.Events {
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.Attempt > 1 && a.LastFailure != nil {
			return nil
		}
	}
	return fmt.Errorf("no activity retried")
}
