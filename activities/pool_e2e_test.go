package activities_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// The key pool of TestKeyPool: three keys of one account, named key-1..3
// on the worker.
const (
	poolModel = "gpt-4o-mini"
	poolCalls = 60
)

var poolKeys = map[string]string{
	"key-1": "sk-tollgate-pool1-Zr4T0pKd7Q2xv9Lm",
	"key-2": "sk-tollgate-pool2-Lm9vx2Q7dKp0T4rZ",
	"key-3": "sk-tollgate-pool3-Q7pK0dT4rZLm9vx2",
}

// The provider's limits per key: key-2 is a small key.
var (
	poolBig   = testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 600000, BurstWindow: 2 * time.Second}
	poolSmall = testsuite.Limits{RequestsPerMinute: 120, TokensPerMinute: 600000, BurstWindow: 2 * time.Second}
)

// PoolSpec is the input of PoolWorkflow.
type PoolSpec struct {
	Model, Credential string
	N                 int
}

// PoolWorkflow starts N calls at once on spec.Credential (a pool) and
// returns how many completed.
func PoolWorkflow(ctx workflow.Context, spec PoolSpec) (GoodputResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 0},
	})
	futs := make([]workflow.Future, spec.N)
	for i := range futs {
		p := prompt(i, 20)
		futs[i] = workflow.ExecuteActivity(ctx, "Chat", activities.OpenAIChatRequest{
			Model: spec.Model, Credential: spec.Credential, MaxTokens: 50, InputTokens: testsuite.PromptTokens(p),
			Messages: []activities.Message{{Role: "user", Content: p}},
		})
	}
	var res GoodputResult
	for _, f := range futs {
		if err := f.Get(ctx, nil); err != nil {
			res.Failed++
			workflow.GetLogger(ctx).Error("pool call failed", "error", err)
		} else {
			res.OK++
		}
	}
	return res, nil
}

// TestKeyPool is the key-pool acceptance test on a real dev server: a batch
// of 60 calls on a pool of three keys; mid-run the provider revokes key-1
// and a client tollgate does not see drains small key-2. The batch
// completes on the others; key-1 gets no call after its first 401 and no key
// a 429 after its first. Once with one worker on a memory store, once with
// two workers sharing a Redis store.
func TestKeyPool(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own dev server and fake provider
	srv := devserver.StartForTest(t)
	// Each run has its own fake provider and task queue: both at once.
	concurrently(t, 2, subtest{"Memory", func(t *testing.T) {
		store := capacity.NewMemoryStore(capacity.MemoryOptions{})
		runKeyPool(t, srv.Client(), 1, func() capacity.Store { return store })
	}}, subtest{"Redis2Workers", func(t *testing.T) {
		rdb := testenv.RedisClient(t)
		var b [6]byte
		_, _ = rand.Read(b[:])
		prefix := "tgpool-" + hex.EncodeToString(b[:])
		runKeyPool(t, srv.Client(), 2, func() capacity.Store {
			s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	}})
}

func runKeyPool(t *testing.T, c client.Client, workers int, newStore func() capacity.Store) {
	var keys []string
	for _, k := range poolKeys {
		keys = append(keys, k)
	}
	fp, err := testsuite.New(testsuite.Options{
		Models:  []testsuite.Model{{Name: poolModel, Provider: testsuite.OpenAI, Limits: poolBig}},
		Keys:    keys,
		Seed:    17,
		Latency: func(testsuite.Call, int64) time.Duration { return 20 * time.Millisecond },
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	scope := func(name string) testsuite.Scope { return testsuite.Scope{Key: poolKeys[name], Model: poolModel} }
	require.NoError(t, fp.SetScopeLimits(scope("key-2"), poolSmall))

	// tollgate knows each key's limits, one call in flight per key.
	gate := map[string]capacity.Limits{"key-1": gateLimits(poolBig), "key-2": gateLimits(poolSmall), "key-3": gateLimits(poolBig)}
	for k, l := range gate {
		l.MaxInFlight = 1
		gate[k] = l
	}
	queue := "pool-" + strings.ReplaceAll(t.Name(), "/", "-")
	for range workers {
		plugin, err := interceptor.NewPlugin(interceptor.Options{
			Store: newStore(),
			Limits: func(s capacity.Scope) (capacity.Limits, bool) {
				l, ok := gate[s.Credential]
				return l, ok && s.LimitGroup == poolModel
			},
			Pools: map[string][]string{"pool": {"key-1", "key-2", "key-3"}},
		})
		require.NoError(t, err)
		oa, err := activities.NewOpenAI(activities.OpenAIOptions{
			Credentials: activities.StaticCredentials(poolKeys), BaseURL: fp.OpenAIBaseURL(),
		})
		require.NoError(t, err)
		w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
		w.RegisterActivity(oa)
		w.RegisterWorkflow(PoolWorkflow)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	// Mid-run: key-1 is revoked after 20 answers; after 30, another client
	// drains key-2 until tollgate meets its 429 there.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var revokedAt, drainedAt time.Time
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ok, limited2 := 0, false
			for _, en := range fp.Entries() {
				switch {
				case en.Direct:
				case en.Status == http.StatusOK:
					ok++
				case en.Status == http.StatusTooManyRequests && en.Scope == scope("key-2"):
					limited2 = true
				}
			}
			if ok >= 20 && revokedAt.IsZero() {
				fp.RevokeKey(poolKeys["key-1"])
				revokedAt = time.Now()
			}
			if ok >= 30 && !limited2 {
				if drainedAt.IsZero() {
					drainedAt = time.Now()
				}
				for {
					en, err := fp.Spend(scope("key-2"), testsuite.Demand{InputTokens: 10, MaxTokens: 10})
					if err != nil || en.Status != http.StatusOK {
						break
					}
				}
			}
			if limited2 {
				return
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("pool-%d", time.Now().UnixNano()), TaskQueue: queue},
		PoolWorkflow, PoolSpec{Model: poolModel, Credential: "pool", N: poolCalls})
	require.NoError(t, err)
	var res GoodputResult
	require.NoError(t, run.Get(ctx, &res))
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	// Per key, from the provider's record of tollgate's requests.
	type figures struct {
		requests, ok, limited, refused int
		first429, first401             time.Time // when the first was answered
		after429, after401             int       // 429s, respectively requests, that arrived after it
	}
	per := map[string]*figures{}
	names := []string{"key-1", "key-2", "key-3"}
	for _, n := range names {
		f := &figures{}
		per[n] = f
		for _, en := range fp.ScopeEntries(scope(n)) {
			if en.Direct {
				continue
			}
			if !f.first429.IsZero() && en.Arrival.After(f.first429) && en.Status == http.StatusTooManyRequests {
				f.after429++
			}
			if !f.first401.IsZero() && en.Arrival.After(f.first401) {
				f.after401++
			}
			f.requests++
			switch en.Status {
			case http.StatusOK:
				f.ok++
			case http.StatusTooManyRequests:
				f.limited++
				if f.first429.IsZero() {
					f.first429 = en.Done
				}
			case http.StatusUnauthorized:
				f.refused++
				if f.first401.IsZero() {
					f.first401 = en.Done
				}
			}
		}
	}
	direct, admitted := 0, 0
	for _, en := range fp.ScopeEntries(scope("key-2")) {
		if en.Direct {
			direct++
			if en.Admitted {
				admitted++
			}
		}
	}
	t.Logf("key pool, %d worker(s): %d of %d calls completed, %d failed, in %v (key-1 revoked at +%v; from +%v another client sent %d requests on key-2, %d admitted)",
		workers, res.OK, poolCalls, res.Failed, elapsed.Round(time.Millisecond),
		revokedAt.Sub(start).Round(time.Millisecond), drainedAt.Sub(start).Round(time.Millisecond), direct, admitted)
	for _, n := range names {
		f := per[n]
		t.Logf("  %s: %2d requests, %2d answered, %d 429 (%d after the first), %d 401 (%d requests after the first)",
			n, f.requests, f.ok, f.limited, f.after429, f.refused, f.after401)
	}

	assert.Equal(t, poolCalls, res.OK, "the batch completes on the other keys")
	require.False(t, revokedAt.IsZero(), "key-1 was revoked mid-run")
	require.False(t, drainedAt.IsZero(), "key-2 was drained mid-run")
	k1, k2, k3 := per["key-1"], per["key-2"], per["key-3"]
	assert.Positive(t, k1.ok, "key-1 served calls before it was revoked")
	assert.Equal(t, 1, k1.refused, "key-1: one 401, then out of the pool")
	assert.Zero(t, k1.after401, "key-1 got no call after its first 401")
	assert.Equal(t, 1, k2.limited, "key-2: one 429 and none after it")
	assert.Positive(t, k2.ok)
	assert.Positive(t, k3.ok)
	for _, n := range names {
		assert.LessOrEqualf(t, per[n].limited, 1, "%s: zero 429s after the first", n)
		assert.Zerof(t, per[n].after429, "%s: no request after its first 429 was refused", n)
	}
}
