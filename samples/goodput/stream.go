package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// stream is the interactive stream of a run: an InteractiveWorkflow every
// Workload.Every, from startStream until stop; none if Every is 0.
type stream struct {
	env   *Env
	queue string
	in    Run

	stopTicks   chan struct{}
	ticker      sync.WaitGroup
	calls       sync.WaitGroup // one per call
	cancelCalls context.CancelFunc

	mu      sync.Mutex
	results []InteractiveResult
	pending map[int]pendingCall // calls not answered yet
}

// pendingCall is a call not answered yet: when it was started and its run.
type pendingCall struct {
	start time.Time
	run   client.WorkflowRun // nil until started
}

// startStream starts the stream's first call and its ticker, unless
// in.Workload.Every is 0.
func startStream(ctx context.Context, env *Env, queue string, in Run) *stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{env: env, queue: queue, in: in, stopTicks: make(chan struct{}), cancelCalls: cancel, pending: map[int]pendingCall{}}
	if in.Workload.Every <= 0 {
		return s // the batch alone
	}
	s.ticker.Add(1)
	go func() {
		defer s.ticker.Done()
		tick := time.NewTicker(in.Workload.Every)
		defer tick.Stop()
		for i := 0; ; i++ {
			s.calls.Add(1)
			go s.call(ctx, i)
			select {
			case <-s.stopTicks:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// call runs interactive call i and records its outcome.
func (s *stream) call(ctx context.Context, i int) {
	defer s.calls.Done()
	s.mu.Lock()
	s.pending[i] = pendingCall{start: time.Now()}
	s.mu.Unlock()
	run, err := s.env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fmt.Sprintf("%s-interactive-%d", s.queue, i), TaskQueue: s.queue,
	}, InteractiveWorkflow, s.in, i)
	if err != nil {
		return // stays pending
	}
	s.mu.Lock()
	s.pending[i] = pendingCall{start: s.pending[i].start, run: run}
	s.mu.Unlock()
	var res InteractiveResult
	if err := run.Get(ctx, &res); err != nil {
		return
	}
	s.mu.Lock()
	delete(s.pending, i)
	s.results = append(s.results, res)
	s.mu.Unlock()
}

// stop starts no more calls, waits at most wait for those in flight, and
// returns every call's latency and how many failed. A call still
// unanswered counts as failed, with its time so far as its latency (a
// lower bound), and its workflow is terminated.
func (s *stream) stop(wait time.Duration) (latencies []time.Duration, failed int) {
	close(s.stopTicks)
	s.ticker.Wait()
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		s.cancelCalls()
		<-done
	}
	s.cancelCalls()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.results {
		latencies = append(latencies, r.Latency)
		if r.Failed {
			failed++
		}
	}
	now := time.Now()
	for _, p := range s.pending {
		latencies = append(latencies, now.Sub(p.start))
		failed++
		if p.run != nil {
			terminate(s.env.Client, p.run)
		}
	}
	return latencies, failed
}
