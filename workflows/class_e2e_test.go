package workflows_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/workflows"
)

const (
	classModel            = "gpt-4o-mini"
	classInteractiveQueue = "class-interactive"
	classBulkQueue        = "class-bulk"
)

// classOptions routes each class to its own task queue, as a deployment
// with separate interactive and batch workers does.
var classOptions = workflows.Options{
	TaskQueues:      map[capacity.Class]string{capacity.Interactive: classInteractiveQueue, capacity.Bulk: classBulkQueue},
	ScheduleToClose: 2 * time.Minute,
	StartToClose:    time.Minute,
}

// chatRequest is a request with no class of its own: the class is stated
// once, to CallModel.
func chatRequest(prompt string, maxTokens int64) activities.OpenAIChatRequest {
	return activities.OpenAIChatRequest{
		Model: classModel, Credential: "default", MaxTokens: maxTokens,
		Messages: []activities.Message{{Role: "user", Content: prompt}},
	}
}

// AskWorkflow answers one question as interactive work.
func AskWorkflow(ctx workflow.Context, question string) (string, error) {
	var res activities.Result
	_, err := workflows.CallModel(ctx, classOptions, capacity.Interactive, []workflows.Call{{Activity: "Chat", Input: chatRequest(question, 100)}}, &res)
	return res.Text, err
}

// BacklogWorkflow makes n bulk calls at once and returns how many succeeded.
func BacklogWorkflow(ctx workflow.Context, n int) (int, error) {
	futures := make([]workflow.Future, n)
	for i := range futures {
		f, settable := workflow.NewFuture(ctx)
		futures[i] = f
		workflow.Go(ctx, func(ctx workflow.Context) {
			var res activities.Result
			_, err := workflows.CallModel(ctx, classOptions, capacity.Bulk, []workflows.Call{{Activity: "Chat", Input: chatRequest(fmt.Sprintf("Classify document %d.", i), 100)}}, &res)
			settable.Set(nil, err)
		})
	}
	ok := 0
	for _, f := range futures {
		if f.Get(ctx, nil) == nil {
			ok++
		}
	}
	return ok, nil
}

// reserveCounter counts the gate's reservation requests by class and
// numbers, in the order the store answered them, each call's first request
// and its grant.
type reserveCounter struct {
	capacity.Store
	mu      sync.Mutex
	byClass map[capacity.Class]int
	seq     int
	calls   map[string]*reserveOrder
}

// reserveOrder is where one call's first reservation request and its grant
// fall in the store's order of answers (grant 0: never granted).
type reserveOrder struct {
	class        capacity.Class
	asked, grant int
}

func (r *reserveCounter) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byClass[req.Class]++
	res, err := r.Store.Reserve(ctx, req)
	r.seq++
	if r.calls == nil {
		r.calls = map[string]*reserveOrder{}
	}
	o := r.calls[req.Call]
	if o == nil {
		o = &reserveOrder{class: req.Class, asked: r.seq}
		r.calls[req.Call] = o
	}
	if err == nil && res.Granted && o.grant == 0 {
		o.grant = r.seq
	}
	return res, err
}

// lastGrant returns where the last grant to a call of class c falls in the
// store's order of answers (0: none).
func (r *reserveCounter) lastGrant(c capacity.Class) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := 0
	for _, o := range r.calls {
		if o.class == c {
			last = max(last, o.grant)
		}
	}
	return last
}

// overtook returns, for each call of class prio, how many calls of class
// other first asked before it and were granted after it.
func (r *reserveCounter) overtook(prio, other capacity.Class) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, p := range r.calls {
		if p.class != prio {
			continue
		}
		n := 0
		for _, o := range r.calls {
			if o.class == other && o.asked < p.asked && (o.grant == 0 || o.grant > p.grant) {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}

// TestClassFromCallModelProtectsInteractive: on a real dev server, a bulk
// backlog saturates a 600 RPM budget while interactive questions arrive;
// both classes are stated only to CallModel (the requests carry none). With
// BulkFloor 0.3 the gate, reading the class the plugin propagates, lets the
// questions through ahead of the backlog. Before the class was propagated
// every call here ranked Standard and the questions queued behind the batch.
func TestClassFromCallModelProtectsInteractive(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const (
		docs      = 120
		questions = 24
		every     = 350 * time.Millisecond
	)
	srv := devserver.StartForTest(t)
	c := srv.Client()
	fp, err := testsuite.New(testsuite.Options{
		Models:  []testsuite.Model{{Name: classModel, Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 600, BurstWindow: 2 * time.Second}}},
		Latency: func(testsuite.Call, int64) time.Duration { return 100 * time.Millisecond },
	})
	require.NoError(t, err)
	defer fp.Close()

	// 600 RPM at the default 0.95 margin: 9.5 requests/s in a 19-request
	// bucket, of which bulk may not take the last 30%.
	limits := capacity.Limits{RequestsPerMinute: 600, Burst: 2 * time.Second, BulkFloor: 0.3}
	store := &reserveCounter{Store: capacity.NewMemoryStore(capacity.MemoryOptions{}), byClass: map[capacity.Class]int{}}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return limits, true },
	})
	require.NoError(t, err)
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{"default": testsuite.DefaultKey}, BaseURL: fp.OpenAIBaseURL(),
	})
	require.NoError(t, err)
	for _, queue := range []string{classInteractiveQueue, classBulkQueue} {
		w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
		w.RegisterWorkflow(AskWorkflow)
		w.RegisterWorkflow(BacklogWorkflow)
		w.RegisterActivity(oa)
		require.NoError(t, w.Start())
		defer w.Stop()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	batch, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: classBulkQueue}, BacklogWorkflow, docs)
	require.NoError(t, err)
	var (
		batchOK   int
		batchTime time.Duration
		batchErr  error
		batchDone = make(chan struct{})
	)
	go func() {
		defer close(batchDone)
		batchErr = batch.Get(ctx, &batchOK)
		batchTime = time.Since(start)
	}()

	time.Sleep(time.Second) // let the backlog fill the budget
	var (
		mu        sync.Mutex
		latencies []time.Duration
		lastDone  time.Duration
		failed    []error
		wg        sync.WaitGroup
	)
	for q := range questions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: classInteractiveQueue}, AskWorkflow, fmt.Sprintf("Question %d?", q))
			if err == nil {
				err = run.Get(ctx, nil)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			latencies = append(latencies, time.Since(t0))
			lastDone = max(lastDone, time.Since(start))
		}()
		time.Sleep(every)
	}
	wg.Wait()
	<-batchDone
	require.NoError(t, batchErr)
	require.Empty(t, failed)

	slices.Sort(latencies)
	n := len(latencies)
	p50, p95 := latencies[n/2], latencies[min(n-1, (n*95+99)/100-1)]
	rep := fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: classModel})
	n429 := 0
	for _, k := range rep.RateLimited {
		n429 += k
	}
	store.mu.Lock()
	byClass := map[string]int{}
	for c, k := range store.byClass {
		byClass[c.String()] = k
	}
	store.mu.Unlock()
	t.Logf("interactive: %d answered, p50 %v, p95 %v, max %v (asked every %v while the backlog ran), the last %v after the backlog began",
		n, p50.Round(time.Millisecond), p95.Round(time.Millisecond), latencies[n-1].Round(time.Millisecond), every, lastDone.Round(time.Millisecond))
	t.Logf("bulk: %d/%d in %v = %.1f calls/s (budget 9.5 requests/s); provider: %d requests, %d 429s; gate reservations by class %v",
		batchOK, docs, batchTime.Round(time.Millisecond), float64(batchOK)/batchTime.Seconds(), rep.Entries, n429, byClass)

	assert.Equal(t, docs, batchOK)
	assert.Equal(t, questions, n)
	// The backlog outlasted every question, on the store's order of
	// answers (the completion times above move with the machine's load).
	assert.Greater(t, store.lastGrant(capacity.Bulk), store.lastGrant(capacity.Interactive), "the backlog outlasted every question")
	assert.Zero(t, byClass["standard"], "every class came from CallModel")
	assert.Positive(t, byClass["interactive"])
	assert.Positive(t, byClass["bulk"])
	// Ahead of the backlog, as an order (the latencies above move with the
	// machine's load, and are only logged): every question was granted
	// before bulk calls that had asked before it.
	ahead := store.overtook(capacity.Interactive, capacity.Bulk)
	t.Logf("bulk calls each question went ahead of: %v", ahead)
	assert.Len(t, ahead, questions)
	for i, k := range ahead {
		assert.Positivef(t, k, "question %d waited behind every bulk call that asked before it", i)
	}
}
