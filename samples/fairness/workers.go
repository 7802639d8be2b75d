package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/internal/workerproc"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// apiKey is the fake provider's only key.
const apiKey = "sk-fairness-fake-3c9e"

// workerSpec is what a worker of a run needs; it crosses to the worker
// processes of the Redis mode as JSON.
type workerSpec struct {
	HostPort, Namespace, Queue string
	BaseURL                    string // the fake provider's OpenAI base URL
	Limits                     capacity.Limits
	Fairness                   map[string]capacity.Fairness
	// Slots is each worker's MaxConcurrentActivityExecutionSize: room for
	// every call of the run, so every waiting call waits in the store.
	Slots         int
	Redis, Prefix string            // Redis mode only
	Engine        redisstore.Engine // Redis mode only
}

// activityPollers is each worker's activity task pollers: enough that a
// backlog scheduled at once reaches the store within a fraction of a
// second (the default, 2, takes about 1.5 s for 500 tasks).
const activityPollers = 16

// fairStart is the plugin's FairStart: the tenants' first calls, which
// reach the workers over a second or so (Temporal's matching dispatches
// the backlogs by weight, a few tasks at a time), gather this long on the
// scope at rest, so the first burst is shared by weight rather than
// granted to the first calls to arrive. With 500 ms, on 4 Redis workers
// the first burst (75,000 tokens) went to the tenants in the proportions
// their calls had arrived (seed 3: A 24,586, B 21,180, C 10,943 tokens
// per weight), and the largest gap, on the first second, was over 2 × the
// largest call in 5 seed-3 runs of 13 (16,830–23,258 tokens against 14,976);
// with 1 s it went 14,353, 14,786 and 14,627 (seed 1).
const fairStart = time.Second

// newWorker returns a worker of spec on store.
func newWorker(c client.Client, spec workerSpec, store capacity.Store) (worker.Worker, error) {
	limits := spec.Limits
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:     store,
		Limits:    func(capacity.Scope) (capacity.Limits, bool) { return limits, true },
		Fairness:  spec.Fairness,
		FairStart: fairStart,
	})
	if err != nil {
		return nil, err
	}
	acts, err := NewActivities(spec.BaseURL)
	if err != nil {
		return nil, err
	}
	w := worker.New(c, spec.Queue, worker.Options{
		MaxConcurrentActivityExecutionSize: spec.Slots,
		MaxConcurrentActivityTaskPollers:   activityPollers,
		Plugins:                            []worker.Plugin{plugin},
	})
	w.RegisterWorkflow(TenantWorkflow)
	w.RegisterWorkflow(InteractiveWorkflow)
	w.RegisterActivity(acts)
	return w, nil
}

// startWorkers starts the run's workers: one in this process on a memory
// store, or, with env.Redis, workers processes sharing a redisstore under
// a fresh prefix. It returns the function that stops them.
func startWorkers(ctx context.Context, env *Env, spec workerSpec, workers int) (stop func(), err error) {
	if env.Redis == "" {
		w, err := newWorker(env.Client, spec, capacity.NewMemoryStore(capacity.MemoryOptions{}))
		if err != nil {
			return nil, err
		}
		if err := w.Start(); err != nil {
			return nil, err
		}
		return w.Stop, nil
	}
	if err := pingRedis(ctx, env.Redis); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	spec.Redis, spec.Prefix, spec.Engine = env.Redis, "fairness-"+hex.EncodeToString(b[:]), env.Engine
	return workerproc.Start(ctx, workers, spec)
}

// pingRedis reports why Redis at addr cannot be used, or nil.
func pingRedis(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis at %s: %w", addr, err)
	}
	return nil
}

// workerMain is a worker process: the run's worker on a redisstore, until
// its standard input closes.
func workerMain(specJSON string) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	if spec.Redis == "" {
		return errors.New("worker process without Redis")
	}
	c, err := client.Dial(client.Options{HostPort: spec.HostPort, Namespace: spec.Namespace, Logger: devserver.QuietLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: spec.Redis, PoolSize: 64})
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: spec.Prefix, Engine: spec.Engine})
	if err != nil {
		return err
	}
	defer store.Close()
	w, err := newWorker(c, spec, store)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	workerproc.Serve()
	return nil
}
