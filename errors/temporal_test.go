package errors

import (
	"context"
	stderrors "errors"
	"go.temporal.io/sdk/worker"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// halfJitter is a fixed jitter source: half of the window.
func halfJitter(n time.Duration) time.Duration { return n / 2 }

// fixtureVerdict classifies the named shared fixture from plain HTTP.
func fixtureVerdict(t *testing.T, name string) Verdict {
	t.Helper()
	for _, fc := range loadErrorFixtures(t) {
		if fc.Name == name {
			return ClassifyHTTP(fc.Provider, fc.Status, fixtureHeader(fc.Headers), []byte(fc.Body), fixtureTime)
		}
	}
	t.Fatalf("no fixture %q", name)
	return Verdict{}
}

// temporalCase is one class as it must come out of a failing activity.
type temporalCase struct {
	name    string
	verdict Verdict
	is      func(error) bool
	typ     string
	// retryable and delay are NonRetryable and NextRetryDelay as the
	// workflow sees them (halfJitter).
	retryable bool
	delay     time.Duration
	benign    bool
}

func temporalCases(t *testing.T) []temporalCase {
	overloadedWait := fixtureVerdict(t, "anthropic-529-overloaded")
	overloadedWait.RetryAfter = 3 * time.Second
	return []temporalCase{
		{name: "rate limited with retry-after", verdict: fixtureVerdict(t, "openai-429-tpm"), is: IsRateLimited, typ: TypeRateLimited,
			retryable: true, delay: 2*time.Second + time.Second, benign: true},
		{name: "rate limited with a reset header wait", verdict: fixtureVerdict(t, "openai-429-rpm-no-retry-after"), is: IsRateLimited,
			typ: TypeRateLimited, retryable: true, delay: 120*time.Millisecond + 60*time.Millisecond, benign: true},
		{name: "rate limited without a wait", verdict: fixtureVerdict(t, "gemini-429-per-minute"), is: IsRateLimited, typ: TypeRateLimited,
			retryable: true, delay: 30 * time.Second, benign: true},
		{name: "quota exhausted", verdict: fixtureVerdict(t, "gemini-429-daily"), is: IsQuotaExhausted, typ: TypeQuotaExhausted},
		{name: "billing", verdict: fixtureVerdict(t, "openai-429-insufficient-quota"), is: IsQuotaExhausted, typ: TypeQuotaExhausted},
		{name: "overloaded", verdict: fixtureVerdict(t, "anthropic-529-overloaded"), is: IsOverloaded, typ: TypeOverloaded, retryable: true},
		{name: "overloaded with retry-after", verdict: overloadedWait, is: IsOverloaded, typ: TypeOverloaded,
			retryable: true, delay: 3*time.Second + 1500*time.Millisecond},
		{name: "bad credential", verdict: fixtureVerdict(t, "openai-401-invalid-key"), is: IsBadCredential, typ: TypeBadCredential},
		{name: "no access", verdict: fixtureVerdict(t, "anthropic-403"), is: IsNoAccess, typ: TypeNoAccess},
		{name: "context too long", verdict: fixtureVerdict(t, "openai-400-context-length"), is: IsContextTooLong, typ: TypeContextTooLong},
		{name: "request too large for the bucket", verdict: fixtureVerdict(t, "openai-429-request-too-large"), is: IsContextTooLong,
			typ: TypeContextTooLong},
		{name: "bad request", verdict: fixtureVerdict(t, "openai-400-bad-request"), is: IsBadRequest, typ: TypeBadRequest},
		{name: "transient", verdict: fixtureVerdict(t, "openai-500"), is: IsTransient, typ: TypeTransient, retryable: true},
		{name: "unknown", verdict: Classify("", stderrors.New("something odd"), fixtureTime), is: func(err error) bool {
			c, ok := ClassOf(err)
			return ok && c == Unknown
		}, typ: TypeUnknown, retryable: true},
	}
}

// seen is what the workflow saw of the activity.
type seen struct {
	err      error
	elapsed  time.Duration
	attempts int
}

// runFailingActivity runs a workflow whose activity fails its first attempt
// with conv.ActivityError(v) and succeeds after, with at most maxAttempts
// attempts (0: unlimited).
func runFailingActivity(t *testing.T, conv Converter, v Verdict, maxAttempts int32) seen {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	// A minute, not a second: a loaded machine can pause a workflow longer.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	var out seen
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		out.attempts++
		if activity.GetInfo(ctx).Attempt == 1 {
			return conv.ActivityError(v, "provider/group/credential")
		}
		return nil
	}, activity.RegisterOptions{Name: "call"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:    10 * time.Second,
				BackoffCoefficient: 2,
				MaximumAttempts:    maxAttempts,
			},
		})
		start := workflow.Now(ctx)
		out.err = workflow.ExecuteActivity(ctx, "call").Get(ctx, nil)
		out.elapsed = workflow.Now(ctx).Sub(start)
		return nil
	}, workflow.RegisterOptions{Name: "wf"})
	env.ExecuteWorkflow("wf")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	return out
}

func TestActivityErrorAsWorkflowSeesIt(t *testing.T) {
	conv := Converter{Jitter: halfJitter}
	for _, tc := range temporalCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got := runFailingActivity(t, conv, tc.verdict, 1)
			require.Equal(t, 1, got.attempts)
			require.Error(t, got.err)

			var actErr *temporal.ActivityError
			require.ErrorAs(t, got.err, &actErr)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, got.err, &appErr)
			require.Equal(t, tc.typ, appErr.Type())
			require.Equal(t, !tc.retryable, appErr.NonRetryable())
			require.Equal(t, tc.delay, appErr.NextRetryDelay())
			wantCategory := temporal.ApplicationErrorCategoryUnspecified
			if tc.benign {
				wantCategory = temporal.ApplicationErrorCategoryBenign
			}
			require.Equal(t, wantCategory, appErr.Category())
			require.Nil(t, appErr.Unwrap(), "the SDK error is never the cause")
			require.True(t, tc.is(got.err))

			d, ok := DetailsOf(got.err)
			require.True(t, ok)
			require.Equal(t, DetailsFor(tc.verdict, "provider/group/credential"), d)
			class, ok := ClassOf(got.err)
			require.True(t, ok)
			require.Equal(t, tc.verdict.Class, class)
		})
	}
}

func TestActivityErrorRetries(t *testing.T) {
	conv := Converter{Jitter: halfJitter}
	for _, tc := range temporalCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got := runFailingActivity(t, conv, tc.verdict, 0)
			if !tc.retryable {
				require.Equal(t, 1, got.attempts, "terminal classes are not retried")
				require.True(t, tc.is(got.err))
				return
			}
			require.NoError(t, got.err)
			require.Equal(t, 2, got.attempts)
			want := tc.delay
			if want == 0 {
				want = 10 * time.Second // the retry policy's InitialInterval
			}
			require.Equal(t, want, got.elapsed)
		})
	}
}
