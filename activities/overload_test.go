package activities_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// TestOverload drives the plugin on one real dev server, with the official
// SDK activities against the fake provider, through eight overloads. Each
// case asserts, beside completion, that no budget was exceeded (the
// provider's record against its limits), that the activities are the only
// retry layer (each provider request is one activity attempt's) and that no
// request left past its call's deadline; and what its overload is about.
// Limits are scaled so that each case takes seconds.
func TestOverload(t *testing.T) {
	if os.Getenv(envCrashRole) != "" {
		crashWorker(t) // the child process of WorkerCrash
		return
	}
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own dev server; each run its own task queue and fake provider
	// The priority matcher, as a deployment that shares one task queue
	// between classes should run: the calls carry their class's priority
	// key, so the server hands an interactive call to a worker ahead of a
	// bulk backlog; the gate then orders what the workers hold.
	srv := devserver.StartForTest(t, devserver.PriorityMatcher...)
	c := srv.Client()
	// DeadlineBeforeDispatch needs its interactive calls to arrive in
	// time to push the expiring call past its deadline: alone. The other
	// runs have their own rig (task queue, fake provider, store prefix):
	// two at once.
	t.Run("DeadlineBeforeDispatch", func(t *testing.T) { overloadDeadlineBeforeDispatch(t, c) })
	concurrently(t, 2,
		subtest{"LimitDrop", func(t *testing.T) { overloadLimitDrop(t, c) }},
		subtest{"InteractiveDuringBulk", func(t *testing.T) { overloadInteractiveDuringBulk(t, c) }},
		subtest{"WorkerCrash", func(t *testing.T) { overloadWorkerCrash(t, c, srv.FrontendHostPort()) }},
		subtest{"RequestBurst", func(t *testing.T) { overloadRequestBurst(t, c) }},
		subtest{"LargePrompts", func(t *testing.T) { overloadLargePrompts(t, c) }},
		subtest{"WorkersStartTogether", func(t *testing.T) { overloadWorkersStartTogether(t, c) }},
		subtest{"RateLimitWithoutRetryTime", func(t *testing.T) { overloadRateLimitWithoutRetryTime(t, c) }},
	)
}

// overloadRequestBurst: 120 small calls at once exhaust a 600 RPM budget
// (a 50-request bucket) while tokens remain.
func overloadRequestBurst(t *testing.T, c client.Client) {
	const n = 120
	lim := testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 1_000_000, BurstWindow: 5 * time.Second}
	r := newRig(t, c, rigOptions{Limits: lim})
	res := r.run("burst", OverloadSpec{Calls: batch(n, 10, 50, capacity.Standard, 2*time.Minute)})

	es := r.entries()
	f := measure(r.fp, r.scope, testsuite.Requests)
	f.Calls = n
	worst := checkBudgets(t, es, lim)
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, r.sends.all())
	tokens, _ := f.Report.For(testsuite.Tokens)
	t.Logf("%v", f)
	t.Logf("conformance (worst excess, ≤ 0 conforms): %v; tokens peak %d of bound %.0f; %v", worst, tokens.Peak, tokens.Bound, layer)

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.Zero(t, rateLimited(es), "no 429: %v", f.ProviderRateLimited)
	assert.Equal(t, testsuite.Requests, f.Report.Binding, "requests bind")
	assert.Less(t, float64(tokens.Peak), tokens.Bound/10, "tokens remain")
}

// overloadLargePrompts: eight prompts of about 2,400 tokens (plus 500
// max_tokens) exhaust a 120,000 TPM budget (a 10,000-token bucket) while
// requests remain.
func overloadLargePrompts(t *testing.T, c client.Client) {
	const n = 8
	lim := testsuite.Limits{RequestsPerMinute: 6000, TokensPerMinute: 120_000, BurstWindow: 5 * time.Second}
	r := newRig(t, c, rigOptions{Limits: lim})
	res := r.run("large", OverloadSpec{Calls: batch(n, 1400, 500, capacity.Standard, 2*time.Minute)})

	es := r.entries()
	f := measure(r.fp, r.scope, testsuite.Tokens)
	f.Calls = n
	worst := checkBudgets(t, es, lim)
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, r.sends.all())
	requests, _ := f.Report.For(testsuite.Requests)
	var largest int64
	for _, e := range es {
		largest = max(largest, e.Charged[testsuite.Tokens])
	}
	t.Logf("%v", f)
	t.Logf("largest call %d tokens (bucket %.0f); conformance %v; requests peak %d of bound %.0f; %v",
		largest, lim.Burst(testsuite.Tokens), worst, requests.Peak, requests.Bound, layer)

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.Zero(t, rateLimited(es), "no 429: %v", f.ProviderRateLimited)
	assert.Equal(t, testsuite.Tokens, f.Report.Binding, "tokens bind")
	assert.Less(t, float64(requests.Peak), requests.Bound/10, "requests remain")
}

// overloadInteractiveDuringBulk: 16 interactive calls, one every 400 ms,
// arrive while 120 bulk calls keep a 600 RPM budget saturated. With a bulk
// floor of 30 % the interactive calls go ahead of the bulk tickets; the bulk
// work still gets most of the budget meanwhile and completes.
func overloadInteractiveDuringBulk(t *testing.T, c client.Client) {
	const (
		bulkN        = 120
		interactiveN = 16
		every        = 400 * time.Millisecond
	)
	lim := testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 1_000_000, BurstWindow: 2 * time.Second}
	gate := gateLimits(lim)
	gate.BulkFloor = 0.3
	r := newRig(t, c, rigOptions{Limits: lim, Gate: gate})
	bulk := r.begin("bulk", OverloadSpec{Calls: batch(bulkN, 10, 50, capacity.Bulk, 3*time.Minute)})
	r.waitForArrivals(25) // the bucket is spent; the rest of the bulk work queues
	var runs []client.WorkflowRun
	for i := range interactiveN {
		runs = append(runs, r.begin("interactive", OverloadSpec{First: 1000 + i, Calls: batch(1, 10, 50, capacity.Interactive, time.Minute)}))
		time.Sleep(every)
	}
	var results []OverloadResult
	for _, run := range runs {
		results = append(results, r.wait(run))
	}
	bulkRes := r.wait(bulk)

	es := r.entries()
	sends := r.sends.all()
	f := measure(r.fp, r.scope, testsuite.Requests)
	f.Calls = bulkN + interactiveN
	worst := checkBudgets(t, es, lim)
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, sends)
	isInteractive := func(call string) bool { return strings.Contains(call, "-interactive-") }
	ages := queueAges(sends, isInteractive)
	bulkAges := queueAges(sends, func(call string) bool { return strings.Contains(call, "-bulk-") })
	// The interactive period: from the first interactive call's schedule to
	// the last one's request. The bulk calls' requests in it, against what
	// the budget left them.
	var from, to, lastBulk time.Time
	for _, s := range sends {
		if isInteractive(s.Call) {
			if from.IsZero() || s.Scheduled.Before(from) {
				from = s.Scheduled
			}
			if s.Sent.After(to) {
				to = s.Sent
			}
		} else if s.Sent.After(lastBulk) {
			lastBulk = s.Sent
		}
	}
	bulkIn := 0
	for _, s := range sends {
		if !isInteractive(s.Call) && !s.Sent.Before(from) && !s.Sent.After(to) {
			bulkIn++
		}
	}
	window := to.Sub(from).Seconds()
	left := float64(lim.RequestsPerMinute)/60 - float64(interactiveN)/window
	bulkRate := float64(bulkIn) / window
	t.Logf("%v", f)
	t.Logf("interactive queue age (scheduled → request): p50 %v, p99 %v, max %v over %d calls",
		quantile(ages, 0.5).Round(time.Millisecond), quantile(ages, 0.99).Round(time.Millisecond), quantile(ages, 1).Round(time.Millisecond), len(ages))
	t.Logf("bulk: queue age p50 %v, max %v; %.1f requests/s during the %.1f s interactive period, of the %.1f/s the interactive calls left (%.0f %%); last bulk request %v after the last interactive one",
		quantile(bulkAges, 0.5).Round(time.Millisecond), quantile(bulkAges, 1).Round(time.Millisecond), bulkRate, window, left, 100*bulkRate/left, lastBulk.Sub(to).Round(time.Millisecond))
	t.Logf("conformance %v; %v", worst, layer)
	for _, s := range firstSends(sends, isInteractive) {
		t.Logf("interactive %s: scheduled → started %v (the server's dispatch), started → request %v (the gate)",
			s.Call, s.Started.Sub(s.Scheduled).Round(time.Millisecond), s.Sent.Sub(s.Started).Round(time.Millisecond))
	}

	ok, failed := completed(append(results, bulkRes)...)
	assert.Equal(t, bulkN+interactiveN, ok, "every call completes: %v", failed)
	assert.Zero(t, rateLimited(es), "no 429: %v", f.ProviderRateLimited)
	assert.Len(t, ages, interactiveN)
	assert.True(t, lastBulk.After(to), "the bulk queue outlasted the interactive calls")
	// Interactive before bulk, as orders and counts (queue ages and rates
	// move with the machine's load; they are logged above): each
	// interactive call went ahead of bulk calls queued before it started,
	// and the bulk work still got most of the budget meanwhile.
	for _, o := range overtakes(sends, isInteractive) {
		t.Logf("interactive %s went ahead of %d bulk calls queued before it; %d bulk requests left while it was in the gate", o.call, o.ahead, o.behind)
		assert.Positivef(t, o.ahead, "interactive %s waited behind every bulk call queued before it", o.call)
		assert.Greaterf(t, o.ahead, o.behind, "interactive %s let more bulk calls go first than it passed", o.call)
	}
	assert.Greater(t, bulkIn, interactiveN, "bulk not starved: most requests of the interactive period were bulk")
}

// overtake is what one prioritized call's first request did in the queue:
// ahead counts the other calls scheduled before it started and sent after
// it, behind the other calls sent between its start and its request.
type overtake struct {
	call          string
	ahead, behind int
}

// overtakes returns an overtake for the first request of each call that
// prio accepts, against the first requests of the calls it does not.
func overtakes(sends []send, prio func(call string) bool) []overtake {
	others := firstSends(sends, func(call string) bool { return !prio(call) })
	var out []overtake
	for _, p := range firstSends(sends, prio) {
		o := overtake{call: p.Call}
		for _, s := range others {
			if s.Scheduled.Before(p.Started) && s.Sent.After(p.Sent) {
				o.ahead++
			}
			if s.Sent.After(p.Started) && s.Sent.Before(p.Sent) {
				o.behind++
			}
		}
		out = append(out, o)
	}
	return out
}

// overloadLimitDrop: the provider halves TPM (240,000 → 120,000) 3 s into
// a 200-call run. The calls granted once the store has applied the first
// response that reports the new limit must conform to it, and the 429s
// after the drop must be at most one per 30 s of the new budget, those of
// the calls the store had granted before it set a 429's cooldown counting
// as one (rateLimitEventsByGrant).
func overloadLimitDrop(t *testing.T, c client.Client) {
	const n = 200
	before := testsuite.Limits{RequestsPerMinute: 60_000, TokensPerMinute: 240_000, BurstWindow: 2 * time.Second}
	after := before
	after.TokensPerMinute /= 2
	r := newRig(t, c, rigOptions{Limits: before})
	run := r.begin("drop", OverloadSpec{Calls: batch(n, 40, 100, capacity.Standard, 3*time.Minute)})
	first := r.waitForArrivals(1)
	time.Sleep(time.Until(first.Add(3 * time.Second)))
	require.NoError(t, r.fp.SetLimits(overloadModel, after))
	drop := r.fp.Now()
	res := r.wait(run)

	es := r.entries()
	// The first response that reports the new limit: every answer rendered
	// after SetLimits carries it in x-ratelimit-limit-tokens.
	var report time.Time
	for _, e := range es {
		if e.Done.After(drop) && (report.IsZero() || e.Done.Before(report)) {
			report = e.Done
		}
	}
	require.False(t, report.IsZero(), "no response after the drop")
	// From when the store applied the first report of the new limit, on
	// its record: the calls it granted from then on must conform to it.
	// (Not by arrival some seconds after the report: a call granted
	// before may reach the provider late on a loaded machine.)
	learned := r.grants.learned(overloadModel, after.TokensPerMinute)
	require.False(t, learned.IsZero(), "the gate never reported the new limit to the store")
	granted := r.grants.grantedAt(overloadModel)
	var pre, post []testsuite.Entry
	var after429, last, firstPost time.Time
	for _, e := range es {
		if e.Arrival.Before(drop) {
			pre = append(pre, e)
		}
		at, ok := granted[e.ClientRequestID]
		if !assert.Truef(t, ok, "request %d (%q) has no grant on record", e.Seq, e.ClientRequestID) {
			continue
		}
		if !at.Before(learned) {
			post = append(post, e)
			if firstPost.IsZero() || e.Arrival.Before(firstPost) {
				firstPost = e.Arrival
			}
		}
		if !e.Arrival.Before(drop) && e.Status == http.StatusTooManyRequests {
			after429 = e.Arrival
		}
		if e.Arrival.After(last) {
			last = e.Arrival
		}
	}
	newRate, newBurst := float64(after.TokensPerMinute)/60, after.Burst(testsuite.Tokens)
	worstPre := conformance(pre, testsuite.Tokens, float64(before.TokensPerMinute)/60, before.Burst(testsuite.Tokens))
	worstPost := conformance(post, testsuite.Tokens, newRate, newBurst)
	var postTokens int64
	for _, e := range post {
		postTokens += e.Charged[testsuite.Tokens]
	}
	postSpan := last.Sub(firstPost).Seconds()
	span := last.Sub(drop)
	layer := r.checkOneRetryLayer(t, es)
	sends := r.sends.all()
	// At most one 429 event per 30 s of the new budget that tollgate's
	// calls after the drop were charged (counted, not timed), the events
	// counted on the store's record of its grants and cooldowns.
	var afterTokens int64
	for _, e := range es {
		if !e.Arrival.Before(drop) && e.Admitted {
			afterTokens += e.Charged[testsuite.Tokens]
		}
	}
	perEvent := after.TokensPerMinute / 2 // 30 s of the new limit
	allowed := max(1, int((afterTokens+perEvent-1)/perEvent))
	var answeredAfter []send
	for _, sd := range sends {
		if !sd.Answered.Before(drop) {
			answeredAfter = append(answeredAfter, sd)
		}
	}
	events, n429 := r.grants.rateLimitEventsByGrant(t, overloadModel, answeredAfter)
	checkNeverPastDeadline(t, sends)
	t.Logf("TPM %d → %d at %v into the run; first response reporting it %v after the drop; run ends %v after the drop",
		before.TokensPerMinute, after.TokensPerMinute, drop.Sub(first).Round(time.Millisecond), report.Sub(drop).Round(time.Millisecond), span.Round(time.Millisecond))
	t.Logf("before the drop: %d requests, worst excess over the old bound %.0f tokens", len(pre), worstPre)
	t.Logf("granted from when the store applied it (%v after the drop): %d requests, %d tokens in %.1f s = %.0f tokens/s against the new %.0f/s (bucket %.0f); worst excess over the new bound %.0f tokens",
		learned.Sub(drop).Round(time.Millisecond), len(post), postTokens, postSpan, float64(postTokens)/math.Max(postSpan, 1e-3), newRate, newBurst, worstPost)
	t.Logf("429s after the drop: %d in %d events, %d of them sent after the worker had read a 429 (allowed %d for %d tokens; run ends %v after the drop, last 429 at %v); %v",
		n429, events, sentAfterA429(sends), allowed, afterTokens, span.Round(time.Second), after429.Sub(drop).Round(time.Millisecond), layer)
	t.Logf("around the drop, per 500 ms from 1 s before it: %s", timeline(es, drop.Add(-time.Second), drop.Add(7*time.Second), 500*time.Millisecond))

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.LessOrEqual(t, worstPre, 1e-6, "before the drop, the old budget was kept")
	assert.LessOrEqual(t, worstPost, 1e-6, "the calls granted once the store knew the new limit keep to it")
	assert.LessOrEqual(t, events, allowed, "at most one 429 event per 30 s of budget after the drop")
}

// timeline renders the record between from and to in bins of step: for
// each, the requests that arrived, the 429s among them and the tokens
// charged ("requests/429s/tokens").
func timeline(es []testsuite.Entry, from, to time.Time, step time.Duration) string {
	n := int(to.Sub(from) / step)
	reqs, refused, tokens := make([]int, n), make([]int, n), make([]int64, n)
	for _, e := range es {
		i := int(e.Arrival.Sub(from) / step)
		if e.Arrival.Before(from) || i >= n {
			continue
		}
		reqs[i]++
		tokens[i] += e.Charged[testsuite.Tokens]
		if e.Status == http.StatusTooManyRequests {
			refused[i]++
		}
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%d/%d/%d", reqs[i], refused[i], tokens[i])
	}
	return strings.Join(parts, " ")
}

// overloadWorkersStartTogether: three workers, each with its own Redis
// store (and Redis connection) on one prefix, start at the same instant on
// a 150-call backlog: one budget, never exceeded.
func overloadWorkersStartTogether(t *testing.T, c client.Client) {
	const (
		n       = 150
		workers = 3
	)
	testenv.RedisClient(t) // skips without Redis
	prefix := randomPrefix("tgoverload")
	lim := testsuite.Limits{RequestsPerMinute: 60_000, TokensPerMinute: 240_000, BurstWindow: 2 * time.Second}
	r := newRig(t, c, rigOptions{Limits: lim, Workers: workers, Deferred: true, NewStore: func() capacity.Store {
		store, err := redisstore.New(testenv.RedisClient(t), redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		return store
	}})
	run := r.begin("together", OverloadSpec{Calls: batch(n, 40, 100, capacity.Standard, 3*time.Minute)})
	r.start(r.queue) // the backlog is waiting: every worker starts on it at once
	res := r.wait(run)

	es := r.entries()
	sends := r.sends.all()
	f := measure(r.fp, r.scope, testsuite.Tokens)
	f.Calls = n
	worst := checkBudgets(t, es, lim)
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, sends)
	byWorker := make([]int, workers)
	for _, s := range sends {
		byWorker[s.Worker]++
	}
	t.Logf("%v", f)
	t.Logf("requests by worker %v; conformance %v; %v", byWorker, worst, layer)

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.Zero(t, rateLimited(es), "no 429: %v", f.ProviderRateLimited)
	for w, k := range byWorker {
		assert.Positivef(t, k, "worker %d sent nothing: the budget was not shared", w)
	}
}

// overloadRateLimitWithoutRetryTime: the provider answers every request
// with a 429 that states no wait (no retry-after, no reset to wait for,
// "try again later") until each call has had one; then it recovers. Each
// call must wait a bounded, sane time (at least the 1 s floor, at most one
// refill period of jitter, 60 s) before its one retry, and complete.
func overloadRateLimitWithoutRetryTime(t *testing.T, c client.Client) {
	const n = 6
	lim := testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 1_000_000, BurstWindow: 5 * time.Second}
	// The jitter spreads retries over the refill period (a minute): drawn
	// near its low end, the retries come in seconds, not up to a minute.
	// The spread's bounds are unit-tested (errors, TestConverterDefaultJitterBounds).
	r := newRig(t, c, rigOptions{Limits: lim, Rand: func() float64 { return 0.01 }})
	require.NoError(t, r.fp.SetFaults(testsuite.Faults{RateLimited: 1}))
	run := r.begin("nowait", OverloadSpec{Calls: batch(n, 10, 50, capacity.Standard, 3*time.Minute)})
	injected := func() (k int, first time.Time) {
		for _, e := range r.entries() {
			if e.Cause == testsuite.CauseInjectedRateLimit {
				if k == 0 {
					first = e.Done
				}
				k++
			}
		}
		return k, first
	}
	// Recover once every call has had its 429, or before the first retry
	// is sent: the store's grant of a second attempt clears the fault
	// before the retry can leave (not a time after the first 429, which a
	// loaded machine can overrun).
	var once sync.Once
	recovered := make(chan struct{})
	recoverNow := func() {
		once.Do(func() {
			assert.NoError(t, r.fp.SetFaults(testsuite.Faults{}))
			close(recovered)
		})
	}
	r.grants.setOnGrant(func(attempt int32) {
		if attempt > 1 {
			recoverNow()
		}
	})
	stopPoll := make(chan struct{})
	defer close(stopPoll)
	go func() {
		for {
			select {
			case <-recovered:
				return
			case <-stopPoll:
				return
			case <-time.After(5 * time.Millisecond):
				if k, _ := injected(); k == n {
					recoverNow()
				}
			}
		}
	}()
	res := r.wait(run)

	es := r.entries()
	sends := r.sends.all()
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, sends)
	worst := checkBudgets(t, es, lim)
	byCall := map[string][]send{}
	for _, s := range sends {
		byCall[s.Call] = append(byCall[s.Call], s)
	}
	var waits []time.Duration
	for call, ss := range byCall {
		assert.LessOrEqualf(t, len(ss), 2, "call %s sent %d requests: one 429, one retry", call, len(ss))
		for i, s := range ss {
			if s.Status != http.StatusTooManyRequests {
				continue
			}
			if !assert.Lessf(t, i+1, len(ss), "call %s was not retried after its 429", call) {
				continue
			}
			waits = append(waits, ss[i+1].Sent.Sub(s.Answered))
		}
	}
	// One 429 pauses the scope for every call (a 1 s cooldown when the
	// provider states no wait): the store grants nothing while it holds.
	// On the store's record of its grants and cooldowns: what had been
	// granted before may still be sent in it, late on a loaded machine.
	k, _ := injected()
	sorted := append([]time.Duration(nil), waits...)
	slices.Sort(sorted)
	t.Logf("%d calls, %d 429s without a wait, %d provider requests; retry waits after the 429: min %v, median %v, max %v; conformance %v; %v",
		n, k, len(es), quantile(sorted, 0).Round(time.Millisecond), quantile(sorted, 0.5).Round(time.Millisecond), quantile(sorted, 1).Round(time.Millisecond), worst, layer)

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.Positive(t, k, "the provider answered 429s")
	assert.Len(t, waits, k, "every 429 was retried")
	// The waits the gate asked Temporal for, on its clock (the measured
	// waits above add the machine's delays and are only logged): each 429
	// asked for at least the 1 s floor and at most one refill period of
	// jitter.
	delays := r.attempts.retryDelays()
	t.Logf("retry delays asked for: %v", delays)
	asked := 0
	for call, ss := range byCall {
		for _, s := range ss {
			if s.Status != http.StatusTooManyRequests {
				continue
			}
			asked++
			if !assert.NotEmptyf(t, delays[call], "call %s: its 429 asked for no retry delay", call) {
				continue
			}
			for _, d := range delays[call] {
				assert.GreaterOrEqualf(t, d, time.Second, "call %s: a retry waits at least the 1 s floor", call)
				assert.LessOrEqualf(t, d, tgerrors.DefaultRefillPeriod+time.Second, "call %s: a retry waits at most one refill period", call)
			}
		}
	}
	assert.Equal(t, k, asked, "every 429 is a failed attempt")
	assert.LessOrEqual(t, len(es), 2*n, "no retry storm")
	// A 429 pauses the scope: a cooldown for each, no grant while one holds.
	cooldowns, grants := r.grants.checkCooldownsHeld(t, overloadModel, rateLimited(es))
	t.Logf("%d cooldowns set, %d leases granted", cooldowns, grants)
}

// overloadDeadlineBeforeDispatch: a bulk call with a 14 s schedule-to-close
// timeout (so at most 9 s in the queue, the gate keeping 5 s for the call)
// queues behind 80 bulk calls on a 600 RPM budget, its turn about 8 s away;
// 100 interactive calls then arrive and take the budget ahead of the bulk
// tickets, pushing its turn past its deadline (by 10 s of budget: enough
// that interactive calls slow to arrive on a loaded machine, under the race
// detector, still push it past). It is refused with the typed
// DeadlineUnmeetable error and never sent.
func overloadDeadlineBeforeDispatch(t *testing.T, c client.Client) {
	const (
		fillers     = 80
		interactive = 100
		expiring    = 14 * time.Second
	)
	lim := testsuite.Limits{RequestsPerMinute: 600, TokensPerMinute: 1_000_000, BurstWindow: time.Second}
	gate := gateLimits(lim)
	gate.BulkFloor = 0.3
	r := newRig(t, c, rigOptions{Limits: lim, Gate: gate})
	fill := r.begin("fillers", OverloadSpec{Calls: batch(fillers, 10, 50, capacity.Bulk, 3*time.Minute)})
	r.waitForGate("-fillers-", fillers)
	scheduled := time.Now()
	x := r.begin("expiring", OverloadSpec{First: 1000, Calls: batch(1, 10, 50, capacity.Bulk, expiring)})
	isX := func(call string) bool { return strings.Contains(call, "-expiring-") }
	r.waitForGate("-expiring-", 1)
	inter := r.begin("interactive", OverloadSpec{First: 2000, Calls: batch(interactive, 10, 50, capacity.Interactive, 3*time.Minute)})
	xRes := r.wait(x)
	refused := time.Since(scheduled)
	fillRes, interRes := r.wait(fill), r.wait(inter)

	es := r.entries()
	sends := r.sends.all()
	worst := checkBudgets(t, es, lim)
	layer := r.checkOneRetryLayer(t, es)
	checkNeverPastDeadline(t, sends)
	xSends, xAttempts := 0, 0
	for _, s := range sends {
		if isX(s.Call) {
			xSends++
		}
	}
	for call, k := range r.attempts.counts() {
		if isX(call) {
			xAttempts += k
		}
	}
	t.Logf("expiring call: %q after %v (schedule-to-close %v, %d attempts), %d requests sent; conformance %v; %v",
		xRes.Errors[0], refused.Round(time.Millisecond), expiring, xAttempts, xSends, worst, layer)

	require.Len(t, xRes.Errors, 1)
	assert.Equal(t, tgerrors.TypeDeadlineUnmeetable, xRes.Errors[0], "the workflow gets the typed error")
	assert.Zero(t, xSends, "the expiring call was never sent")
	// Refused, not timed out: a schedule-to-close timeout reaches the
	// workflow as a timeout, not as the typed error above (how long the
	// refusal took is logged; it moves with the machine's load).
	ok, failed := completed(fillRes, interRes)
	assert.Equal(t, fillers+interactive, ok, "every other call completes: %v", failed)
	assert.Zero(t, rateLimited(es), "no 429")
}

// Environment of WorkerCrash's child process.
const (
	envCrashRole     = "TOLLGATE_OVERLOAD_CRASH"
	envCrashTemporal = "TOLLGATE_OVERLOAD_TEMPORAL"
	envCrashProvider = "TOLLGATE_OVERLOAD_PROVIDER"
	envCrashPrefix   = "TOLLGATE_OVERLOAD_PREFIX"
	envCrashQueue    = "TOLLGATE_OVERLOAD_QUEUE"
	envCrashLog      = "TOLLGATE_OVERLOAD_LOG"
)

// crashLeaseTTL is the lease TTL of WorkerCrash's workers, crashLimits their
// provider's limits: crashLimits.MaxConcurrent calls in flight at once.
const crashLeaseTTL = 3 * time.Second

var crashLimits = testsuite.Limits{RequestsPerMinute: 60_000, TokensPerMinute: 10_000_000, MaxConcurrent: 4, BurstWindow: 5 * time.Second}

// overloadWorkerCrash: a worker in a child process holds every in-flight
// slot (4 calls the provider holds open, leases in Redis) and is killed
// with SIGKILL. The slots come back when the leases expire, and not
// before; the leases expire within the lease TTL of the kill; the new calls
// and the killed ones (retried after their heartbeat timeout) all complete.
// The delay to the first new call is logged: it moves with the load.
func overloadWorkerCrash(t *testing.T, c client.Client, temporalAddr string) {
	const after = 8
	testenv.RedisClient(t) // skips without Redis
	prefix := randomPrefix("tgcrash")
	var killed atomic.Bool
	var held atomic.Int64
	r := newRig(t, c, rigOptions{
		Limits:   crashLimits,
		LeaseTTL: crashLeaseTTL,
		Latency: func(testsuite.Call, int64) time.Duration {
			if !killed.Load() {
				held.Add(1)
				return time.Minute // held until the child dies
			}
			return 50 * time.Millisecond
		},
		NewStore: func() capacity.Store {
			store, err := redisstore.New(testenv.RedisClient(t), redisstore.Options{Prefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			return store
		},
	})
	actQueue := r.queue + "-calls" // the model calls' queue; r.queue runs the workflows
	logPath := filepath.Join(t.TempDir(), "child.jsonl")
	cmd := child(t, "^TestOverload$", map[string]string{
		envCrashRole: "worker", envCrashTemporal: temporalAddr, envCrashProvider: r.fp.OpenAIBaseURL(),
		envCrashPrefix: prefix, envCrashQueue: actQueue, envCrashLog: logPath,
	})
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	holders := r.begin("holders", OverloadSpec{TaskQueue: actQueue, Heartbeat: 6 * time.Second,
		Calls: batch(int(crashLimits.MaxConcurrent), 10, 50, capacity.Standard, 2*time.Minute)})
	require.Eventually(t, func() bool { return held.Load() == crashLimits.MaxConcurrent }, time.Minute, 5*time.Millisecond,
		"the child never held every slot:\n%v", cmd.Stdout)
	time.Sleep(crashLeaseTTL / 2) // its leases have been renewed
	// A renewal only moves an expiry later: the child's leases live at
	// least until the expiries this snapshot shows.
	crashScope := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: overloadModel, Credential: "e2e"}
	heldSnap, err := r.stores[0].Snapshot(context.Background(), crashScope)
	require.NoError(t, err)
	require.Len(t, heldSnap.Leases, int(crashLimits.MaxConcurrent), "the child holds every slot")
	var liveUntil time.Time
	for _, l := range heldSnap.Leases {
		if liveUntil.IsZero() || l.Expires.Before(liveUntil) {
			liveUntil = l.Expires
		}
	}
	killed.Store(true)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	kill := time.Now()
	_ = cmd.Wait()
	// Nothing renews them now: each expires within the lease TTL of the
	// kill (on Redis's clock, the host's).
	deadSnap, err := r.stores[0].Snapshot(context.Background(), crashScope)
	require.NoError(t, err)
	for _, l := range deadSnap.Leases {
		assert.Falsef(t, l.Expires.After(kill.Add(crashLeaseTTL)), "lease %s expires %v after the kill (TTL %v)", l.Call, l.Expires.Sub(kill), crashLeaseTTL)
	}

	r.start(actQueue) // a surviving worker takes the model calls over
	next := r.begin("after", OverloadSpec{TaskQueue: actQueue, Heartbeat: 6 * time.Second, First: 100,
		Calls: batch(after, 10, 50, capacity.Standard, 2*time.Minute)})
	heldRes, nextRes := r.wait(holders), r.wait(next)

	childSends := readSends(t, logPath)
	es := r.entries()
	sends := r.sends.all()
	worst := checkBudgets(t, es, crashLimits)
	layer := r.checkOneRetryLayer(t, es, childSends...)
	checkNeverPastDeadline(t, append(sends, childSends...))
	var firstAfter time.Time
	for _, s := range sends {
		if strings.Contains(s.Call, "-after-") && (firstAfter.IsZero() || s.Sent.Before(firstAfter)) {
			firstAfter = s.Sent
		}
	}
	back := firstAfter.Sub(kill)
	peak := maxInFlight(es)
	t.Logf("child held %d slots (%d requests logged) and was killed; the first new call was dispatched %v after the kill (lease TTL %v); provider in flight at most %d of %d; conformance %v",
		held.Load(), len(childSends), back.Round(time.Millisecond), crashLeaseTTL, peak, crashLimits.MaxConcurrent, worst)
	t.Logf("this process: %v (the child's %d requests besides)", layer, len(childSends))

	ok, failed := completed(heldRes, nextRes)
	assert.Equal(t, int(crashLimits.MaxConcurrent)+after, ok, "the killed calls and the new ones complete: %v", failed)
	assert.Len(t, childSends, int(crashLimits.MaxConcurrent), "the child sent one request per slot")
	assert.False(t, firstAfter.Before(liveUntil), "no slot was free while the dead worker's leases lived (first new call %v before the first expiry)", liveUntil.Sub(firstAfter))
	assert.LessOrEqual(t, peak, int(crashLimits.MaxConcurrent))
	if !assert.Zero(t, rateLimited(es), "no 429") {
		logCrash429s(t, es, kill)
	}
}

// logCrash429s logs, for each 429 of WorkerCrash, when it arrived and what
// the provider still held then: the requests admitted before it and not
// yet done, with when each arrived and ended, relative to the kill.
func logCrash429s(t *testing.T, es []testsuite.Entry, kill time.Time) {
	t.Helper()
	for _, e := range es {
		if e.Status != http.StatusTooManyRequests {
			continue
		}
		t.Logf("429 (%s): request %d arrived %v after the kill", e.Cause, e.Seq, e.Arrival.Sub(kill))
		for _, p := range es {
			if p.Admitted && p.Arrival.Before(e.Arrival) && !p.Done.Before(e.Arrival) {
				t.Logf("  held: request %d arrived %v, done %v after the kill (%s)", p.Seq, p.Arrival.Sub(kill), p.Done.Sub(kill), p.Cause)
			}
		}
	}
}

// crashWorker is WorkerCrash's child process: a gated worker on its own
// Redis store that runs model calls, logging each request before it leaves,
// until it is killed.
func crashWorker(t *testing.T) {
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envCrashTemporal), Logger: devserver.QuietLogger()})
	require.NoError(t, err)
	defer c.Close()
	store, err := redisstore.New(testenv.RedisClient(t), redisstore.Options{Prefix: os.Getenv(envCrashPrefix)})
	require.NoError(t, err)
	defer store.Close()
	f, err := os.Create(os.Getenv(envCrashLog))
	require.NoError(t, err)
	defer f.Close()
	log := newSendLog()
	log.out = f
	gate := gateLimits(crashLimits)
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:    store,
		Limits:   func(capacity.Scope) (capacity.Limits, bool) { return gate, true },
		LeaseTTL: crashLeaseTTL,
	})
	require.NoError(t, err)
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{"e2e": e2eKey},
		BaseURL:     os.Getenv(envCrashProvider),
		HTTPClient:  &http.Client{Transport: log},
	})
	require.NoError(t, err)
	w := worker.New(c, os.Getenv(envCrashQueue), worker.Options{Plugins: []worker.Plugin{plugin}})
	w.RegisterActivity(oa)
	require.NoError(t, w.Start())
	time.Sleep(2 * time.Minute) // killed long before
	w.Stop()
}

// readSends reads the JSON lines a child's sendLog wrote.
func readSends(t *testing.T, path string) []send {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []send
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s send
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
		out = append(out, s)
	}
	require.NoError(t, sc.Err())
	return out
}

// maxInFlight returns the most requests the provider held at once.
func maxInFlight(es []testsuite.Entry) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, e := range es {
		if e.Admitted {
			evs = append(evs, ev{e.Arrival, 1}, ev{e.Done, -1})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an answer before an arrival at the same instant
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// randomPrefix returns a Redis key prefix no other run uses.
func randomPrefix(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

// TestUnseenClient: a client tollgate does not see spends 20 % of the key's
// token budget (Spend, every 100 ms) while a 200-call tollgate batch runs
// with the default safety margin (5 %). Tollgate learns the rest from the
// provider's headers: at most one 429 event per 30 s of budget for its
// calls (a 429 and those of the calls the store had granted before it set
// that 429's cooldown, rateLimitEventsByGrant). Twice: with
// headers computed as the provider answers (20 ms calls), and as it admits
// (1 s calls, so that a report misses a second of tollgate's own calls and
// of the other client's spending).
func TestUnseenClient(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own dev server; each run its own task queue and fake provider
	srv := devserver.StartForTest(t)
	for _, tt := range []struct {
		name      string
		headersAt testsuite.HeadersTime
		latency   time.Duration
	}{
		{"HeadersAtAnswer", testsuite.HeadersAtAnswer, 20 * time.Millisecond},
		{"HeadersAtAdmission", testsuite.HeadersAtAdmission, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			latency := func(testsuite.Call, int64) time.Duration { return tt.latency }
			unseenClient(t, srv.Client(), rigOptions{HeadersAt: tt.headersAt, Latency: latency})
		})
	}
}

// unseenClient runs TestUnseenClient's batch on a rig of ro (its limits
// set here).
func unseenClient(t *testing.T, c client.Client, ro rigOptions) {
	const n = 200
	lim := testsuite.Limits{RequestsPerMinute: 60_000, TokensPerMinute: 150_000, BurstWindow: 5 * time.Second}
	ro.Limits = lim
	r := newRig(t, c, ro)
	// 50 tokens every 100 ms: 500 of the 2,500 tokens/s.
	const tick = 100 * time.Millisecond
	unseen := testsuite.Demand{InputTokens: 30, MaxTokens: 20}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				_, _ = r.fp.Spend(r.scope, unseen)
			}
		}
	})
	time.Sleep(time.Second) // the unseen client is already spending
	res := r.run("batch", OverloadSpec{Calls: batch(n, 40, 100, capacity.Standard, 3*time.Minute)})
	close(stop)
	wg.Wait()

	es := r.entries()
	all := r.fp.ScopeEntries(r.scope)
	f := measure(r.fp, r.scope, testsuite.Tokens)
	f.Calls = n
	worst := checkBudgets(t, all, lim)
	layer := r.checkOneRetryLayer(t, es)
	sends := r.sends.all()
	checkNeverPastDeadline(t, sends)
	var direct, directOK int
	var directTokens int64
	var from, to, dfrom, dto time.Time
	for _, e := range all {
		if e.Direct {
			direct++
			if e.Admitted {
				directOK++
				directTokens += e.Charged[testsuite.Tokens]
			}
			if dfrom.IsZero() {
				dfrom = e.Arrival
			}
			dto = e.Arrival
			continue
		}
		if from.IsZero() || e.Arrival.Before(from) {
			from = e.Arrival
		}
		if e.Arrival.After(to) {
			to = e.Arrival
		}
	}
	// At most one 429 event per 30 s of the budget tollgate's calls were
	// charged (counted, not timed: 30 s of tokens at the whole limit's
	// rate), and events counted on the store's record of its grants and
	// cooldowns, not by gaps between arrivals.
	var charged int64
	for _, e := range es {
		if e.Admitted {
			charged += e.Charged[testsuite.Tokens]
		}
	}
	perEvent := lim.TokensPerMinute / 2 // 30 s of the limit
	allowed := max(1, int((charged+perEvent-1)/perEvent))
	events, n429 := r.grants.rateLimitEventsByGrant(t, overloadModel, sends)
	span := to.Sub(from)
	t.Logf("%v", f)
	t.Logf("unseen client: %d requests, %d admitted, %d tokens in %v (%.0f %% of the limit)",
		direct, directOK, directTokens, dto.Sub(dfrom).Round(time.Millisecond), 100*float64(directTokens)/(float64(lim.TokensPerMinute)/60*dto.Sub(dfrom).Seconds()))
	t.Logf("tollgate's 429s: %d in %d events over %v, %d tokens charged (allowed %d), %d of them sent after the worker had read a 429 %v; conformance of all traffic %v; %v",
		n429, events, span.Round(time.Millisecond), charged, allowed, sentAfterA429(sends), f.ProviderRateLimited, worst, layer)
	t.Logf("tollgate's traffic per second: %s", timeline(es, from, to.Add(time.Second), time.Second))

	ok, failed := completed(res)
	assert.Equal(t, n, ok, "every call completes: %v", failed)
	assert.LessOrEqual(t, events, allowed, "at most one 429 event per 30 s of budget for tollgate's calls")
}
