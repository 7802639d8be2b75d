package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// stream is the interactive stream: an InteractiveWorkflow every Plan.Every
// from startStream until stop.
type stream struct {
	stopTicks chan struct{}
	ticker    sync.WaitGroup
	calls     sync.WaitGroup
	cancel    context.CancelFunc

	mu      sync.Mutex
	results map[int]InteractiveCall
	runs    map[int]client.WorkflowRun // calls not answered yet
}

// startStream starts the stream's first call and its ticker.
func startStream(ctx context.Context, env *Env, queue string, w Workload, every time.Duration) *stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{stopTicks: make(chan struct{}), cancel: cancel,
		results: map[int]InteractiveCall{}, runs: map[int]client.WorkflowRun{}}
	s.ticker.Add(1)
	go func() {
		defer s.ticker.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			s.calls.Add(1)
			go s.call(ctx, env, queue, w, i)
			select {
			case <-s.stopTicks:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// call runs interactive call i and records it: until it is answered, with
// the time the starter asked for it as its schedule.
func (s *stream) call(ctx context.Context, env *Env, queue string, w Workload, i int) {
	defer s.calls.Done()
	s.mu.Lock()
	s.results[i] = InteractiveCall{Index: i, Scheduled: time.Now()}
	s.mu.Unlock()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: interactiveID(queue, i), TaskQueue: queue,
	}, InteractiveWorkflow, w, i)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.runs[i] = run
	s.mu.Unlock()
	var r InteractiveResult
	if err := run.Get(ctx, &r); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, i)
	s.results[i] = InteractiveCall{Index: i, Scheduled: s.results[i].Scheduled, Done: r.Done, Failed: r.Failed}
}

// stop starts no more calls, waits at most grace for those in flight,
// terminates those still unanswered, and returns every call, each
// scheduled when its workflow scheduled its activity (or, if it never did,
// when the starter started the workflow).
func (s *stream) stop(ctx context.Context, c client.Client, queue string, grace time.Duration) ([]InteractiveCall, error) {
	close(s.stopTicks)
	s.ticker.Wait()
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
	s.cancel()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, run := range s.runs {
		terminate(c, run.GetID())
	}
	out := make([]InteractiveCall, 0, len(s.results))
	for i := range len(s.results) {
		call := s.results[i]
		at, err := scheduledAt(ctx, c, interactiveID(queue, i))
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if !at.IsZero() {
			call.Scheduled = at
		}
		out = append(out, call)
	}
	return out, nil
}

// interactiveID is the workflow ID of interactive call i.
func interactiveID(queue string, i int) string { return fmt.Sprintf("%s-interactive-%d", queue, i) }

// isNotFound reports whether err says a workflow does not exist (a call
// whose start failed).
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
