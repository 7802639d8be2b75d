package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// redisWorkers is how many worker processes tollgate-redis runs.
const redisWorkers = 4

// workerFlag is the hidden flag that makes the program a tollgate-redis
// worker process; its value is the workerSpec as JSON.
const workerFlag = "-worker"

// ready is the line a worker process prints once its worker polls.
const ready = "ready"

// workerArg returns the workerSpec JSON of a worker process's arguments
// (workerFlag, value); ok is false for any other arguments.
func workerArg(args []string) (spec string, ok bool) {
	if len(args) == 2 && args[0] == workerFlag {
		return args[1], true
	}
	return "", false
}

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
	arg, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*workerProcess
	stop = func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for range redisWorkers {
		p, err := startWorkerProcess(ctx, exe, string(arg))
		if err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, p)
	}
	return stop, nil
}

// workerProcess is one running tollgate-redis worker process.
type workerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startWorkerProcess(ctx context.Context, exe, spec string) (*workerProcess, error) {
	cmd := exec.Command(exe, workerFlag, spec)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &workerProcess{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if l == ready {
			return p, nil
		}
		p.stop()
		return nil, fmt.Errorf("worker process %d did not start", cmd.Process.Pid)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		p.stop()
		return nil, fmt.Errorf("worker process %d did not start within a minute", cmd.Process.Pid)
	}
}

// stop closes the process's standard input and waits for it to exit,
// killing it after 10 s.
func (p *workerProcess) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
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
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: spec.Prefix})
	if err != nil {
		return err
	}
	defer store.Close()
	plugin, err := tollgatePlugin(store, spec.Limits)
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
	fmt.Println(ready)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}
