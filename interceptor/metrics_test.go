package interceptor_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// recording is a client.MetricsHandler that keeps what it is given: counter
// sums, last gauge values and timer counts, by name and tags.
type recording struct {
	tags map[string]string
	r    *records
}

type records struct {
	mu     sync.Mutex
	points map[string]*point // by key(kind, name, tags)
}

// point is one series: a metric name with one set of tags.
type point struct {
	Kind  string // counter, gauge or timer
	Name  string
	Tags  map[string]string
	Value float64 // counter: sum; gauge: last value; timer: count
}

func newRecording() *recording {
	return &recording{tags: map[string]string{}, r: &records{points: map[string]*point{}}}
}

func (h *recording) WithTags(tags map[string]string) client.MetricsHandler {
	m := maps.Clone(h.tags)
	maps.Copy(m, tags)
	return &recording{tags: m, r: h.r}
}

func (h *recording) record(kind, name string, f func(p *point)) {
	keys := make([]string, 0, len(h.tags))
	for k, v := range h.tags {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	key := kind + " " + name + " " + strings.Join(keys, ",")
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	p := h.r.points[key]
	if p == nil {
		p = &point{Kind: kind, Name: name, Tags: maps.Clone(h.tags)}
		h.r.points[key] = p
	}
	f(p)
}

func (h *recording) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) { h.record("counter", name, func(p *point) { p.Value += float64(d) }) })
}

func (h *recording) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) { h.record("gauge", name, func(p *point) { p.Value = v }) })
}

func (h *recording) Timer(name string) client.MetricsTimer {
	return timerFunc(func(time.Duration) { h.record("timer", name, func(p *point) { p.Value++ }) })
}

type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }

// find returns the tollgate series named name whose tags include want.
func (h *recording) find(name string, want map[string]string) []point {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	var out []point
	for _, p := range h.r.points {
		if p.Name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if p.Tags[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, *p)
		}
	}
	return out
}

// value returns the value of the one series named name with tags want.
func (h *recording) value(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	ps := h.find(name, want)
	require.Len(t, ps, 1, "one %s series with %v", name, want)
	return ps[0].Value
}

// dump is every recorded series, for scanning.
func (h *recording) dump() string {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	var b strings.Builder
	for _, p := range h.r.points {
		fmt.Fprintf(&b, "%s %s %v %v\n", p.Kind, p.Name, p.Tags, p.Value)
	}
	return b.String()
}

// gaugeLoops counts the goroutines running the plugin's gauge loop.
func gaugeLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "interceptor.(*telemetry).gaugeLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitLoops waits (a second at most) until n goroutines run the gauge
// loop: a goroutine is not listed until it first runs, and is listed until
// it has returned.
func waitLoops(t *testing.T, n int, msgAndArgs ...any) {
	t.Helper()
	assert.Eventually(t, func() bool { return gaugeLoops() == n }, time.Second, time.Millisecond, msgAndArgs...)
}

// newMetricsEnv is a test environment whose worker metrics handler is h,
// with the plugin installed (MetricsInterval 20 ms).
func newMetricsEnv(t *testing.T, h client.MetricsHandler, during func(ctx context.Context, in ChatInput)) (*testsuite.TestWorkflowEnvironment, *capacity.MemoryStore) {
	return newMetricsEnvWith(t, h, nil, during)
}

// newMetricsEnvWith is newMetricsEnv with the plugin's options changed by
// mod.
func newMetricsEnvWith(t *testing.T, h client.MetricsHandler, mod func(*interceptor.Options), during func(ctx context.Context, in ChatInput)) (*testsuite.TestWorkflowEnvironment, *capacity.MemoryStore) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
	s.SetMetricsHandler(h)
	e := s.NewTestWorkflowEnvironment()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	opts := interceptor.Options{
		Store:           store,
		Limits:          func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(6000), true },
		MaxLocalWait:    -1,
		MetricsInterval: 20 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	plugin, err := interceptor.NewPlugin(opts)
	require.NoError(t, err)
	e.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: deadlockTimeout, Plugins: []worker.Plugin{plugin}})
	acts := &chatActivities{baseURL: newScripted(t).srv.URL, keys: map[string]string{"team-a": "sk-test-a"}, during: during}
	e.RegisterActivityWithOptions(acts.Chat, activity.RegisterOptions{Name: "Chat"})
	e.RegisterWorkflow(StepsWorkflow)
	return e, store
}

// The gate's metrics go to the worker's Temporal metrics handler: per-call
// metrics with the activity's tags, budget gauges with the client's. While
// the worker runs, the gauges follow the store; the worker's stop updates
// them a last time and ends the plugin's goroutine.
func TestMetricsGoToTheWorkersHandler(t *testing.T) {
	rec := newRecording()
	scope := gpt4o.Key()
	waitLoops(t, 0, "no gauge loop left by earlier tests")
	var levelDuring bool
	var loopDuring bool
	e, store := newMetricsEnv(t, rec, func(ctx context.Context, in ChatInput) {
		// The call holds its lease: the in-flight gauge reaches 1 within a
		// few MetricsIntervals.
		loopDuring = assert.Eventually(t, func() bool { return gaugeLoops() == 1 }, time.Second, time.Millisecond)
		assert.Eventually(t, func() bool {
			ps := rec.find("tollgate.inflight", map[string]string{"scope": scope})
			return len(ps) == 1 && ps[0].Value == 1
		}, 5*time.Second, 5*time.Millisecond, "the in-flight gauge follows the store while the worker runs")
		levelDuring = len(rec.find("tollgate.budget.level", map[string]string{"scope": scope, "dimension": "requests"})) == 1
	})
	e.ExecuteWorkflow(StepsWorkflow, []Step{{In: call("gpt-4o", "team-a")}})
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())

	assert.True(t, loopDuring, "one gauge loop while the worker runs")
	waitLoops(t, 0, "the worker's stop ended the gauge loop")

	class := capacity.Class(0).String()
	perCall := map[string]string{"scope": scope, "activity_type": "Chat", "workflow_type": "StepsWorkflow"}
	with := func(m map[string]string) map[string]string { return merge(perCall, m) }
	assert.Equal(t, 1.0, rec.value(t, "tollgate.admissions", with(map[string]string{"class": class, "result": "granted"})))
	assert.Equal(t, 1.0, rec.value(t, "tollgate.admission.wait", with(map[string]string{"class": class})), "one wait recorded")
	assert.Positive(t, rec.value(t, "tollgate.tokens.reserved", with(map[string]string{"dimension": "tokens"})))
	assert.Equal(t, 100.0, rec.value(t, "tollgate.tokens.settled", with(map[string]string{"dimension": "tokens"})), "the usage the provider reported")

	// The gauges carry the client's tags: a budget is the same for every
	// workflow, activity and task queue.
	gauge := map[string]string{"scope": scope, "activity_type": "none", "workflow_type": "none", "task_queue": "none"}
	assert.Equal(t, 0.0, rec.value(t, "tollgate.inflight", gauge), "updated at the worker's stop")
	level := rec.value(t, "tollgate.budget.level", merge(gauge, map[string]string{"dimension": "requests"}))
	snap, err := store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.InDelta(t, snap.Level[capacity.Requests], level, 1, "the level the store reports")
	assert.True(t, levelDuring, "the level gauge was set while the call ran")
	assert.Empty(t, rec.find("tollgate.budget.level", map[string]string{"activity_type": "Chat"}), "no gauge with activity tags")

	dump := rec.dump()
	assert.NotContains(t, dump, "sk-test-a", "no key in the metrics")
	assert.NotContains(t, dump, "hello", "no prompt in the metrics")
}

func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// The plugin's gauge loop runs from the start of the first worker it is set
// on to the stop of the last; replayers do not start it.
func TestPluginGaugeLoopFollowsItsWorkers(t *testing.T) {
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(60), true },
	})
	require.NoError(t, err)
	ctx := context.Background()
	waitLoops(t, 0, "no gauge loop left by earlier tests")
	start := func(key string) {
		require.NoError(t, plugin.StartWorker(ctx, worker.PluginStartWorkerOptions{WorkerInstanceKey: key},
			func(context.Context, worker.PluginStartWorkerOptions) error { return nil }))
	}
	stop := func(key string) {
		plugin.StopWorker(ctx, worker.PluginStopWorkerOptions{WorkerInstanceKey: key}, func(context.Context, worker.PluginStopWorkerOptions) {})
	}

	start("w1")
	start("w1") // a plugin set on both a client and its worker
	start("w2")
	waitLoops(t, 1, "one loop for all the plugin's workers")
	replayed := false
	require.NoError(t, plugin.ReplayWorkflow(ctx, worker.PluginReplayWorkflowOptions{
		WorkflowReplayerInstanceKey: "r1", WorkflowReplayRegistry: nopReplayRegistry{},
	}, func(context.Context, worker.PluginReplayWorkflowOptions) error {
		replayed = true
		return nil
	}))
	assert.True(t, replayed)
	stop("w1")
	waitLoops(t, 1, "w2 still runs")
	stop("w1")
	stop("w2")
	waitLoops(t, 0, "the last stop ended the loop")
	start("w3")
	waitLoops(t, 1, "a new start starts it again")
	stop("w3")
	waitLoops(t, 0)
}

type nopReplayRegistry struct{}

func (nopReplayRegistry) RegisterWorkflowWithOptions(any, workflow.RegisterOptions)    {}
func (nopReplayRegistry) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {}

// A negative MetricsInterval is refused.
func TestNegativeMetricsInterval(t *testing.T) {
	_, err := interceptor.NewPlugin(interceptor.Options{
		Store:           capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits:          func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(60), true },
		MetricsInterval: -time.Second,
	})
	require.ErrorIs(t, err, interceptor.ErrInvalidOptions)
}

// On a real worker, set through client.Options.Plugins, the gate's metrics
// reach the client's metrics handler (the one Temporal's own metrics use),
// the gauges while the worker runs; stopping the worker ends the plugin's
// goroutine.
func TestMetricsOnARealWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rec := newRecording()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:           store,
		Limits:          func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(6000), true },
		MetricsInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{
		HostPort: srv.FrontendHostPort(), Logger: devserver.QuietLogger(),
		MetricsHandler: rec, Plugins: []client.Plugin{plugin},
	})
	require.NoError(t, err)
	defer c.Close()

	waitLoops(t, 0, "no gauge loop left by earlier tests")
	const queue = "tollgate-metrics"
	w := worker.New(c, queue, worker.Options{})
	acts := &chatActivities{baseURL: newScripted(t).srv.URL, keys: map[string]string{"team-a": "sk-test-a"}}
	w.RegisterActivityWithOptions(acts.Chat, activity.RegisterOptions{Name: "Chat"})
	w.RegisterWorkflow(E2EChatWorkflow)
	require.NoError(t, w.Start())
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	waitLoops(t, 1, "the worker's start started the gauge loop")

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "metrics-real-worker", TaskQueue: queue},
		E2EChatWorkflow, call("gpt-4o", "team-a"), int32(0))
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))

	scope := gpt4o.Key()
	assert.Equal(t, 1.0, rec.value(t, "tollgate.admissions", map[string]string{
		"scope": scope, "result": "granted", "namespace": "default", "task_queue": queue, "activity_type": "Chat",
	}))
	gauge := map[string]string{"scope": scope, "dimension": "requests", "namespace": "default", "client_name": "temporal_go", "task_queue": "none"}
	assert.Eventually(t, func() bool { return len(rec.find("tollgate.budget.level", gauge)) == 1 },
		10*time.Second, 10*time.Millisecond, "the level gauge is updated while the worker runs")
	// Temporal's own metrics reach the same handler.
	assert.NotEmpty(t, rec.find("temporal_activity_execution_latency", map[string]string{"activity_type": "Chat"}))

	w.Stop()
	stopped = true
	waitLoops(t, 0, "the worker's stop ended the gauge loop")
}
