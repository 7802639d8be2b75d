package interceptor_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// UsageInput is the input of the Summarize test activity: a call that
// reports the usage it is told to.
type UsageInput struct {
	Provider  capacity.Provider
	MaxTokens int64
	// Input is the input the call is admitted on; Estimated says it is an
	// estimate. ActualInput and Output are the usage it reports.
	Input, ActualInput, Output int64
	Estimated                  bool
	UsageKey                   string
}

func (in UsageInput) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: in.Provider, Model: "m", Credential: "team-a", UsageKey: in.UsageKey,
		Demand: capacity.Demand{InputTokens: in.Input, InputEstimated: in.Estimated, MaxTokens: in.MaxTokens}}
}

// UsageResult implements interceptor.ModelResult.
type UsageResult struct{ Usage capacity.Usage }

func (r UsageResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: true}
}

func summarize(_ context.Context, in UsageInput) (UsageResult, error) {
	return UsageResult{Usage: capacity.Usage{InputTokens: in.ActualInput, OutputTokens: in.Output}}, nil
}

// UsageWorkflow runs Summarize for each input in turn.
func UsageWorkflow(ctx workflow.Context, inputs []UsageInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1000},
	})
	for _, in := range inputs {
		if err := workflow.ExecuteActivity(ctx, "Summarize", in).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// chargeLog records what each Reserve asked for and each Settle charged.
type chargeLog struct {
	*capacity.MemoryStore
	mu       sync.Mutex
	reserved []capacity.Charges
	settled  []capacity.Charges
}

func (c *chargeLog) Reserve(ctx context.Context, r capacity.Request) (capacity.Reservation, error) {
	c.mu.Lock()
	c.reserved = append(c.reserved, r.Charges)
	c.mu.Unlock()
	return c.MemoryStore.Reserve(ctx, r)
}

func (c *chargeLog) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	c.mu.Lock()
	c.settled = append(c.settled, final)
	c.mu.Unlock()
	return c.MemoryStore.Settle(ctx, l, final)
}

func (c *chargeLog) log() (reserved, settled []capacity.Charges) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]capacity.Charges(nil), c.reserved...), append([]capacity.Charges(nil), c.settled...)
}

// usageEnv is a test environment whose gate learns (reading the store at
// every call) on a memory store that logs its charges.
func usageEnv(t *testing.T, mod func(*interceptor.Options)) (*testsuite.TestWorkflowEnvironment, *chargeLog) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
	e := s.NewTestWorkflowEnvironment()
	store := &chargeLog{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{Clock: envClock{e}})}
	opts := interceptor.Options{
		Store: store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) {
			return capacity.Limits{RequestsPerMinute: 100_000, TokensPerMinute: 100_000_000, OutputTokensPerMinute: 600_000,
				Burst: time.Minute, SafetyMargin: 1}, true
		},
		Clock:        envClock{e},
		MaxLocalWait: -1,
		Learning:     interceptor.LearnOptions{Refresh: -1},
	}
	if mod != nil {
		mod(&opts)
	}
	plugin, err := interceptor.NewPlugin(opts)
	require.NoError(t, err)
	e.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout, Plugins: []worker.Plugin{plugin}})
	e.RegisterWorkflow(UsageWorkflow)
	e.RegisterActivityWithOptions(summarize, activity.RegisterOptions{Name: "Summarize"})
	return e, store
}

func runUsage(t *testing.T, e *testsuite.TestWorkflowEnvironment, inputs []UsageInput) {
	t.Helper()
	e.ExecuteWorkflow(UsageWorkflow, inputs)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
}

// outputs returns n outputs cycling through 300, 305, ..., 395 and, every
// 20th, 420: their p95 is 395.
func outputs(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 300 + int64(i%20)*5
		if i%20 == 19 {
			out[i] = 420
		}
	}
	return out
}

func TestLearnedOutputReservation(t *testing.T) {
	const n, maxTokens = 30, 8192
	for _, tc := range []struct {
		name     string
		provider capacity.Provider
		learns   bool // the reservation drops to the p95 after MinSamples
	}{
		{"anthropic reserves the learned p95", capacity.Anthropic, true},
		{"openai keeps charging max_tokens", capacity.OpenAI, false},
		{"gemini meters no output", capacity.Gemini, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, store := usageEnv(t, nil)
			var inputs []UsageInput
			for _, out := range outputs(n) {
				inputs = append(inputs, UsageInput{Provider: tc.provider, MaxTokens: maxTokens, Input: 1000, ActualInput: 1000, Output: out})
			}
			runUsage(t, e, inputs)
			reserved, _ := store.log()
			require.Len(t, reserved, n)
			for i, c := range reserved {
				if tc.provider == capacity.Gemini {
					assert.Zero(t, c[capacity.OutputTokens], "call %d", i)
					continue
				}
				if !tc.learns || i < interceptor.DefaultLearnMinSamples {
					assert.Equal(t, int64(maxTokens), c[capacity.OutputTokens], "call %d: max_tokens", i)
					assert.Equal(t, int64(1000+maxTokens), c[capacity.Tokens], "call %d: input + max_tokens", i)
					continue
				}
				// p95 of the outputs is 395; the histogram answers up to a
				// bucket (9 %) above.
				assert.GreaterOrEqual(t, c[capacity.OutputTokens], int64(395), "call %d", i)
				assert.LessOrEqual(t, c[capacity.OutputTokens], int64(435), "call %d", i)
				assert.Equal(t, 1000+c[capacity.OutputTokens], c[capacity.Tokens], "call %d", i)
			}
			learned, err := store.Learned(context.Background(), capacity.Scope{Provider: tc.provider, LimitGroup: "m", Credential: "team-a"}, "Summarize")
			require.NoError(t, err)
			assert.InDelta(t, n, learned.Calls(), 1e-9, "every provider's calls are learned (for advise)")
		})
	}
}

// A call whose output exceeds the learned reservation is not refused or
// failed: settling charges its actual output, the excess as debt.
func TestOversizedOutputOnlyMakesDebt(t *testing.T) {
	e, store := usageEnv(t, nil)
	scope := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "team-a"}
	var inputs []UsageInput
	var total int64
	for _, out := range append(outputs(25), 6000) {
		inputs = append(inputs, UsageInput{Provider: capacity.Anthropic, MaxTokens: 8192, Input: 100, ActualInput: 100, Output: out})
		total += out
	}
	runUsage(t, e, inputs)
	reserved, settled := store.log()
	require.Len(t, settled, 26)
	assert.Less(t, reserved[25][capacity.OutputTokens], int64(435), "reserved about the p95")
	assert.Equal(t, int64(6000), settled[25][capacity.OutputTokens], "settled to the actual output")
	snap, err := store.Snapshot(context.Background(), scope)
	require.NoError(t, err)
	assert.InDelta(t, 600_000-total, snap.Level[capacity.OutputTokens], 1,
		"every output is charged in full, beyond its reservation (the clock stood still)")
	assert.Empty(t, snap.Blocks)
	assert.Empty(t, snap.Leases)
}

func TestLearnedInputCalibration(t *testing.T) {
	e, store := usageEnv(t, nil)
	var inputs []UsageInput
	for range 25 { // the provider counts 20 % more than the estimate
		inputs = append(inputs, UsageInput{Provider: capacity.Anthropic, MaxTokens: 100, Input: 1000, ActualInput: 1200, Output: 50, Estimated: true})
	}
	inputs = append(inputs, UsageInput{Provider: capacity.Anthropic, MaxTokens: 100, Input: 1000, ActualInput: 1200, Output: 50}) // exact
	runUsage(t, e, inputs)
	reserved, _ := store.log()
	require.Len(t, reserved, 26)
	assert.Equal(t, int64(1000), reserved[19][capacity.InputTokens], "19 samples: the estimate as it is")
	got := reserved[20][capacity.InputTokens]
	assert.GreaterOrEqual(t, got, int64(1200), "calibrated, erring high")
	assert.LessOrEqual(t, got, int64(1320))
	assert.Equal(t, int64(1000), reserved[25][capacity.InputTokens], "an exact input is not calibrated")
}

func TestLearningOptions(t *testing.T) {
	t.Run("disabled learns nothing", func(t *testing.T) {
		e, store := usageEnv(t, func(o *interceptor.Options) { o.Learning.Disabled = true })
		var inputs []UsageInput
		for _, out := range outputs(25) {
			inputs = append(inputs, UsageInput{Provider: capacity.Anthropic, MaxTokens: 8192, Input: 10, ActualInput: 10, Output: out})
		}
		runUsage(t, e, inputs)
		reserved, _ := store.log()
		assert.Equal(t, int64(8192), reserved[24][capacity.OutputTokens])
		kinds, err := store.LearnedKinds(context.Background(), capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "team-a"})
		require.NoError(t, err)
		assert.Empty(t, kinds)
	})
	t.Run("usage key names the kind", func(t *testing.T) {
		e, store := usageEnv(t, func(o *interceptor.Options) { o.Learning.MinSamples = 2 })
		runUsage(t, e, []UsageInput{
			{Provider: capacity.Anthropic, MaxTokens: 4096, Output: 64, UsageKey: "short"},
			{Provider: capacity.Anthropic, MaxTokens: 4096, Output: 64, UsageKey: "short"},
			{Provider: capacity.Anthropic, MaxTokens: 4096, Output: 64, UsageKey: "Summarize this"}, // refused: learns nothing
			{Provider: capacity.Anthropic, MaxTokens: 4096, Output: 64, UsageKey: "short"},
			{Provider: capacity.Anthropic, MaxTokens: 4096, Output: 64}, // the activity type: nothing learned yet
		})
		reserved, _ := store.log()
		assert.Equal(t, int64(64), reserved[3][capacity.OutputTokens], "two samples of short")
		assert.Equal(t, int64(4096), reserved[4][capacity.OutputTokens])
		kinds, err := store.LearnedKinds(context.Background(), capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "team-a"})
		require.NoError(t, err)
		assert.Equal(t, []string{"Summarize", "short"}, kinds)
	})
	t.Run("a store that fails to learn fails no call", func(t *testing.T) {
		e, _ := usageEnv(t, func(o *interceptor.Options) {
			o.Store = failingLearner{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{})}
		})
		var inputs []UsageInput
		for _, out := range outputs(3) {
			inputs = append(inputs, UsageInput{Provider: capacity.Anthropic, MaxTokens: 8192, Input: 10, Estimated: true, ActualInput: 10, Output: out})
		}
		runUsage(t, e, inputs)
	})
	for _, bad := range []interceptor.LearnOptions{{Quantile: 1.5}, {Quantile: -0.5}, {MinSamples: -1}} {
		_, err := interceptor.NewPlugin(interceptor.Options{Store: capacity.NewMemoryStore(capacity.MemoryOptions{}),
			Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true }, Learning: bad})
		assert.ErrorIs(t, err, interceptor.ErrInvalidOptions, "%+v", bad)
	}
}

// failingLearner is a memory store whose learning always fails.
type failingLearner struct{ *capacity.MemoryStore }

func (failingLearner) Learn(context.Context, capacity.Scope, string, learn.Sample) error {
	return capacity.ErrStoreUnavailable
}

func (failingLearner) Learned(context.Context, capacity.Scope, string) (learn.Learned, error) {
	return learn.Learned{}, capacity.ErrStoreUnavailable
}
