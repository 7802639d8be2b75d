package interceptor_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// The stall test's timings: the model call's heartbeat timeout is half
// the Redis pause and shorter than the settle timeout, so an attempt that
// stops heartbeating while its settle waits for Redis is timed out and run
// again; the settle timeout is shorter than the pause, so every settle is
// given up on. The gate heartbeats every third of the timeout: at 3 s, the
// 2 s of slack that left did not survive a loaded machine (26 of 70 calls
// paid twice in one full run beside another test run).
const (
	stallHeartbeat = 5 * time.Second
	stallSettle    = 8 * time.Second
	stallPause     = 10 * time.Second
)

// StallWorkflow makes one model call with a short heartbeat timeout.
func StallWorkflow(ctx workflow.Context, req activities.OpenAIChatRequest) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		HeartbeatTimeout:       stallHeartbeat,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 0},
	})
	var r activities.Result
	err := workflow.ExecuteActivity(ctx, "Chat", req).Get(ctx, &r)
	return r.Text, err
}

// TestRedisStallDuringSettleNeverPaysTwice pauses Redis (CLIENT PAUSE 10000
// ALL) just as 70 provider calls answer, so every settle waits on it. The
// gate must keep each attempt heartbeating while it settles and return the
// answer once its settle timeout passes, without waiting for Redis: every
// workflow completes and the fake provider answers each call exactly once.
func TestRedisStallDuringSettleNeverPaysTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const n = 70
	const pause = stallPause
	addr := testenv.StartRedisServer(t, "").Addr() // its own: pausing it disturbs no other test
	srv := devserver.StartForTest(t)
	c := srv.Client()

	// Every answer is held until all n calls have arrived and Redis is
	// paused; later arrivals (second attempts) are answered at once.
	var arrivals atomic.Int64
	allIn, release := make(chan struct{}), make(chan struct{})
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{{Name: "gpt-4o-mini", Provider: testsuite.OpenAI,
			Limits: testsuite.Limits{RequestsPerMinute: 60000, TokensPerMinute: 10_000_000}}},
		Keys: []string{"sk-stall"},
		Latency: func(testsuite.Call, int64) time.Duration {
			if arrivals.Add(1) == n {
				close(allIn)
			}
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			return 0
		},
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	// Commands wait out the pause (go-redis's 3 s read timeout, retried
	// three times, would give up on a late settle, whose lease would then
	// hold its slot until LeaseTTL).
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 2 * stallPause})
	t.Cleanup(func() { _ = rdb.Close() })
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: "stall"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	reader := sdkmetric.NewManualReader()
	limits := capacity.Limits{RequestsPerMinute: 60000, TokensPerMinute: 10_000_000, Burst: 5 * time.Second, SafetyMargin: 1}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:         store,
		Limits:        func(capacity.Scope) (capacity.Limits, bool) { return limits, true },
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		SettleTimeout: stallSettle,
	})
	require.NoError(t, err)
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{"stall": "sk-stall"}, BaseURL: fp.OpenAIBaseURL(),
	})
	require.NoError(t, err)
	const queue = "tollgate-stall"
	// The gate heartbeats every third of the timeout; the SDK sends at most
	// one heartbeat per 0.8 × the timeout unless told otherwise, which left
	// the server 0.6 s of slack: with the race detector and other tests
	// running, 2 of 18 runs timed attempts out on heartbeats and paid twice
	// (docs/operations.md, Heartbeats).
	w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}, MaxHeartbeatThrottleInterval: stallHeartbeat / 3})
	w.RegisterActivity(oa)
	w.RegisterWorkflow(StallWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		// Prompts of distinct lengths: the record tells the calls apart by
		// their input tokens.
		p := fmt.Sprintf("call %d:", i) + strings.Repeat(" word", i+1)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("stall-%d", i), TaskQueue: queue}, StallWorkflow,
			activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "stall", MaxTokens: 50,
				Messages: []activities.Message{{Role: "user", Content: p}}})
		require.NoError(t, err)
		runs[i] = run
	}
	select {
	case <-allIn:
	case <-ctx.Done():
		t.Fatalf("only %d of %d calls reached the provider", arrivals.Load(), n)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", strconv.Itoa(int(pause.Milliseconds())), "ALL").Err())
	_ = admin.Close()
	paused := time.Now()
	close(release)

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, run := range runs {
		wg.Go(func() { errs[i] = run.Get(ctx, nil) })
	}
	wg.Wait()
	took := time.Since(paused)

	answered := map[int64]int{} // input tokens → successful answers
	ok := 0
	for _, e := range fp.Entries() {
		if e.Status == 200 {
			answered[e.Usage.InputTokens]++
			ok++
		}
	}
	completed := 0
	for _, err := range errs {
		if err == nil {
			completed++
		}
	}
	t.Logf("Redis paused %v as %d calls answered: %d successful provider responses (%d requests) for %d workflows; %d completed, the last %v after the pause began",
		pause, n, ok, len(fp.Entries()), n, completed, took.Round(100*time.Millisecond))
	for i, err := range errs {
		assert.NoErrorf(t, err, "workflow %d", i)
	}
	assert.Equal(t, n, ok, "the provider answered each call once")
	assert.Len(t, answered, n, "every call was answered")
	for tokens, k := range answered {
		assert.Equalf(t, 1, k, "the call of %d input tokens was answered %d times", tokens, k)
	}
	// The settles the gate stopped waiting for land once Redis is back:
	// the slots come back without waiting for the leases to expire.
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "stall"}
	if assert.Eventually(t, func() bool {
		snap, err := store.Snapshot(ctx, sc)
		return err == nil && len(snap.Leases) == 0
	}, 15*time.Second, 50*time.Millisecond, "every lease settled once Redis came back") {
		t.Logf("no lease left %v after the pause began (LeaseTTL %v)", time.Since(paused).Round(100*time.Millisecond), interceptor.DefaultLeaseTTL)
	}
	failures := settleFailures(t, reader)
	t.Logf("settles given up on after SettleTimeout (%v) or failed: %v", stallSettle, failures)
	assert.Equal(t, int64(n), failures["timeout"]+failures["error"], "every call returned its answer without waiting for Redis")
}
