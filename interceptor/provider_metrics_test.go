package interceptor_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// tokensReport is a success whose headers report the tokens dimension
// (the scripted provider adds requests: limit 600, remaining 590).
func tokensReport(limit, remaining string) reply {
	return reply{status: 200, header: map[string]string{"x-ratelimit-limit-tokens": limit, "x-ratelimit-remaining-tokens": remaining}}
}

// tollgate.provider.remaining is the least remaining the provider reported
// per scope and dimension in the current minute of the worker's clock (a
// new minute starts again from its first report); tollgate.provider.limit
// the limit last reported. Both carry the budget gauges' tags.
func TestProviderRemainingGauge(t *testing.T) {
	rec := newRecording()
	minute := time.Now().Truncate(time.Minute) // the test environment's time is real time at the start; the calls have an hour
	clock := capacitytest.NewManualClock(minute)
	// Each call's answer is observed at the clock the call sets: calls 1
	// to 3 in one minute, call 4 in the next.
	at := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 70 * time.Second}
	var seen []float64 // the gauge as each call starts: the reports before it
	scope := gpt4o.Key()
	gauge := map[string]string{"scope": scope, "dimension": "tokens", "activity_type": "none", "workflow_type": "none", "task_queue": "none"}
	n := 0
	during := func(context.Context, ChatInput) {
		if ps := rec.find("tollgate.provider.remaining", gauge); len(ps) == 1 {
			seen = append(seen, ps[0].Value)
		}
		clock.Set(minute.Add(at[n]))
		n++
	}

	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
	s.SetMetricsHandler(rec)
	e := s.NewTestWorkflowEnvironment()
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:        capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock}),
		Limits:       func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(6000), true },
		Clock:        clock,
		MaxLocalWait: -1,
	})
	require.NoError(t, err)
	e.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout, Plugins: []worker.Plugin{plugin}})
	provider := newScripted(t, tokensReport("10000", "5000"), tokensReport("10000", "3000"), tokensReport("10000", "4000"), tokensReport("12000", "9000"))
	acts := &chatActivities{baseURL: provider.srv.URL, keys: map[string]string{"team-a": "sk-test-a"}, during: during}
	e.RegisterActivityWithOptions(acts.Chat, activity.RegisterOptions{Name: "Chat"})
	e.RegisterWorkflow(StepsWorkflow)
	var steps []Step
	for range at {
		steps = append(steps, Step{In: call("gpt-4o", "team-a")})
	}
	e.ExecuteWorkflow(StepsWorkflow, steps)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())

	assert.Equal(t, []float64{5000, 3000, 3000}, seen, "the least of the minute: 5000, then 3000, and 3000 again after a report of 4000")
	assert.Equal(t, 9000.0, rec.value(t, "tollgate.provider.remaining", gauge), "a new minute starts from its first report")
	assert.Equal(t, 12000.0, rec.value(t, "tollgate.provider.limit", gauge), "the last limit reported")
	requests := merge(gauge, map[string]string{"dimension": "requests"})
	assert.Equal(t, 590.0, rec.value(t, "tollgate.provider.remaining", requests))
	assert.Equal(t, 600.0, rec.value(t, "tollgate.provider.limit", requests))
	assert.Empty(t, rec.find("tollgate.provider.remaining", map[string]string{"activity_type": "Chat"}), "a scope's gauge, not an activity's")
	assert.Empty(t, rec.find("tollgate.provider.remaining", map[string]string{"dimension": "input_tokens"}), "only the dimensions reported")
	assert.NotContains(t, rec.dump(), "sk-test-a", "no key in the metrics")
}

// tollgate.deadline.missed counts the calls refused because they could not
// be sent before their schedule-to-close deadline.
func TestDeadlineMissedCounter(t *testing.T) {
	rec := newRecording()
	e, _ := newMetricsEnvWith(t, rec, func(o *interceptor.Options) {
		o.Limits = func(capacity.Scope) (capacity.Limits, bool) {
			return capacity.Limits{RequestsPerMinute: 1, SafetyMargin: 1, Burst: time.Minute}, true
		}
	}, nil)
	e.RegisterWorkflow(ShortDeadlineWorkflow)
	e.ExecuteWorkflow(ShortDeadlineWorkflow)
	require.NoError(t, e.GetWorkflowError())
	var types []string
	require.NoError(t, e.GetWorkflowResult(&types))
	require.Equal(t, []string{"ok", tgerrors.TypeDeadlineUnmeetable}, types)
	assert.Equal(t, 1.0, rec.value(t, "tollgate.deadline.missed", map[string]string{"scope": gpt4o.Key(), "class": "standard", "workflow_type": "ShortDeadlineWorkflow"}))
}
