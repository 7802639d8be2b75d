package workflows_test

import (
	"context"
	"errors"
	"go.temporal.io/sdk/worker"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Input is the test activities' input: a model call on Provider.
type Input struct{ Provider string }

func (in Input) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: capacity.Provider(in.Provider), Model: "m", Credential: "default"}
}

// PointerInput has TollgateCall on its pointer only: passed as a value,
// the gate would not see it.
type PointerInput struct{}

func (*PointerInput) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: capacity.OpenAI, Model: "m", Credential: "default"}
}

// TestCallModelRefusesInputsTheGateCannotSee: an input that is no
// ModelCall as given, a value whose TollgateCall has a pointer receiver
// above all, is refused before anything is scheduled, since the gate would
// run it ungated.
func TestCallModelRefusesInputsTheGateCannotSee(t *testing.T) {
	tests := []struct {
		name  string
		input any
		ok    bool
		hint  string
	}{
		{"value receiver", Input{Provider: "openai"}, true, ""},
		{"pointer receiver, pointer input", &PointerInput{}, true, ""},
		{"pointer receiver, value input", PointerInput{}, false, "pointer receiver"},
		{"not a model call", struct{ Prompt string }{"hi"}, false, ""},
		{"nil", nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout})
			scheduled := 0
			env.RegisterActivityWithOptions(func(ctx context.Context, _ any) (string, error) {
				scheduled++
				return "ok", nil
			}, activity.RegisterOptions{Name: "Primary"})
			// The workflow reports what CallModel returned: a workflow's
			// error reaches the test converted, without its chain.
			type refusal struct {
				NotModelCall bool
				Message      string
			}
			env.ExecuteWorkflow(func(ctx workflow.Context) (refusal, error) {
				var out string
				_, err := workflows.CallModel(ctx, workflows.Options{}, capacity.Standard,
					[]workflows.Call{{Activity: "Primary", Input: tt.input}}, &out)
				if err == nil {
					return refusal{}, nil
				}
				return refusal{NotModelCall: errors.Is(err, workflows.ErrNotModelCall), Message: err.Error()}, nil
			})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var got refusal
			require.NoError(t, env.GetWorkflowResult(&got))
			if tt.ok {
				assert.Equal(t, refusal{}, got)
				assert.Equal(t, 1, scheduled)
				return
			}
			assert.True(t, got.NotModelCall, got.Message)
			assert.Contains(t, got.Message, tt.hint)
			assert.Zero(t, scheduled, "nothing scheduled")
		})
	}
}

// Outcome is what the test workflow returns.
type Outcome struct {
	Used    int
	Text    string
	ErrType string
	Elapsed time.Duration
}

func callWorkflow(opts workflows.Options, chain []workflows.Call) func(ctx workflow.Context) (Outcome, error) {
	return func(ctx workflow.Context) (Outcome, error) {
		start := workflow.Now(ctx)
		var text string
		used, err := workflows.CallModel(ctx, opts, capacity.Bulk, chain, &text)
		o := Outcome{Used: used, Text: text, Elapsed: workflow.Now(ctx).Sub(start)}
		if err != nil {
			if c, ok := tgerrors.ClassOf(err); ok {
				o.ErrType = tgerrors.TypeOf(c)
			} else {
				o.ErrType = err.Error()
			}
		}
		return o, nil
	}
}

var chain = []workflows.Call{
	{Activity: "Primary", Input: Input{Provider: "openai"}},
	{Activity: "Fallback", Input: Input{Provider: "anthropic"}},
}

func quota(reset time.Time) error {
	return tgerrors.ActivityError(tgerrors.Verdict{Class: tgerrors.QuotaExhausted, ResetAt: reset}, "openai/gpt-4o/batch")
}

// run executes the workflow with Primary answering from primary (one
// function per attempt, the last repeating) and Fallback answering "fallback".
func run(t *testing.T, opts workflows.Options, primary []func() (string, error), setup func(env *testsuite.TestWorkflowEnvironment)) (Outcome, int) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout})
	calls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in Input) (string, error) {
		f := primary[min(calls, len(primary)-1)]
		calls++
		return f()
	}, activity.RegisterOptions{Name: "Primary"})
	env.RegisterActivityWithOptions(func(ctx context.Context, in Input) (string, error) {
		return "fallback", nil
	}, activity.RegisterOptions{Name: "Fallback"})
	if setup != nil {
		setup(env)
	}
	env.ExecuteWorkflow(callWorkflow(opts, chain))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var o Outcome
	require.NoError(t, env.GetWorkflowResult(&o))
	return o, calls
}

func ok(text string) func() (string, error) { return func() (string, error) { return text, nil } }

func TestCallModelRecovery(t *testing.T) {
	start := time.Now()
	for _, tc := range []struct {
		name       string
		opts       workflows.Options
		primary    []func() (string, error)
		signal     string
		wantUsed   int
		wantText   string
		wantErr    string
		wantCalls  int
		minElapsed time.Duration
	}{
		{name: "success", primary: []func() (string, error){ok("primary")}, wantText: "primary", wantCalls: 1},
		{
			name:     "quota resets soon: sleep, then the same call",
			opts:     workflows.Options{SleepUntilReset: 6 * time.Hour},
			primary:  []func() (string, error){func() (string, error) { return "", quota(start.Add(2 * time.Hour)) }, ok("primary")},
			wantUsed: 0, wantText: "primary", wantCalls: 2, minElapsed: 2*time.Hour - time.Minute,
		},
		{
			name:     "quota resets too late: fall back",
			opts:     workflows.Options{SleepUntilReset: time.Hour},
			primary:  []func() (string, error){func() (string, error) { return "", quota(start.Add(20 * time.Hour)) }},
			wantUsed: 1, wantText: "fallback", wantCalls: 1,
		},
		{
			name: "spend cap until the day's end: sleep, then the same call",
			opts: workflows.Options{SleepUntilReset: 6 * time.Hour},
			primary: []func() (string, error){func() (string, error) {
				return "", tgerrors.ActivityError(tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Reason: tgerrors.ReasonSpendCap,
					Code: tgerrors.SpendCapTenant, ResetAt: start.Add(3 * time.Hour)}, "openai/gpt-4o/batch")
			}, ok("primary")},
			wantUsed: 0, wantText: "primary", wantCalls: 2, minElapsed: 3*time.Hour - time.Minute,
		},
		{
			name:     "billing exhausted, no reset: fall back",
			primary:  []func() (string, error){func() (string, error) { return "", quota(time.Time{}) }},
			wantUsed: 1, wantText: "fallback", wantCalls: 1,
		},
		{
			name: "bad credential: fall back",
			primary: []func() (string, error){func() (string, error) {
				return "", tgerrors.ActivityError(tgerrors.Verdict{Class: tgerrors.BadCredential}, "")
			}},
			wantUsed: 1, wantText: "fallback", wantCalls: 1,
		},
		{
			name: "context too long: no fallback can help",
			primary: []func() (string, error){func() (string, error) {
				return "", tgerrors.ActivityError(tgerrors.Verdict{Class: tgerrors.ContextTooLong}, "")
			}},
			wantUsed: 0, wantErr: tgerrors.TypeContextTooLong, wantCalls: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, calls := run(t, tc.opts, tc.primary, nil)
			assert.Equal(t, tc.wantUsed, o.Used)
			assert.Equal(t, tc.wantText, o.Text)
			assert.Equal(t, tc.wantErr, o.ErrType)
			assert.Equal(t, tc.wantCalls, calls)
			assert.GreaterOrEqual(t, o.Elapsed, tc.minElapsed)
		})
	}
}

func TestCallModelPausesUntilSignalled(t *testing.T) {
	opts := workflows.Options{PauseSignal: "quota-fixed"}
	single := []workflows.Call{{Activity: "Primary", Input: Input{}}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout})
	calls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in Input) (string, error) {
		calls++
		if calls == 1 {
			return "", quota(time.Time{})
		}
		return "after the pause", nil
	}, activity.RegisterOptions{Name: "Primary"})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow("quota-fixed", nil) }, 3*time.Hour)
	env.ExecuteWorkflow(callWorkflow(opts, single))
	require.NoError(t, env.GetWorkflowError())
	var o Outcome
	require.NoError(t, env.GetWorkflowResult(&o))
	assert.Equal(t, "after the pause", o.Text)
	assert.Equal(t, 2, calls)
	assert.GreaterOrEqual(t, o.Elapsed, 3*time.Hour)
}

func TestActivityOptions(t *testing.T) {
	opts := workflows.Options{TaskQueues: map[capacity.Class]string{capacity.Interactive: "llm-interactive"}}
	ao := opts.ActivityOptions(capacity.Interactive)
	assert.Equal(t, "llm-interactive", ao.TaskQueue)
	assert.Equal(t, 1, ao.Priority.PriorityKey)
	assert.Equal(t, int32(0), ao.RetryPolicy.MaximumAttempts, "unlimited attempts: waits are attempts")
	assert.Equal(t, workflows.DefaultScheduleToClose, ao.ScheduleToCloseTimeout)
	assert.Equal(t, workflows.DefaultHeartbeat, ao.HeartbeatTimeout)
	bulk := opts.ActivityOptions(capacity.Bulk)
	assert.Empty(t, bulk.TaskQueue, "the workflow's own queue")
	assert.Equal(t, 5, bulk.Priority.PriorityKey)
	_, err := workflows.CallModel(nil, opts, capacity.Bulk, nil, nil)
	assert.ErrorIs(t, err, workflows.ErrNoCalls)
}
