package activities_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The chaos rig: worker processes re-executed from the test binary, each a
// Temporal worker with the tollgate plugin on one Redis store, running
// ChaosWorkflow and the OpenAI activity against a fake provider in the test
// process. Each process logs, before and after the fact, every request it
// sends and every lease it is granted or ends, so a process killed with
// SIGKILL leaves its record behind.

// envChaosWorker makes the test binary a chaos worker process; its value is
// the process's chaosSpec as JSON.
const envChaosWorker = "TOLLGATE_CHAOS_WORKER"

// chaosReady is the line a worker process prints once its worker polls.
const chaosReady = "tollgate-chaos-worker-ready"

// chaosSpec is what one worker process runs.
type chaosSpec struct {
	Worker      int
	Temporal    string // host:port of the frontend
	Redis       string // host:port
	Prefix      string
	Provider    string // the fake provider's OpenAI base URL
	Queue       string // workflows and model calls
	Gate        capacity.Limits
	LeaseTTL    time.Duration
	MaxFailures int
	RPCTimeout  time.Duration // the Temporal client's; zero: the SDK's 10 s
	Log         string        // the process's event log
}

// chaosEvent is one line of a worker process's event log.
type chaosEvent struct {
	// Kind is "send" (a request is about to leave), "answer" (its response
	// headers or its error came back), "grant" (the store granted a lease),
	// "renew" (a renewal was asked for at At: Expires if it succeeded, Err
	// if not) or "end" (a lease was settled or released).
	Kind   string
	Worker int
	// At is the worker's clock for send and answer; the store's (Redis)
	// time of the grant for grant; the worker's clock for end.
	At time.Time
	// Call is workflow id/activity id for send and answer, the gate's call
	// id for grant and end.
	Call string
	// Activity is workflow id/activity id for grant.
	Activity string
	Attempt  int32
	Status   int    // answer: the HTTP status, 0 if none came
	Err      string // answer: the transport's error; end: the store's
	Lease    string // grant, end
	Expires  time.Time
	// Took is how long the store took to grant (the one Reserve that did)
	// or to end the lease.
	Took time.Duration
}

// eventLog appends chaosEvents to a file, one write per line: what was
// written is in the file even if the process is killed the next instant.
type eventLog struct {
	mu     sync.Mutex
	f      *os.File
	worker int
}

func (l *eventLog) write(e chaosEvent) {
	e.Worker = l.worker
	b, _ := json.Marshal(e)
	l.mu.Lock()
	_, _ = l.f.Write(append(b, '\n'))
	l.mu.Unlock()
}

// readChaosEvents reads an event log; a last line cut short by a writer
// still at work is left out.
func readChaosEvents(t *testing.T, path string) []chaosEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []chaosEvent
	for len(b) > 0 {
		i := strings.IndexByte(string(b), '\n')
		if i < 0 {
			break
		}
		var e chaosEvent
		require.NoError(t, json.Unmarshal(b[:i], &e), "event log %s", path)
		out = append(out, e)
		b = b[i+1:]
	}
	return out
}

// chaosRequestID names a request in its X-Client-Request-Id header, which
// the fake provider records: "w<worker> <workflow id>/<activity id>#<attempt>".
func chaosRequestID(worker int, call string, attempt int32) string {
	return fmt.Sprintf("w%d %s#%d", worker, call, attempt)
}

// parseChaosRequestID is the inverse of chaosRequestID.
func parseChaosRequestID(id string) (worker int, call string, attempt int32, ok bool) {
	w, rest, ok1 := strings.Cut(id, " ")
	i := strings.LastIndexByte(rest, '#')
	if !ok1 || i < 0 || !strings.HasPrefix(w, "w") {
		return 0, "", 0, false
	}
	wn, err1 := strconv.Atoi(w[1:])
	an, err2 := strconv.ParseInt(rest[i+1:], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, "", 0, false
	}
	return wn, rest[:i], int32(an), true
}

// chaosTransport names every request after the activity attempt that sends
// it and logs it before it leaves and when its answer comes back.
type chaosTransport struct {
	log  *eventLog
	next http.RoundTripper
}

func (c *chaosTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ev := chaosEvent{Kind: "send", At: time.Now()}
	if ctx := req.Context(); activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		ev.Call, ev.Attempt = info.WorkflowExecution.ID+"/"+info.ActivityID, info.Attempt
	}
	req = req.Clone(req.Context())
	req.Header.Set("X-Client-Request-Id", chaosRequestID(c.log.worker, ev.Call, ev.Attempt))
	c.log.write(ev)
	resp, err := c.next.RoundTrip(req)
	ev.Kind, ev.At = "answer", time.Now()
	if err != nil {
		ev.Err = err.Error()
	} else {
		ev.Status = resp.StatusCode
	}
	c.log.write(ev)
	return resp, err
}

// loggedStore is the worker's redisstore.Store, logging each lease granted
// and ended. Embedding the store keeps its other interfaces (release and
// ticket notifications, learning) for the gate.
type loggedStore struct {
	*redisstore.Store
	log *eventLog
}

func (s loggedStore) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	start := time.Now()
	res, err := s.Store.Reserve(ctx, req)
	if err == nil && res.Granted {
		ev := chaosEvent{Kind: "grant", At: res.Lease.GrantedAt, Call: res.Lease.Call, Attempt: int32(res.Lease.Attempt),
			Lease: res.Lease.ID, Expires: res.Lease.Expires, Took: time.Since(start)}
		if activity.IsActivity(ctx) {
			info := activity.GetInfo(ctx)
			ev.Activity = info.WorkflowExecution.ID + "/" + info.ActivityID
		}
		s.log.write(ev)
	}
	return res, err
}

func (s loggedStore) Renew(ctx context.Context, l capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	start := time.Now()
	renewed, err := s.Store.Renew(ctx, l, ttl)
	ev := chaosEvent{Kind: "renew", At: start, Call: l.Call, Attempt: int32(l.Attempt), Lease: l.ID, Took: time.Since(start)}
	if err != nil {
		ev.Err = err.Error()
	} else {
		ev.Expires = renewed.Expires
	}
	s.log.write(ev)
	return renewed, err
}

func (s loggedStore) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	start := time.Now()
	err := s.Store.Settle(ctx, l, final)
	s.logEnd(l, start, err)
	return err
}

func (s loggedStore) Release(ctx context.Context, l capacity.Lease) error {
	start := time.Now()
	err := s.Store.Release(ctx, l)
	s.logEnd(l, start, err)
	return err
}

func (s loggedStore) logEnd(l capacity.Lease, start time.Time, err error) {
	ev := chaosEvent{Kind: "end", At: time.Now(), Call: l.Call, Attempt: int32(l.Attempt), Lease: l.ID, Took: time.Since(start)}
	if err != nil {
		ev.Err = err.Error()
	}
	s.log.write(ev)
}

// chaosWorkerMain is a worker process: it runs until its standard input
// closes (the test ends it, or died) or it is killed.
func chaosWorkerMain(t *testing.T, specJSON string) {
	var spec chaosSpec
	require.NoError(t, json.Unmarshal([]byte(specJSON), &spec))
	f, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	log := &eventLog{f: f, worker: spec.Worker}
	c, err := client.Dial(client.Options{HostPort: spec.Temporal, Logger: devserver.QuietLogger(), RPCTimeout: spec.RPCTimeout})
	require.NoError(t, err)
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: spec.Redis}) // the defaults, as a deployment has them
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: spec.Prefix})
	require.NoError(t, err)
	defer store.Close()
	gate := spec.Gate
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:       loggedStore{Store: store, log: log},
		Limits:      func(s capacity.Scope) (capacity.Limits, bool) { return gate, s.LimitGroup == overloadModel },
		LeaseTTL:    spec.LeaseTTL,
		MaxFailures: spec.MaxFailures,
		Logger:      devserver.QuietLogger(),
	})
	require.NoError(t, err)
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{"e2e": e2eKey},
		BaseURL:     spec.Provider,
		HTTPClient:  &http.Client{Transport: &chaosTransport{log: log, next: http.DefaultTransport}},
	})
	require.NoError(t, err)
	w := worker.New(c, spec.Queue, worker.Options{Plugins: []worker.Plugin{plugin}})
	w.RegisterActivity(oa)
	w.RegisterWorkflow(ChaosWorkflow)
	require.NoError(t, w.Start())
	fmt.Println(chaosReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
	w.Stop()
}

// chaosProc is a running worker process.
type chaosProc struct {
	spec   chaosSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *syncBuffer // its standard output and error
	done   chan struct{}
	killed bool
}

// startChaosWorker starts a worker process and waits until it polls. The
// process ends with the test (its standard input closes), killed if it
// does not stop within 10 s.
func startChaosWorker(t *testing.T, spec chaosSpec) *chaosProc {
	t.Helper()
	arg, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaos$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChaosWorker+"="+string(arg))
	p := &chaosProc{spec: spec, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.out
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		once := sync.Once{}
		for s.Scan() {
			if s.Text() == chaosReady {
				once.Do(func() { close(ready) })
			}
			_, _ = p.out.Write(append(s.Bytes(), '\n'))
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	select {
	case <-ready:
	case <-p.done:
		t.Fatalf("worker process %d exited before it polled:\n%s", spec.Worker, p.out)
	case <-time.After(time.Minute):
		t.Fatalf("worker process %d did not poll within a minute:\n%s", spec.Worker, p.out)
	}
	return p
}

// stop closes the process's standard input and waits for it to exit,
// killing it after 10 s.
func (p *chaosProc) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill kills the process with SIGKILL and waits for it to be gone.
func (p *chaosProc) kill() {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// events returns what the process logged so far.
func (p *chaosProc) events(t *testing.T) []chaosEvent { return readChaosEvents(t, p.spec.Log) }

// openRequests returns the requests the process sent and has no answer
// to, and the leases it holds (granted and not ended), by lease id.
func openRequests(events []chaosEvent) (requests []chaosEvent, leases map[string]chaosEvent) {
	open := map[string]chaosEvent{}
	leases = map[string]chaosEvent{}
	for _, e := range events {
		key := fmt.Sprintf("%s#%d", e.Call, e.Attempt)
		switch e.Kind {
		case "send":
			open[key] = e
		case "answer":
			delete(open, key)
		case "grant":
			leases[e.Lease] = e
		case "end":
			delete(leases, e.Lease)
		}
	}
	for _, e := range open {
		requests = append(requests, e)
	}
	return requests, leases
}

// ChaosSpec is the input of ChaosWorkflow.
type ChaosSpec struct {
	Model         string
	First         int // the first call's prompt number
	Calls         int
	Words         int
	MaxTokens     int64
	Heartbeat     time.Duration
	ScheduleClose time.Duration
}

// ChaosOutcome is how one call of a ChaosWorkflow ended.
type ChaosOutcome struct {
	// Err is "" for an answer, else the type of the application error the
	// call failed with ("timeout", or the error's text, for other errors).
	Err          string
	NonRetryable bool
	Text         int // the answer's length in bytes
}

// ChaosWorkflow runs spec.Calls model calls at once, each with
// workflows.CallModel (the workflow's task queue, the gate's activity
// options), and returns how each ended.
func ChaosWorkflow(ctx workflow.Context, spec ChaosSpec) ([]ChaosOutcome, error) {
	opts := workflows.Options{ScheduleToClose: spec.ScheduleClose, StartToClose: time.Minute, Heartbeat: spec.Heartbeat}
	out := make([]ChaosOutcome, spec.Calls)
	wg := workflow.NewWaitGroup(ctx)
	for i := range spec.Calls {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			p := prompt(spec.First+i, spec.Words)
			req := activities.OpenAIChatRequest{Model: spec.Model, Credential: "e2e", MaxTokens: spec.MaxTokens,
				Messages: []activities.Message{{Role: "user", Content: p}}, InputTokens: testsuite.PromptTokens(p)}
			var res activities.Result
			_, err := workflows.CallModel(ctx, opts, capacity.Standard, []workflows.Call{{Activity: "Chat", Input: req}}, &res)
			var ae *temporal.ApplicationError
			var te *temporal.TimeoutError
			switch {
			case err == nil:
				out[i].Text = len(res.Text)
			case errors.As(err, &ae):
				out[i].Err, out[i].NonRetryable = ae.Type(), ae.NonRetryable()
			case errors.As(err, &te):
				out[i].Err = "timeout"
			default:
				out[i].Err = err.Error()
			}
		})
	}
	wg.Wait(ctx)
	return out, nil
}

// chaosTemporal is a Temporal dev server the test runs itself, on a fixed
// port with its state in a file, so that it can be killed and started
// again with its workflows.
type chaosTemporal struct {
	t    *testing.T
	cli  string
	args []string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

// startChaosTemporal starts a dev server on a free loopback port with its
// state in a file of the test's temporary folder, stopped (killed) when the
// test ends. It skips the test without the CLI, or fails it in CI.
func startChaosTemporal(t *testing.T) *chaosTemporal {
	t.Helper()
	cli, err := devserver.Path()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	ct := &chaosTemporal{t: t, cli: cli, addr: "127.0.0.1:" + port, out: &syncBuffer{}, args: []string{
		"server", "start-dev", "--ip", "127.0.0.1", "--port", port, "--headless", "--namespace", "default",
		"--db-filename", filepath.Join(t.TempDir(), "temporal.db"), "--log-level", "error",
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
	}}
	t.Cleanup(ct.kill)
	ct.start()
	return ct
}

// start starts the server and waits until it answers.
func (ct *chaosTemporal) start() {
	t := ct.t
	t.Helper()
	ct.cmd = exec.Command(ct.cli, ct.args...)
	ct.cmd.Stdout, ct.cmd.Stderr = ct.out, ct.out
	require.NoError(t, ct.cmd.Start())
	ct.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(ct.cmd, ct.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: ct.addr, Logger: devserver.QuietLogger()})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case <-ct.done:
			t.Fatalf("the dev server exited:\n%s", ct.out)
		case <-ctx.Done():
			t.Fatalf("the dev server did not answer within 2 minutes: %v\n%s", err, ct.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill kills the server with SIGKILL and waits for it to be gone.
func (ct *chaosTemporal) kill() {
	if ct.cmd == nil {
		return
	}
	_ = ct.cmd.Process.Signal(syscall.SIGKILL)
	<-ct.done
	ct.cmd = nil
}
