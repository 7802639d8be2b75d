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

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// redisWorkers is how many worker processes tollgate-redis runs.
const redisWorkers = 4

// pingRedis reports why Redis at addr cannot be used, or nil.
func pingRedis(ctx context.Context, addr string) error {
	if addr == "" {
		return errors.New("no Redis address (set TOLLGATE_REDIS_ADDR or -redis)")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis at %s: %w", addr, err)
	}
	return nil
}

// startRedisWorkers re-executes the program redisWorkers times as worker
// processes sharing one redisstore under a fresh prefix, and waits until
// each polls. Stopping closes their standard input, on which they exit.
func startRedisWorkers(ctx context.Context, env *Env, spec workerSpec) (stop func(), err error) {
	if err := pingRedis(ctx, env.Redis); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSkipped, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	spec.Redis, spec.Prefix = env.Redis, "goodput-"+hex.EncodeToString(b[:])
	return workerproc.Start(ctx, redisWorkers, spec)
}

// workerMain is a tollgate-redis worker process: the tollgate plugin on a
// redisstore, until its standard input closes.
func workerMain(specJSON string) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
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
	plugin, err := tollgatePlugin(store, TollgateRedis, spec.Limits)
	if err != nil {
		return err
	}
	oa, an, err := modelActivities(spec)
	if err != nil {
		return err
	}
	w := newWorker(c, spec.Queue, worker.Options{Plugins: []worker.Plugin{plugin}}, oa, an)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	workerproc.Serve()
	return nil
}
