package activities_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// The scale of every chaos scenario: 80 calls of about 110 tokens (input
// plus max_tokens) against 30,000 tokens a minute (500 a second, a 5 s
// bucket of 2,500) take about 15 s; each call is held 500 ms by the
// provider, and at most 8 run at once.
const (
	chaosWorkers   = 3 // worker processes
	chaosWorkflows = 10
	chaosPerFlow   = 8 // calls per workflow
	chaosCalls     = chaosWorkflows * chaosPerFlow
	chaosWords     = 20
	chaosMaxTokens = 60
	chaosLatency   = 500 * time.Millisecond
	chaosLeaseTTL  = 3 * time.Second // the least the gate accepts
	// chaosBound bounds a batch, faults included.
	chaosBound = 2 * time.Minute
)

// chaosLimits are the provider's; the workers' gate mirrors them
// (gateLimits: the same buckets and in-flight cap, testMargin).
var chaosLimits = testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 30_000, MaxConcurrent: 8, BurstWindow: 5 * time.Second}

// TestChaos runs a batch of workflows through worker processes that share
// one Redis store, against the fake provider, and breaks something in the
// middle of it: a worker is killed holding leases, Redis is lost and comes
// back empty, Redis stalls, the Temporal server restarts, the provider
// answers garbage. Every scenario asserts that
//
//   - no budget was exceeded: the provider's record conforms to its limits
//     over every interval, and it refused nothing (no 429: each scenario
//     says why the design allows none);
//   - no workflow was lost: each completes within the bound, every call
//     answered (or, where the provider answered only garbage, failed with a
//     typed, non-retryable error);
//   - every call was answered by the provider at most once, unless the
//     provider's own record shows that an earlier answer was lost (the
//     client went away, or the answer was garbage), or the answer went to
//     the worker that was killed before it could report it; no activity
//     attempt sent two requests; and every request was at the provider
//     under a live lease (the gate's in-flight count held it throughout);
//   - capacity comes back: a killed worker's leases are reclaimed when
//     they expire, and after every batch the store holds no lease past a
//     safety bound of the lease TTL and 5 s (how soon is printed: a late
//     renewal lands later on a loaded machine).
//
// Each prints its figures (go test -run Chaos -v).
func TestChaos(t *testing.T) {
	if spec := os.Getenv(envChaosWorker); spec != "" {
		chaosWorkerMain(t, spec) // a worker process of a scenario
		return
	}
	if testing.Short() {
		t.Skip("end-to-end: worker processes, Redis and Temporal servers")
	}
	t.Parallel()                     // its own dev server, Redis servers and fake providers
	srv := devserver.StartForTest(t) // the scenarios' but TemporalRestart's
	c, addr := srv.Client(), srv.FrontendHostPort()
	// One scenario at a time: each kills, pauses or restarts something on
	// a schedule and needs the machine to react in time (under two loaded
	// full runs, two scenarios at once timed batches out). TestChaos runs
	// beside the other end-to-end tests (t.Parallel), which fill the time.
	t.Run("KillWorker", func(t *testing.T) { chaosKillWorker(t, c, addr) })
	t.Run("RedisRestartEmpty", func(t *testing.T) { chaosRedisRestartEmpty(t, c, addr) })
	t.Run("RedisPause", func(t *testing.T) { chaosRedisPause(t, c, addr) })
	t.Run("GarbageProvider", func(t *testing.T) { chaosGarbageProvider(t, c, addr) })
	t.Run("TemporalRestart", chaosTemporalRestart)
}

// chaosOptions vary a scenario's workers and calls.
type chaosOptions struct {
	// Heartbeat is the calls' heartbeat timeout: how soon the attempts of a
	// killed worker are retried. If zero, 20 s.
	Heartbeat time.Duration
	// MaxFailures is the gate's; zero: the default.
	MaxFailures int
	// RPCTimeout is the workers' Temporal client's; zero: the SDK's 10 s.
	RPCTimeout time.Duration
}

// chaosRun is one scenario: its own Redis server and fake provider, worker
// processes on a task queue of a Temporal server, the workflows it started.
type chaosRun struct {
	t      *testing.T
	c      client.Client
	redis  *testenv.RedisServer
	rdb    *redis.Client
	store  *redisstore.Store // the test's own view of the budget (Snapshot)
	fp     *testsuite.FakeProvider
	scope  testsuite.Scope
	gscope capacity.Scope
	opts   chaosOptions
	queue  string
	procs  []*chaosProc
	runs   []client.WorkflowRun
	began  time.Time
}

func newChaosRun(t *testing.T, c client.Client, temporalAddr string, opts chaosOptions) *chaosRun {
	t.Helper()
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 20 * time.Second
	}
	r := &chaosRun{t: t, c: c, opts: opts, scope: testsuite.Scope{Key: e2eKey, Model: overloadModel},
		gscope: capacity.LimitGroups{}.ScopeFor(capacity.OpenAI, overloadModel, "e2e", ""),
		queue:  "chaos-" + strings.ReplaceAll(t.Name(), "/", "-")}
	r.redis = testenv.StartRedisServer(t, "")
	r.rdb = redis.NewClient(&redis.Options{Addr: r.redis.Addr()})
	t.Cleanup(func() { _ = r.rdb.Close() })
	var err error
	r.store, err = redisstore.New(r.rdb, redisstore.Options{Prefix: "chaos"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.store.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range r.procs {
				out := p.out.String()
				t.Logf("worker %d's output (end):\n%s", p.spec.Worker, out[max(0, len(out)-3000):])
			}
		}
	})
	r.fp, err = testsuite.New(testsuite.Options{
		Models:  []testsuite.Model{{Name: overloadModel, Provider: testsuite.OpenAI, Limits: chaosLimits}},
		Keys:    []string{e2eKey},
		Seed:    17,
		Latency: func(testsuite.Call, int64) time.Duration { return chaosLatency },
	})
	require.NoError(t, err)
	t.Cleanup(r.fp.Close)
	dir := t.TempDir()
	for w := range chaosWorkers {
		r.procs = append(r.procs, startChaosWorker(t, chaosSpec{
			Worker: w, Temporal: temporalAddr, Redis: r.redis.Addr(), Prefix: "chaos", Provider: r.fp.OpenAIBaseURL(),
			Queue: r.queue, Gate: gateLimits(chaosLimits), LeaseTTL: chaosLeaseTTL, MaxFailures: opts.MaxFailures,
			RPCTimeout: opts.RPCTimeout, Log: filepath.Join(dir, fmt.Sprintf("worker-%d.jsonl", w)),
		}))
	}
	return r
}

// begin starts n workflows of calls calls each, named after batch.
func (r *chaosRun) begin(batch string, n, calls int) []client.WorkflowRun {
	r.t.Helper()
	if r.began.IsZero() {
		r.began = time.Now()
	}
	var runs []client.WorkflowRun
	for k := range n {
		spec := ChaosSpec{Model: overloadModel, First: len(r.runs)*100 + k*100, Calls: calls, Words: chaosWords,
			MaxTokens: chaosMaxTokens, Heartbeat: r.opts.Heartbeat, ScheduleClose: 3 * time.Minute}
		run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: fmt.Sprintf("%s-%s-%d-%d", r.queue, batch, k, time.Now().UnixNano()), TaskQueue: r.queue,
		}, ChaosWorkflow, spec)
		require.NoError(r.t, err)
		runs = append(runs, run)
	}
	r.runs = append(r.runs, runs...)
	return runs
}

// wait waits, within chaosBound, for runs to complete and returns the
// outcomes of their calls. A workflow that does not complete (lost) fails
// the test. Errors from the server (down, restarting) are retried.
func (r *chaosRun) wait(runs []client.WorkflowRun) []ChaosOutcome {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chaosBound)
	defer cancel()
	var out []ChaosOutcome
	var lost []string
	for _, run := range runs {
		for {
			var res []ChaosOutcome
			err := r.c.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &res)
			if err == nil {
				out = append(out, res...)
				break
			}
			var we *temporal.WorkflowExecutionError
			if errors.As(err, &we) || ctx.Err() != nil {
				lost = append(lost, fmt.Sprintf("%s: %v", run.GetID(), err))
				break
			}
			time.Sleep(200 * time.Millisecond) // the server is away: ask again
		}
	}
	require.Empty(r.t, lost, "every workflow completes within %v", chaosBound)
	return out
}

// entries returns the provider's record of the scenario's requests.
func (r *chaosRun) entries() []testsuite.Entry { return r.fp.ScopeEntries(r.scope) }

// waitAnswered waits until the provider has answered n requests.
func (r *chaosRun) waitAnswered(n int) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		k := 0
		for _, e := range r.entries() {
			if e.Status == http.StatusOK {
				k++
			}
		}
		return k >= n
	}, chaosBound, 10*time.Millisecond, "the provider never answered %d requests", n)
}

// redisNow returns Redis TIME, the store's clock.
func (r *chaosRun) redisNow() time.Time {
	now, err := r.rdb.Time(context.Background()).Result()
	require.NoError(r.t, err)
	return now
}

// leaseWatch is what leasesGone saw of some leases.
type leaseWatch struct {
	// Expire is how long after from the last of them expired, by the
	// expiry the store gave it last (a lease is held that long unless
	// renewed); zero if none was held.
	Expire time.Duration
	// Gone is how long after from the first view without any of them was
	// taken, in store time (later than Expire by how often and how soon
	// the test looks).
	Gone time.Duration
	// Snap is that view.
	Snap capacity.Snapshot
}

// leasesGone polls the store's view of the scope (every 20 ms) until none
// of the leases in ids is left (none at all if ids is nil), and says when
// they expired and when they were gone, after from (store time). A lease
// still held after bound (renewed: leaked) fails the test.
func (r *chaosRun) leasesGone(ids map[string]bool, from time.Time, bound time.Duration) leaseWatch {
	r.t.Helper()
	var w leaseWatch
	deadline := time.Now().Add(bound)
	for {
		snap, err := r.store.Snapshot(context.Background(), r.gscope)
		if err == nil {
			left := 0
			for _, l := range snap.Leases {
				if ids == nil || ids[l.ID] {
					left++
					w.Expire = max(w.Expire, l.Expires.Sub(from))
				}
			}
			if left == 0 {
				w.Gone, w.Snap = snap.Now.Sub(from), snap
				return w
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("leases still held %v after %v: %v (%v)", bound, from, snap.Leases, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeAway is what the workers did while the store was away, in (from,
// to): the requests they sent (sent) and, of those, the ones granted
// before from; and the grants in it (the store's time, for a Redis grant).
type storeAway struct{ sent, grantedBefore, grants int }

// awayFigures reads the workers' logs for storeAway.
func (r *chaosRun) awayFigures(from, to time.Time) storeAway {
	var a storeAway
	for _, p := range r.procs {
		grants := map[string]chaosEvent{}
		for _, e := range p.events(r.t) {
			in := e.At.After(from) && e.At.Before(to)
			switch e.Kind {
			case "grant":
				grants[fmt.Sprintf("%s#%d", e.Activity, e.Attempt)] = e
				if in {
					a.grants++
				}
			case "send":
				if in {
					a.sent++
					if g, ok := grants[fmt.Sprintf("%s#%d", e.Call, e.Attempt)]; ok && g.At.Before(from) {
						a.grantedBefore++
					}
				}
			}
		}
	}
	return a
}

// sentBetween counts the requests that reached the provider in (from, to).
func sentBetween(es []testsuite.Entry, from, to time.Time) int {
	n := 0
	for _, e := range es {
		if e.Arrival.After(from) && e.Arrival.Before(to) {
			n++
		}
	}
	return n
}

// chaosFigures is what a scenario measured.
type chaosFigures struct {
	Calls, Workflows, OK int
	Failed               map[string]int // by error type
	Requests, Answers    int            // provider requests; usable answers among them
	Lost                 map[testsuite.Cause]int
	Refused, RateLimited int
	BadHeaders           int
	// Repeats are the calls the provider charged more than once:
	// AfterLost after an answer its record shows lost, AfterKill after an
	// answer that went to the killed worker before it died.
	Repeats, AfterLost, AfterKill int
	Unexplained                   []string
	MaxInFlight                   int
	// SendAfter is the longest a request left after its grant; Expired
	// lists the requests the provider held after their lease expired.
	SendAfter   time.Duration
	Expired     []string
	Conformance map[testsuite.Dimension]float64
	// LeasesExpire and LeasesGone are when the last lease held after the
	// batch expired, and when the store was seen to hold none, after the
	// batch (store time).
	LeasesExpire, LeasesGone time.Duration
	Elapsed                  time.Duration
}

func (f chaosFigures) String() string {
	return fmt.Sprintf("%d calls in %d workflows: %d answered, failed %v | provider: %d requests, %d answers, lost %v, %d refused (%d 429s), %d with garbled headers, in flight at most %d of %d, sent at most %v after the grant (%d held past their lease) | charged twice: %d calls (%d after a lost answer, %d after the killed worker's answer, %d unexplained) | worst conformance excess (≤ 0 conforms) %v | leases after the batch: the last expired %v after it, none left %v after (lease TTL %v) | %v",
		f.Calls, f.Workflows, f.OK, f.Failed, f.Requests, f.Answers, f.Lost, f.Refused, f.RateLimited, f.BadHeaders,
		f.MaxInFlight, chaosLimits.MaxConcurrent, f.SendAfter.Round(time.Millisecond), len(f.Expired), f.Repeats, f.AfterLost, f.AfterKill, len(f.Unexplained),
		f.Conformance, f.LeasesExpire.Round(time.Millisecond), f.LeasesGone.Round(time.Millisecond), chaosLeaseTTL, f.Elapsed.Round(100*time.Millisecond))
}

// describeEntries renders entries of the provider's record for a message.
func describeEntries(es []testsuite.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("[%d %q %s→%s %d %s]", e.Seq, e.ClientRequestID,
			e.Arrival.Format("15:04:05.000"), e.Done.Format("15:04:05.000"), e.Status, e.Cause)
	}
	return strings.Join(parts, " ")
}

// chaosKill is a worker killed mid-batch, for check.
type chaosKill struct {
	proc *chaosProc
	at   time.Time
}

// lostCause reports whether a request the provider admitted (and charged)
// was answered with nothing the client could use, by its own record.
func lostCause(c testsuite.Cause) bool {
	return c == testsuite.CauseCanceled || c == testsuite.CauseConnReset || c == testsuite.CauseGarbage
}

// check asserts the promises every scenario keeps and returns the figures.
// calls is how many calls the outcomes are of; failing says which
// outcomes may be failures (nil: none may), for scenarios that allow them.
func (r *chaosRun) check(outcomes []ChaosOutcome, kill *chaosKill, failing func(o ChaosOutcome) bool) chaosFigures {
	t := r.t
	t.Helper()
	es := r.entries()
	f := chaosFigures{Calls: len(outcomes), Workflows: len(r.runs), Failed: map[string]int{}, Requests: len(es),
		Lost: map[testsuite.Cause]int{}, MaxInFlight: maxInFlight(es), Elapsed: time.Since(r.began)}

	// No workflow lost: each call answered with text, or failed as allowed.
	for _, o := range outcomes {
		switch {
		case o.Err == "":
			f.OK++
			assert.Positive(t, o.Text, "an answered call has the provider's text")
		default:
			f.Failed[o.Err]++
			assert.True(t, failing != nil && failing(o), "call failed: %+v", o)
		}
	}

	// No budget exceeded.
	f.Conformance = checkBudgets(t, es, chaosLimits)
	f.RateLimited = rateLimited(es)
	for _, e := range es {
		if e.Status == http.StatusTooManyRequests {
			t.Logf("429: %s", describeEntries([]testsuite.Entry{e}))
		}
	}

	// At most once: every request named by its activity attempt, one
	// request per attempt, one answer per call unless one was lost.
	byCall := map[string][]testsuite.Entry{}
	perAttempt := map[string]int{}
	worker := map[uint64]int{}
	for _, e := range es {
		w, call, attempt, ok := parseChaosRequestID(e.ClientRequestID)
		if !assert.True(t, ok, "request %d was not sent by an activity attempt: %q", e.Seq, e.ClientRequestID) {
			continue
		}
		worker[e.Seq] = w
		byCall[call] = append(byCall[call], e)
		perAttempt[fmt.Sprintf("%s#%d", call, attempt)]++
		switch {
		case e.Status == http.StatusOK && e.Cause == testsuite.CauseNone:
			f.Answers++
		case e.Admitted && lostCause(e.Cause):
			f.Lost[e.Cause]++
		case !e.Admitted:
			f.Refused++
		}
		if e.BadHeaders {
			f.BadHeaders++
		}
	}
	for k, n := range perAttempt {
		assert.Equal(t, 1, n, "attempt %s sent %d requests: Temporal is the one retry layer", k, n)
	}
	answered := 0
	for call, ces := range byCall {
		var admitted []testsuite.Entry
		usable := 0
		for _, e := range ces {
			if e.Admitted {
				admitted = append(admitted, e)
			}
			if e.Status == http.StatusOK && e.Cause == testsuite.CauseNone {
				usable++
			}
		}
		if usable > 0 {
			answered++
		}
		if len(admitted) < 2 {
			continue
		}
		f.Repeats++
		lost, killed := false, false
		for _, e := range admitted[:len(admitted)-1] {
			switch {
			case lostCause(e.Cause):
				lost = true
			case kill != nil && worker[e.Seq] == kill.proc.spec.Worker && e.Arrival.Before(kill.at):
				// Sent by the worker that then died before reporting it:
				// answered before the kill, or after it by a provider
				// that had not yet seen the connection close (its record
				// then says 200 for an answer no one read).
				killed = true
			default:
				f.Unexplained = append(f.Unexplained, fmt.Sprintf("%s: request %d (%d, %s) answered to worker %d at %s, then charged again: %s",
					call, e.Seq, e.Status, e.Cause, worker[e.Seq], e.Done.Format("15:04:05.000"), describeEntries(ces)))
			}
		}
		if killed {
			f.AfterKill++
		} else if lost {
			f.AfterLost++
		}
	}
	assert.Empty(t, f.Unexplained, "no call answered twice unless the first answer was lost")

	// Every request was at the provider only while its lease lived: sent
	// after its grant and done before the lease expired unrenewed (the
	// gate's in-flight count holds it all along).
	done := map[string]time.Time{}
	for _, e := range es {
		done[e.ClientRequestID] = e.Done
	}
	for _, p := range r.procs {
		events := p.events(t)
		grants := map[string]chaosEvent{}
		renews := map[string][]chaosEvent{}
		for _, e := range events {
			switch e.Kind {
			case "grant":
				grants[fmt.Sprintf("%s#%d", e.Activity, e.Attempt)] = e
			case "renew":
				renews[e.Lease] = append(renews[e.Lease], e)
			}
		}
		for _, e := range events {
			if e.Kind != "send" {
				continue
			}
			key := fmt.Sprintf("%s#%d", e.Call, e.Attempt)
			g, ok := grants[key]
			if !assert.True(t, ok, "worker %d sent %s without a grant", p.spec.Worker, key) {
				continue
			}
			f.SendAfter = max(f.SendAfter, e.At.Sub(g.At))
			lost := g.Expires // when the lease expired unrenewed
			for _, rn := range renews[g.Lease] {
				if rn.At.After(lost) {
					break
				}
				if rn.Err == "" {
					lost = rn.Expires
				}
			}
			end, ok := done[chaosRequestID(p.spec.Worker, e.Call, e.Attempt)]
			if ok && end.After(lost) {
				f.Expired = append(f.Expired, fmt.Sprintf("worker %d: %s sent %v after its grant, at the provider until %v after its lease expired (TTL %v, %d renewals asked)",
					p.spec.Worker, key, e.At.Sub(g.At).Round(time.Millisecond), end.Sub(lost).Round(time.Millisecond), chaosLeaseTTL, len(renews[g.Lease])))
			}
		}
	}
	assert.Empty(t, f.Expired, "no request at the provider on an expired lease")
	assert.Equal(t, f.OK, answered, "the calls answered are the calls the provider answered")

	// Capacity: no lease left within the lease TTL of the batch's end.
	end := r.redisNow()
	var snap capacity.Snapshot
	w := r.leasesGone(nil, end, chaosLeaseTTL+5*time.Second)
	f.LeasesExpire, f.LeasesGone, snap = w.Expire, w.Gone, w.Snap
	// leasesGone failed the test if a lease outlived its bound; how soon
	// each expired after the end is logged (a renewal on its way at the
	// end lands later on a loaded machine).
	assert.Equal(t, snap.Budget[capacity.InFlight].Capacity, snap.Level[capacity.InFlight], "every in-flight slot free")
	return f
}

// killVictim waits (within chaosBound) for a worker process that holds at
// least two leases and has sent two requests to the provider in the last
// third of a call's latency, or one of each after 10 s, and returns it.
func (r *chaosRun) killVictim() *chaosProc {
	r.t.Helper()
	deadline := time.Now().Add(chaosBound)
	want := 2
	for start := time.Now(); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			want = 1
		}
		for _, p := range r.procs {
			if fresh, held := r.freshRequests(p); fresh >= want && held >= want {
				return p
			}
		}
	}
	r.t.Fatal("no worker ever held a lease with its request at the provider")
	return nil
}

// freshRequests returns how many requests p has at the provider that it
// sent in the last third of a call's latency, and how many leases it
// holds. A call lasts chaosLatency at the provider, so those requests are
// still there when a kill lands (one sent earlier may be answered in
// between).
func (r *chaosRun) freshRequests(p *chaosProc) (fresh, held int) {
	open, leases := openRequests(p.events(r.t))
	for _, e := range open {
		if time.Since(e.At) < chaosLatency/3 {
			fresh++
		}
	}
	return fresh, len(leases)
}

// waitFreshRequest waits (within chaosBound) until a worker has a request
// at the provider sent in the last third of a call's latency.
func (r *chaosRun) waitFreshRequest() {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		for _, p := range r.procs {
			if fresh, _ := r.freshRequests(p); fresh > 0 {
				return true
			}
		}
		return false
	}, chaosBound, 10*time.Millisecond, "no request ever reached the provider")
}

// chaosKillWorker: a worker process holding leases, its requests at the
// provider, is killed with SIGKILL. Its leases come back within the lease
// TTL of the kill; its calls are retried after their heartbeat timeout by
// the other workers, and its workflows continue there. The provider's
// record shows the killed requests canceled (charged, no answer): those
// calls are charged twice, as allowed. No 429: the dead worker's leases
// hold their charges until they expire, so the gate never believes in
// capacity the provider does not have.
func chaosKillWorker(t *testing.T, c client.Client, addr string) {
	r := newChaosRun(t, c, addr, chaosOptions{Heartbeat: 10 * time.Second})
	runs := r.begin("batch", chaosWorkflows, chaosPerFlow)
	r.waitAnswered(chaosCalls / 4)
	victim := r.killVictim()
	before, err := r.store.Snapshot(context.Background(), r.gscope)
	require.NoError(t, err)
	victim.kill()
	kill := &chaosKill{proc: victim, at: time.Now()}
	from := r.redisNow() // the kill, in store time
	open, held := openRequests(victim.events(t))
	ids := map[string]bool{}
	for id := range held {
		ids[id] = true
	}
	w := r.leasesGone(ids, from, chaosLeaseTTL+5*time.Second)
	outcomes := r.wait(runs)
	f := r.check(outcomes, kill, nil)

	t.Logf("KillWorker: %v", f)
	t.Logf("KillWorker: worker %d killed holding %d leases with %d requests at the provider (scope: %d leases, %.0f of %.0f slots free); its leases expired %v after the kill and were gone %v after it (lease TTL %v; then %d leases, %.0f slots free)",
		victim.spec.Worker, len(held), len(open), len(before.Leases), before.Level[capacity.InFlight], before.Budget[capacity.InFlight].Capacity,
		w.Expire.Round(time.Millisecond), w.Gone.Round(time.Millisecond), chaosLeaseTTL, len(w.Snap.Leases), w.Snap.Level[capacity.InFlight])
	assert.NotEmpty(t, held, "the worker was killed holding leases")
	// The killed worker's leases came back by expiring: leasesGone failed
	// the test had one outlived its bound, and the store reclaimed them
	// with nobody left to renew or release them. How soon after the kill
	// is logged above, not asserted: a renewal the worker sent just before
	// it died lands after it, later on a loaded machine.
	for _, l := range before.Leases {
		if ids[l.ID] {
			assert.Falsef(t, w.Snap.Now.Before(l.Expires), "lease %s gone before it expired", l.ID)
		}
	}
	assert.Equal(t, chaosCalls, f.OK, "every call answered")
	assert.Zero(t, f.RateLimited, "no 429")
	assert.Positive(t, f.Lost[testsuite.CauseCanceled], "the provider saw the killed requests go away")
}

// chaosRedisRestartEmpty: Redis is killed mid-batch and started empty on
// the same port 10 s later. The workers fail closed meanwhile (a short
// CapacityWait, nothing sent), then find the credential's epoch gone and
// start the scope afresh at its burst level. The design allows one extra
// burst across such a loss (the store forgets what it granted); here the
// store was gone longer than the provider's burst window (5 s), so the
// provider's buckets were full again too: no 429.
func chaosRedisRestartEmpty(t *testing.T, c client.Client, addr string) {
	const outage = 10 * time.Second
	r := newChaosRun(t, c, addr, chaosOptions{})
	runs := r.begin("batch", chaosWorkflows, chaosPerFlow)
	r.waitAnswered(chaosCalls / 4)
	port := r.redis.Port
	r.redis.Kill()
	down := time.Now() // the server is gone
	time.Sleep(outage)
	up := time.Now() // a new one is not yet there
	r.redis = testenv.StartRedisServer(t, port)
	outcomes := r.wait(runs)
	f := r.check(outcomes, nil, nil)
	es := r.entries()
	away := r.awayFigures(down, up)
	t.Logf("RedisRestartEmpty: %v", f)
	t.Logf("RedisRestartEmpty: Redis killed after %d answers, started empty %v later; meanwhile %d grants, %d requests sent (%d of them granted before); requests before %d, after %d",
		chaosCalls/4, up.Sub(down).Round(time.Millisecond), away.grants, away.sent, away.grantedBefore, sentBetween(es, r.began, down), sentBetween(es, up, time.Now()))
	assert.Zero(t, away.grants, "fail closed: nothing granted while the store was unreachable")
	assert.Equal(t, away.grantedBefore, away.sent, "nothing sent while the store was unreachable but what it granted before")
	assert.Equal(t, chaosCalls, f.OK, "every call answered")
	assert.Zero(t, f.RateLimited, "no 429: the store was away longer than the provider's burst window")
}

// chaosRedisPause: Redis is stopped (SIGSTOP) for 6 s mid-batch and
// continued. Its connections stay open, so the store's calls wait: the
// client's 3 s read timeout is retried (go-redis MaxRetries, 3 by default)
// and the stall is waited out, not failed. Nothing is granted meanwhile,
// so nothing is sent; answers that come back meanwhile are returned after
// SettleTimeout (3 s) and never asked again, and their settles land when
// Redis continues (a command that timed out is run twice then, once from
// the closed connection and once retried: settles and reserves are
// idempotent). No 429: nothing was sent while the store was away, and its
// state is intact.
func chaosRedisPause(t *testing.T, c client.Client, addr string) {
	const pause = 6 * time.Second
	r := newChaosRun(t, c, addr, chaosOptions{})
	runs := r.begin("batch", chaosWorkflows, chaosPerFlow)
	r.waitAnswered(chaosCalls / 4)
	require.NoError(t, r.redis.Pause())
	paused := time.Now() // stopped
	time.Sleep(pause)
	resumed := time.Now() // not yet continued
	require.NoError(t, r.redis.Resume())
	outcomes := r.wait(runs)
	f := r.check(outcomes, nil, nil)
	away := r.awayFigures(paused, resumed)
	var slowSettles, failedEnds int
	var longestSettle, longestGrant time.Duration
	for _, p := range r.procs {
		for _, e := range p.events(t) {
			switch {
			case e.Kind == "end" && e.Err != "":
				failedEnds++
			case e.Kind == "end":
				longestSettle = max(longestSettle, e.Took)
				if e.Took >= interceptor.DefaultSettleTimeout {
					slowSettles++
				}
			case e.Kind == "grant":
				longestGrant = max(longestGrant, e.Took)
			}
		}
	}
	t.Logf("RedisPause: %v", f)
	t.Logf("RedisPause: Redis paused %v after %d answers; meanwhile %d grants, %d requests sent (%d of them granted before); settles that outlasted SettleTimeout (%v: the answer returned first) %d, longest %v; longest granting reserve %v; store calls that failed %d",
		resumed.Sub(paused).Round(time.Millisecond), chaosCalls/4, away.grants, away.sent, away.grantedBefore, interceptor.DefaultSettleTimeout, slowSettles,
		longestSettle.Round(time.Millisecond), longestGrant.Round(time.Millisecond), failedEnds)
	assert.Zero(t, away.grants, "nothing granted while the store did not answer")
	assert.Equal(t, away.grantedBefore, away.sent, "nothing sent while the store did not answer but what it granted before")
	assert.Equal(t, chaosCalls, f.OK, "every call answered")
	assert.Zero(t, f.RateLimited, "no 429")
	assert.Zero(t, f.Repeats, "no answer lost, none asked again")
}

// chaosGarbageProvider: from a quarter of the batch on, the provider
// answers a quarter of the requests with garbage (an HTML page, an answer
// cut short, JSON null, an object of another shape: charged, unreadable)
// and garbles the rate-limit headers of another quarter of its answers.
// A garbage answer is a counted failure, retried; the gate keeps the whole
// reservation of each (the provider charged it) and ignores garbled
// headers. A call may fail only with a typed, non-retryable error after
// MaxFailures (3) garbage answers, which the record shows. Then three
// calls meet nothing but garbage: each fails so, after exactly MaxFailures
// requests. No 429.
func chaosGarbageProvider(t *testing.T, c client.Client, addr string) {
	const maxFailures = 3
	r := newChaosRun(t, c, addr, chaosOptions{MaxFailures: maxFailures})
	runs := r.begin("batch", chaosWorkflows, chaosPerFlow)
	r.waitAnswered(chaosCalls / 4)
	require.NoError(t, r.fp.SetFaults(testsuite.Faults{Garbage: 0.25, BadHeaders: 0.25}))
	outcomes := r.wait(runs)
	require.NoError(t, r.fp.SetFaults(testsuite.Faults{Garbage: 1}))
	const hopeless = 3
	last := r.wait(r.begin("garbage", 1, hopeless))
	typed := func(o ChaosOutcome) bool {
		return (o.Err == tgerrors.TypeUnknown || o.Err == tgerrors.TypeTransient) && o.NonRetryable
	}
	f := r.check(append(outcomes, last...), nil, typed)

	// Each call that failed met only garbage, maxFailures times.
	garbage, answered := map[string]int{}, map[string]bool{}
	for _, e := range r.entries() {
		_, call, _, _ := parseChaosRequestID(e.ClientRequestID)
		switch {
		case e.Status == http.StatusOK && e.Cause == testsuite.CauseNone:
			answered[call] = true
		case e.Cause == testsuite.CauseGarbage:
			garbage[call]++
		}
	}
	unanswered := 0
	for call, n := range garbage {
		if !answered[call] {
			unanswered++
			assert.Equal(t, maxFailures, n, "call %s failed after %d garbage answers, not MaxFailures", call, n)
		}
	}
	batchFailed := 0
	for _, o := range outcomes {
		if o.Err != "" {
			batchFailed++
		}
	}
	t.Logf("GarbageProvider: %v", f)
	t.Logf("GarbageProvider: %d garbage answers, %d answers with garbled headers; calls of the batch that failed (typed, after %d garbage answers): %d; the %d calls that met only garbage: %v",
		f.Lost[testsuite.CauseGarbage], f.BadHeaders, maxFailures, batchFailed, hopeless, last)
	assert.Equal(t, batchFailed+hopeless, unanswered, "the calls that failed are those the provider answered only with garbage")
	for _, o := range last {
		assert.True(t, typed(o), "a call that meets only garbage fails with a typed, non-retryable error: %+v", o)
	}
	assert.Equal(t, chaosCalls-batchFailed, f.OK)
	assert.Positive(t, f.Lost[testsuite.CauseGarbage])
	assert.Positive(t, f.BadHeaders)
	assert.Zero(t, f.RateLimited, "no 429: garbled headers are ignored, garbage answers keep their charges")
}

// chaosTemporalRestart: the Temporal server (a dev server with its state in
// a file) is killed with SIGKILL mid-batch, while a request is at the
// provider, and started again on the same port 5 s later. Workers keep
// their calls going: answers that come back meanwhile are reported once it
// is back, and no lease waits on it (a heartbeat does, up to the client's
// RPC timeout, but the keepalive renews leases on its own). The workers' RPCTimeout is 1 min: the SDK retries a
// completion for that long, while its connection comes back with a backoff
// of up to 10 s, so the default 10 s can lose a completion sent just
// before the kill, and Temporal then runs the call again after its
// heartbeat timeout: a second answer the provider's record cannot explain.
// With it, no answer is lost and no call is charged twice; no 429 (every
// request is at the provider under a live lease).
func chaosTemporalRestart(t *testing.T) {
	const outage = 5 * time.Second
	ct := startChaosTemporal(t)
	c, err := client.Dial(client.Options{HostPort: ct.addr, Logger: devserver.QuietLogger()})
	require.NoError(t, err)
	defer c.Close()
	r := newChaosRun(t, c, ct.addr, chaosOptions{RPCTimeout: time.Minute})
	runs := r.begin("batch", chaosWorkflows, chaosPerFlow)
	r.waitAnswered(chaosCalls / 4)
	// Kill it while a request is at the provider: the 20th answer can come
	// between two waves of calls, with none there (a run under -race with
	// every package's tests at once killed it so, and the provider
	// answered nothing while it was away).
	r.waitFreshRequest()
	down := time.Now()
	ct.kill()
	time.Sleep(outage)
	ct.start()
	up := time.Now()
	outcomes := r.wait(runs)
	f := r.check(outcomes, nil, nil)
	meanwhile := 0
	for _, e := range r.entries() {
		if e.Done.After(down) && e.Done.Before(up) && e.Status == http.StatusOK {
			meanwhile++
		}
	}
	t.Logf("TemporalRestart: %v", f)
	t.Logf("TemporalRestart: dev server killed at %s after %d answers, serving again %v later; the provider answered %d requests meanwhile",
		down.Format("15:04:05.000"), chaosCalls/4, up.Sub(down).Round(time.Millisecond), meanwhile)
	assert.Positive(t, meanwhile, "answers came back while the server was away")
	assert.Equal(t, chaosCalls, f.OK, "every call answered")
	assert.Zero(t, f.RateLimited, "no 429")
	assert.Zero(t, f.Repeats, "no answer lost, none asked again")
}
