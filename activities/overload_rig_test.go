package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/workflows"
)

// overloadModel is the model of every overload run; each run has its own
// fake provider and store, so runs never share a budget.
const overloadModel = "gpt-4o-mini"

// OverloadCall is one model call of an OverloadWorkflow.
type OverloadCall struct {
	Words         int // prompt length (prompt(i, Words))
	MaxTokens     int64
	Class         capacity.Class
	ScheduleClose time.Duration
}

// OverloadSpec is the input of OverloadWorkflow.
type OverloadSpec struct {
	Model string
	// TaskQueue is the activities' task queue; empty: the workflow's.
	TaskQueue string
	// Heartbeat is the activities' heartbeat timeout.
	Heartbeat time.Duration
	// First numbers the first call's prompt, so the prompts of one run's
	// workflows differ.
	First int
	Calls []OverloadCall
}

// OverloadResult is, for each call, "" if it succeeded, else the type of
// the application error it failed with ("timeout" or the error's text for
// other failures).
type OverloadResult struct {
	Errors []string
}

// OverloadWorkflow schedules every call of spec at once, each with the
// options a model call needs (unlimited attempts bounded by its
// schedule-to-close timeout), and waits for all of them.
func OverloadWorkflow(ctx workflow.Context, spec OverloadSpec) (OverloadResult, error) {
	futs := make([]workflow.Future, len(spec.Calls))
	for i, c := range spec.Calls {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              spec.TaskQueue,
			ScheduleToCloseTimeout: c.ScheduleClose,
			StartToCloseTimeout:    time.Minute,
			HeartbeatTimeout:       spec.Heartbeat,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 0},
			// The class's priority key, as CallModel sets it: the dev
			// server's priority matcher dispatches an interactive call
			// ahead of a bulk backlog on the same task queue.
			Priority: workflows.Options{}.ActivityOptions(c.Class).Priority,
		})
		p := prompt(spec.First+i, c.Words)
		futs[i] = workflow.ExecuteActivity(actx, "Chat", activities.OpenAIChatRequest{
			Model: spec.Model, Credential: "e2e", MaxTokens: c.MaxTokens, Class: c.Class,
			Messages: []activities.Message{{Role: "user", Content: p}}, InputTokens: testsuite.PromptTokens(p),
		})
	}
	res := OverloadResult{Errors: make([]string, len(futs))}
	for i, f := range futs {
		err := f.Get(ctx, nil)
		var ae *temporal.ApplicationError
		var te *temporal.TimeoutError
		switch {
		case err == nil:
		case errors.As(err, &ae):
			res.Errors[i] = ae.Type()
		case errors.As(err, &te):
			res.Errors[i] = "timeout"
		default:
			res.Errors[i] = err.Error()
		}
	}
	return res, nil
}

// send is one HTTP request an activity attempt sent to the provider, as
// the worker's transport saw it.
type send struct {
	Worker    int
	Call      string // workflow id / activity id
	Attempt   int32
	Scheduled time.Time // when the workflow scheduled the call (its first attempt)
	Started   time.Time // when the attempt's task was handed to a worker
	Deadline  time.Time // Scheduled + schedule-to-close
	Sent      time.Time
	Answered  time.Time // zero if no answer came
	Status    int
}

// sendLog is an http.RoundTripper that records every request with the
// activity attempt that sent it (read from the request's context), in
// memory and, if out is set, as JSON lines written before the request
// leaves (a child process killed mid-call has logged it).
type sendLog struct {
	worker int
	next   http.RoundTripper
	out    io.Writer
	mu     *sync.Mutex
	sends  *[]send
}

func newSendLog() *sendLog {
	return &sendLog{next: http.DefaultTransport, mu: &sync.Mutex{}, sends: &[]send{}}
}

// forWorker returns the log's transport for worker w: same record.
func (l *sendLog) forWorker(w int) *sendLog {
	c := *l
	c.worker = w
	return &c
}

func (l *sendLog) RoundTrip(req *http.Request) (*http.Response, error) {
	s := send{Worker: l.worker, Sent: time.Now()}
	if ctx := req.Context(); activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		s.Call = info.WorkflowExecution.ID + "/" + info.ActivityID
		s.Attempt = info.Attempt
		s.Scheduled = info.ScheduledTime
		s.Started = info.StartedTime
		s.Deadline = info.ScheduledTime.Add(info.ScheduleToCloseTimeout)
		// Name the attempt to the provider, so that its record (Entry.
		// ClientRequestID) matches the store's grants.
		req = req.Clone(ctx)
		req.Header.Set("X-Client-Request-Id", attemptID(s.Call, s.Attempt))
	}
	if l.out != nil {
		b, _ := json.Marshal(s)
		l.mu.Lock()
		_, _ = l.out.Write(append(b, '\n'))
		l.mu.Unlock()
	}
	resp, err := l.next.RoundTrip(req)
	s.Answered = time.Now()
	if err == nil {
		s.Status = resp.StatusCode
	}
	l.mu.Lock()
	*l.sends = append(*l.sends, s)
	l.mu.Unlock()
	return resp, err
}

// all returns the record, in the order the requests were sent.
func (l *sendLog) all() []send {
	l.mu.Lock()
	out := slices.Clone(*l.sends)
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b send) int { return a.Sent.Compare(b.Sent) })
	return out
}

// attemptCounter is a worker interceptor that counts the attempts of every
// activity, by call (workflow id / activity id), and records the retry
// delays their errors asked Temporal for.
type attemptCounter struct {
	sdkinterceptor.WorkerInterceptorBase
	mu     sync.Mutex
	n      map[string]int
	delays map[string][]time.Duration // call → NextRetryDelay of each failed attempt that set one
}

func newAttemptCounter() *attemptCounter {
	return &attemptCounter{n: map[string]int{}, delays: map[string][]time.Duration{}}
}

func (a *attemptCounter) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	i := &attemptInbound{root: a}
	i.Next = next
	return i
}

type attemptInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	root *attemptCounter
}

func (i *attemptInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	call := info.WorkflowExecution.ID + "/" + info.ActivityID
	i.root.mu.Lock()
	i.root.n[call]++
	i.root.mu.Unlock()
	out, err := i.Next.ExecuteActivity(ctx, in)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.NextRetryDelay() > 0 {
		i.root.mu.Lock()
		i.root.delays[call] = append(i.root.delays[call], ae.NextRetryDelay())
		i.root.mu.Unlock()
	}
	return out, err
}

// retryDelays returns, by call, the NextRetryDelay of each failed attempt
// that set one: the wait the gate asked for, on its clock.
func (a *attemptCounter) retryDelays() map[string][]time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]time.Duration, len(a.delays))
	for k, v := range a.delays {
		out[k] = slices.Clone(v)
	}
	return out
}

func (a *attemptCounter) counts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.n))
	for k, v := range a.n {
		out[k] = v
	}
	return out
}

// rigOptions configure one overload run.
type rigOptions struct {
	Limits  testsuite.Limits      // the provider's
	Gate    capacity.Limits       // tollgate's; zero: gateLimits(Limits)
	Latency testsuite.LatencyFunc // zero: 20 ms
	// HeadersAt is when the provider computes its rate-limit headers.
	HeadersAt testsuite.HeadersTime
	// NewStore returns the store of each worker; nil: one memory store
	// that records its grants and cooldowns (rig.grants).
	NewStore func() capacity.Store
	// Rand is the gate's jitter source (interceptor.Options.Rand); nil:
	// the default, uniform.
	Rand     func() float64
	Workers  int           // zero: 1
	LeaseTTL time.Duration // zero: the default
	Deferred bool          // start the workers with rig.start, not newRig
}

// rig is one overload run: a fake provider serving overloadModel to
// e2eKey, gated workers on their own task queue of the shared dev server,
// the transport's record of what each attempt sent, and the attempts.
type rig struct {
	t        *testing.T
	c        client.Client
	fp       *testsuite.FakeProvider
	scope    testsuite.Scope
	queue    string
	opts     rigOptions
	sends    *sendLog
	attempts *attemptCounter
	stores   []capacity.Store
	grants   *grantLog // the default store's record; nil with NewStore
}

// gateLimits mirrors a fake provider's limits in tollgate's terms: ours,
// with the provider's burst window as the bucket size and its concurrency
// cap. Under overload every bucket runs empty and a booked call is due the
// instant the bucket holds exactly its charge, so with all of each limit
// (SafetyMargin 1) any delay of an earlier call between admission and
// arrival (a first connection's dial) draws a 429: a run under the race
// detector drew one in eight calls of 29 % of the bucket. ours keeps
// testMargin of each limit back for such delays.
func gateLimits(l testsuite.Limits) capacity.Limits {
	g := ours(l)
	g.Burst = l.BurstWindow
	g.MaxInFlight = l.MaxConcurrent
	return g
}

func newRig(t *testing.T, c client.Client, opts rigOptions) *rig {
	t.Helper()
	if opts.Gate == (capacity.Limits{}) {
		opts.Gate = gateLimits(opts.Limits)
	}
	if opts.Latency == nil {
		opts.Latency = func(testsuite.Call, int64) time.Duration { return 20 * time.Millisecond }
	}
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	var grants *grantLog
	if opts.NewStore == nil {
		grants = newGrantLog()
		opts.NewStore = func() capacity.Store { return grants }
	}
	fp, err := testsuite.New(testsuite.Options{
		Models:    []testsuite.Model{{Name: overloadModel, Provider: testsuite.OpenAI, Limits: opts.Limits}},
		Keys:      []string{e2eKey},
		Seed:      11,
		Latency:   opts.Latency,
		HeadersAt: opts.HeadersAt,
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	r := &rig{
		t: t, c: c, fp: fp, scope: testsuite.Scope{Key: e2eKey, Model: overloadModel},
		queue: "overload-" + strings.ReplaceAll(t.Name(), "/", "-"), opts: opts,
		sends: newSendLog(), attempts: newAttemptCounter(), grants: grants,
	}
	if !opts.Deferred {
		r.start(r.queue)
	}
	return r
}

// start starts the rig's workers on queue, all at once.
func (r *rig) start(queue string) {
	t := r.t
	t.Helper()
	workers := make([]worker.Worker, r.opts.Workers)
	for i := range workers {
		store := r.opts.NewStore()
		r.stores = append(r.stores, store)
		gate := r.opts.Gate
		plugin, err := interceptor.NewPlugin(interceptor.Options{
			Store:    store,
			Limits:   func(s capacity.Scope) (capacity.Limits, bool) { return gate, s.LimitGroup == overloadModel },
			LeaseTTL: r.opts.LeaseTTL,
			Rand:     r.opts.Rand,
		})
		require.NoError(t, err)
		oa, err := activities.NewOpenAI(activities.OpenAIOptions{
			Credentials: activities.StaticCredentials{"e2e": e2eKey},
			BaseURL:     r.fp.OpenAIBaseURL(),
			HTTPClient:  &http.Client{Transport: r.sends.forWorker(i)},
		})
		require.NoError(t, err)
		w := worker.New(r.c, queue, worker.Options{Plugins: []worker.Plugin{plugin}, Interceptors: []sdkinterceptor.WorkerInterceptor{r.attempts}})
		w.RegisterActivity(oa)
		w.RegisterWorkflow(OverloadWorkflow)
		workers[i] = w
	}
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Go(func() { errs[i] = w.Start() })
	}
	wg.Wait()
	for i, w := range workers {
		require.NoError(t, errs[i])
		t.Cleanup(w.Stop)
	}
}

// batch returns n calls of the same shape.
func batch(n, words int, maxTokens int64, class capacity.Class, scheduleClose time.Duration) []OverloadCall {
	out := make([]OverloadCall, n)
	for i := range out {
		out[i] = OverloadCall{Words: words, MaxTokens: maxTokens, Class: class, ScheduleClose: scheduleClose}
	}
	return out
}

// begin starts an OverloadWorkflow with id prefix name on the rig's queue.
func (r *rig) begin(name string, spec OverloadSpec) client.WorkflowRun {
	r.t.Helper()
	if spec.Model == "" {
		spec.Model = overloadModel
	}
	if spec.Heartbeat == 0 {
		spec.Heartbeat = 10 * time.Second
	}
	run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: fmt.Sprintf("%s-%s-%d", r.queue, name, time.Now().UnixNano()), TaskQueue: r.queue,
	}, OverloadWorkflow, spec)
	require.NoError(r.t, err)
	return run
}

// wait returns a started workflow's result.
func (r *rig) wait(run client.WorkflowRun) OverloadResult {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res OverloadResult
	require.NoError(r.t, run.Get(ctx, &res))
	return res
}

// run starts an OverloadWorkflow and waits for it.
func (r *rig) run(name string, spec OverloadSpec) OverloadResult {
	r.t.Helper()
	return r.wait(r.begin(name, spec))
}

// entries returns the provider's record of tollgate's requests (Spend
// traffic left out).
func (r *rig) entries() []testsuite.Entry {
	var out []testsuite.Entry
	for _, e := range r.fp.ScopeEntries(r.scope) {
		if !e.Direct {
			out = append(out, e)
		}
	}
	return out
}

// waitForArrivals waits until the provider has recorded n of tollgate's
// requests (answered or refused) and returns the first one's arrival.
func (r *rig) waitForArrivals(n int) time.Time {
	r.t.Helper()
	var first time.Time
	require.Eventually(r.t, func() bool {
		es := r.fp.ScopeEntries(r.scope)
		if len(es) < n {
			return false
		}
		first = es[0].Arrival
		return true
	}, time.Minute, 5*time.Millisecond, "the provider never saw %d requests", n)
	return first
}

// waitForGate waits until n calls whose key contains substr have started
// an attempt (reached the gate).
func (r *rig) waitForGate(substr string, n int) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		k := 0
		for call := range r.attempts.counts() {
			if strings.Contains(call, substr) {
				k++
			}
		}
		return k >= n
	}, time.Minute, 5*time.Millisecond, "fewer than %d calls %q reached the gate", n, substr)
}

// completed counts the calls that succeeded and lists the failures.
func completed(res ...OverloadResult) (ok int, failed []string) {
	for _, r := range res {
		for _, e := range r.Errors {
			if e == "" {
				ok++
			} else {
				failed = append(failed, e)
			}
		}
	}
	return ok, failed
}

// rateLimited counts the 429s among entries.
func rateLimited(entries []testsuite.Entry) int {
	n := 0
	for _, e := range entries {
		if e.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// sentAfterA429 counts the requests answered 429 that were sent within
// reactionWindow after a worker had read another 429: calls granted after
// the gate could have known, or granted just before and sent after.
func sentAfterA429(sends []send) int {
	var refused []send
	for _, s := range sends {
		if s.Status == http.StatusTooManyRequests {
			refused = append(refused, s)
		}
	}
	n := 0
	for _, s := range refused {
		if slices.ContainsFunc(refused, func(o send) bool {
			return o.Answered.Before(s.Sent) && s.Sent.Sub(o.Answered) < reactionWindow
		}) {
			n++
		}
	}
	return n
}

// reactionWindow is how long after a 429 reaches the provider a call the
// gate granted before it read that 429 may still reach the provider: the
// answer read, classified and settled, the granted call's request built and
// sent, under the race detector with other tests running. Every client that
// sends a call when it is granted meets the provider's refusal with the
// calls on their way; their 429s are one event (measured under that load:
// 1–3 × 429, the last 2–150 ms after a limit drop; 3 × 429 within one
// second with TestUnseenClient's headers at admission).
const reactionWindow = 250 * time.Millisecond

// perMinute lists the per-minute dimensions the fake provider meters.
var perMinute = []testsuite.Dimension{testsuite.Requests, testsuite.Tokens, testsuite.InputTokens, testsuite.OutputTokens}

// checkBudgets asserts that no budget of l was exceeded by entries: the
// oracle's peak of every dimension within its bound, and the conformance
// invariant (charges over any interval ≤ bucket + rate × length) in every
// limited per-minute dimension. It returns the worst conformance excess
// (≤ 0 conforms) by dimension, for the log.
func checkBudgets(t *testing.T, entries []testsuite.Entry, l testsuite.Limits) map[testsuite.Dimension]float64 {
	t.Helper()
	rep := testsuite.Analyze(entries, l)
	for _, d := range rep.Dimensions {
		assert.LessOrEqualf(t, float64(d.Peak), d.Bound, "%v: peak over a window of %v above its bound", d.Dimension, d.Period)
	}
	worst := map[testsuite.Dimension]float64{}
	for _, d := range perMinute {
		if l.Limit(d) <= 0 {
			continue
		}
		worst[d] = conformance(entries, d, float64(l.Limit(d))/60, l.Burst(d))
		assert.LessOrEqualf(t, worst[d], 1e-6, "%v: charges over some interval exceed bucket + rate × length", d)
	}
	return worst
}

// retryLayer is what checkOneRetryLayer measured.
type retryLayer struct {
	Attempts, Sends, Requests int
}

func (r retryLayer) String() string {
	return fmt.Sprintf("%d activity attempts, %d of them sent a request; provider requests %d", r.Attempts, r.Sends, r.Requests)
}

// checkOneRetryLayer asserts that the activities are the only retry layer:
// every request the provider recorded was sent by the transport of an
// activity attempt, and no attempt sent more than one (the SDK's own retries
// are off). extra are sends recorded elsewhere (a killed child process).
func (r *rig) checkOneRetryLayer(t *testing.T, entries []testsuite.Entry, extra ...send) retryLayer {
	t.Helper()
	sends := append(r.sends.all(), extra...)
	attempts := r.attempts.counts()
	fig := retryLayer{Sends: len(sends), Requests: len(entries)}
	for _, n := range attempts {
		fig.Attempts += n
	}
	assert.Equal(t, len(sends), len(entries), "every provider request is one sent by an activity attempt")
	perAttempt := map[string]int{}
	perCall := map[string]int{}
	for _, s := range sends {
		if !assert.NotEmpty(t, s.Call, "a request sent outside an activity") {
			continue
		}
		perAttempt[fmt.Sprintf("%s#%d", s.Call, s.Attempt)]++
		perCall[s.Call]++
	}
	for k, n := range perAttempt {
		assert.Equalf(t, 1, n, "attempt %s sent %d requests", k, n)
	}
	if len(extra) == 0 {
		for call, n := range perCall {
			assert.LessOrEqualf(t, n, attempts[call], "call %s sent more requests than it had attempts", call)
		}
	}
	return fig
}

// checkNeverPastDeadline asserts that no request left after its call's
// schedule-to-close deadline.
func checkNeverPastDeadline(t *testing.T, sends []send) {
	t.Helper()
	for _, s := range sends {
		assert.Truef(t, s.Sent.Before(s.Deadline), "call %s attempt %d sent %v after its deadline",
			s.Call, s.Attempt, s.Sent.Sub(s.Deadline))
	}
}

// queueAges returns, for each call whose key keep accepts, how long it
// waited from being scheduled to its first request, sorted.
func queueAges(sends []send, keep func(call string) bool) []time.Duration {
	var ages []time.Duration
	for _, s := range firstSends(sends, keep) {
		ages = append(ages, s.Sent.Sub(s.Scheduled))
	}
	slices.Sort(ages)
	return ages
}

// firstSends returns the first request of each call whose key keep
// accepts, in the order they were sent.
func firstSends(sends []send, keep func(call string) bool) []send {
	first := map[string]send{}
	for _, s := range sends {
		if !keep(s.Call) {
			continue
		}
		if f, ok := first[s.Call]; !ok || s.Sent.Before(f.Sent) {
			first[s.Call] = s
		}
	}
	out := slices.Collect(maps.Values(first))
	slices.SortFunc(out, func(a, b send) int { return a.Sent.Compare(b.Sent) })
	return out
}

// quantile returns the q-quantile (nearest rank) of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// child returns the command that runs this test binary's test run as a
// child process with env added.
func child(t *testing.T, run string, env map[string]string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}
