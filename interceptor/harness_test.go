package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	tgerrors "github.com/tollgate-dev/tollgate/errors"

	// What a worker running its own openai-go activities imports so the gate
	// reads *openai.Error (the activities package imports it too).
	_ "github.com/tollgate-dev/tollgate/errors/openaierr"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// scripted is an OpenAI-compatible server that answers each request with the
// next scripted reply (a 200 with usage once the script is empty).
type scripted struct {
	mu      sync.Mutex
	replies []reply
	calls   atomic.Int64
	srv     *httptest.Server
}

type reply struct {
	status int
	header map[string]string
	body   string
	delay  time.Duration
}

func newScripted(t *testing.T, replies ...reply) *scripted {
	s := &scripted{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	s.mu.Lock()
	rep := reply{status: 200}
	if len(s.replies) > 0 {
		rep, s.replies = s.replies[0], s.replies[1:]
	}
	s.mu.Unlock()
	if rep.delay > 0 {
		time.Sleep(rep.delay)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("content-type", "application/json")
	if rep.status == 0 || rep.status == 200 {
		w.Header().Set("x-ratelimit-limit-requests", "600")
		w.Header().Set("x-ratelimit-remaining-requests", "590")
		w.WriteHeader(200)
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":10,"total_tokens":100}}`)
		return
	}
	w.WriteHeader(rep.status)
	fmt.Fprint(w, rep.body)
}

func rateLimited(retryAfter string) reply {
	return reply{status: 429, header: map[string]string{"retry-after": retryAfter, "x-ratelimit-remaining-requests": "0"},
		body: `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 600, Used 600, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}
}

func quotaExhausted() reply {
	return reply{status: 429, body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}
}

func badKey() reply {
	return reply{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`}
}

func overloaded() reply {
	return reply{status: 503, body: `{"error":{"message":"The server is overloaded, please try again later.","type":"server_error","param":null,"code":null}}`}
}

func serverError() reply {
	return reply{status: 500, body: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`}
}

// ChatInput is the test model-call activity's input.
type ChatInput struct {
	Model      string
	Credential string
	MaxTokens  int64
	Prompt     string
	Class      capacity.Class
	// ClassName and FairnessKey are the request's own Call.ClassName and
	// Call.FairnessKey.
	ClassName   string
	FairnessKey string
	// NotSent makes the activity fail before it sends the request.
	NotSent bool
	// Hold keeps the activity running this long after the call (a long
	// call), advancing the test clock if one is set.
	Hold time.Duration
}

func (c ChatInput) TollgateCall() interceptor.Call {
	return interceptor.Call{
		Provider: capacity.OpenAI, Model: c.Model, Credential: c.Credential, Class: c.Class,
		ClassName: c.ClassName, FairnessKey: c.FairnessKey,
		Demand: capacity.Demand{InputTokens: int64(len(c.Prompt)/4 + 10), MaxTokens: c.MaxTokens},
	}
}

// ChatResult is the test activity's result.
type ChatResult struct {
	Text   string
	Usage  capacity.Usage
	Header http.Header
}

func (r ChatResult) TollgateReport() interceptor.Report {
	return interceptor.Report{Usage: r.Usage, HasUsage: true, Header: r.Header}
}

// chatActivities is a model-call activity on the real openai-go client.
type chatActivities struct {
	baseURL string
	keys    map[string]string // credential name → key, resolved on the worker
	during  func(ctx context.Context, in ChatInput)
}

func (a *chatActivities) Chat(ctx context.Context, in ChatInput) (ChatResult, error) {
	if in.NotSent {
		interceptor.SetReport(ctx, interceptor.Report{NotSent: true})
		return ChatResult{}, temporal.NewApplicationError("could not build the request", "test.Build")
	}
	key := a.keys[interceptor.Credential(ctx, in.Credential)] // a pool's member, else the credential itself
	client := openai.NewClient(option.WithBaseURL(a.baseURL), option.WithAPIKey(key), option.WithMaxRetries(0))
	var resp *http.Response
	out, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               in.Model,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Prompt)},
		MaxCompletionTokens: openai.Int(in.MaxTokens),
	}, option.WithResponseInto(&resp))
	if err != nil {
		return ChatResult{}, err
	}
	if a.during != nil {
		a.during(ctx, in)
	}
	return ChatResult{
		Text:   out.Choices[0].Message.Content,
		Usage:  capacity.Usage{InputTokens: out.Usage.PromptTokens, OutputTokens: out.Usage.CompletionTokens},
		Header: resp.Header,
	}, nil
}

// ChatWorkflow runs Chat n times in sequence on a model-call retry policy
// and returns the results, or the first error.
func ChatWorkflow(ctx workflow.Context, inputs []ChatInput) ([]ChatResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Hour,
		StartToCloseTimeout:    10 * time.Minute,
		HeartbeatTimeout:       20 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 1000},
	})
	var out []ChatResult
	for _, in := range inputs {
		var r ChatResult
		if err := workflow.ExecuteActivity(ctx, "Chat", in).Get(ctx, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ParallelChatWorkflow starts every Chat at once.
func ParallelChatWorkflow(ctx workflow.Context, inputs []ChatInput) ([]ChatResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Hour,
		StartToCloseTimeout:    10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 1000},
	})
	var futs []workflow.Future
	for _, in := range inputs {
		futs = append(futs, workflow.ExecuteActivity(ctx, "Chat", in))
	}
	out := make([]ChatResult, len(futs))
	for i, f := range futs {
		if err := f.Get(ctx, &out[i]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Step is one call of StepsWorkflow: sleep After (workflow time), then
// call, in parallel with the following steps if Async.
type Step struct {
	After time.Duration
	In    ChatInput
	Async bool
	// StartToClose overrides the activity's StartToCloseTimeout.
	StartToClose time.Duration
	// Heartbeat sets the activity's HeartbeatTimeout.
	Heartbeat time.Duration
}

// Outcome is what the workflow saw of one step.
type Outcome struct {
	OK           bool
	Type         string
	NonRetryable bool
	Details      tgerrors.Details
	HasDetails   bool
	Done         time.Time
}

// StepsWorkflow runs steps and reports what it saw of each.
func StepsWorkflow(ctx workflow.Context, steps []Step) ([]Outcome, error) {
	out := make([]Outcome, len(steps))
	var pending []func()
	for i, st := range steps {
		if st.After > 0 {
			if err := workflow.Sleep(ctx, st.After); err != nil {
				return out, err
			}
		}
		ao := workflow.ActivityOptions{
			ScheduleToCloseTimeout: time.Hour,
			StartToCloseTimeout:    10 * time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Second, MaximumAttempts: 1000},
		}
		if st.StartToClose > 0 {
			ao.StartToCloseTimeout = st.StartToClose
		}
		ao.HeartbeatTimeout = st.Heartbeat
		f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), "Chat", st.In)
		collect := func() {
			var r ChatResult
			err := f.Get(ctx, &r)
			o := Outcome{OK: err == nil, Done: workflow.Now(ctx)}
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) {
				o.Type, o.NonRetryable = ae.Type(), ae.NonRetryable()
			} else if err != nil {
				o.Type = err.Error()
			}
			o.Details, o.HasDetails = tgerrors.DetailsOf(err)
			out[i] = o
		}
		if st.Async {
			pending = append(pending, collect)
			continue
		}
		collect()
	}
	for _, c := range pending {
		c()
	}
	return out, nil
}

// env is one test's Temporal test environment with the plugin installed.
type env struct {
	*testsuite.TestWorkflowEnvironment
	store *capacity.MemoryStore
	// ledger is the cost ledger on the store's clock (withLedger installs it).
	ledger   *ledger.Memory
	provider *scripted
	acts     *chatActivities
	attempts []attempt
	mu       sync.Mutex
}

type attempt struct {
	at  time.Time
	n   int32
	err error
}

var gpt4o = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}

// newEnv builds an environment whose store and gate run on the workflow
// environment's clock, so Temporal's retry delays move the budget's time.
func newEnv(t *testing.T, limits capacity.Limits, mod func(*interceptor.Options), replies ...reply) *env {
	return newEnvWithStore(t, nil, limits, mod, replies...)
}

// newEnvWithStore is newEnv with a given store (nil: a memory store on the
// workflow environment's clock).
func newEnvWithStore(t *testing.T, store *capacity.MemoryStore, limits capacity.Limits, mod func(*interceptor.Options), replies ...reply) *env {
	return newEnvPlugins(t, store, limits, mod, 1, replies...)
}

// newEnvPlugins is newEnvWithStore with the plugin installed copies times
// (as when it is set on both a client and its worker).
func newEnvPlugins(t *testing.T, store *capacity.MemoryStore, limits capacity.Limits, mod func(*interceptor.Options), copies int, replies ...reply) *env {
	return newEnvFull(t, store, limits, mod, copies, nil, replies...)
}

// newEnvWith is newEnv with outer worker interceptors (such as Temporal's
// tracing interceptor) before the plugin's.
func newEnvWith(t *testing.T, limits capacity.Limits, mod func(*interceptor.Options), outer []sdkinterceptor.WorkerInterceptor, replies ...reply) *env {
	return newEnvFull(t, nil, limits, mod, 1, outer, replies...)
}

func newEnvFull(t *testing.T, store *capacity.MemoryStore, limits capacity.Limits, mod func(*interceptor.Options), copies int, outer []sdkinterceptor.WorkerInterceptor, replies ...reply) *env {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
	e := &env{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment()}
	e.store = store
	if e.store == nil {
		e.store = capacity.NewMemoryStore(capacity.MemoryOptions{Clock: envClock{e.TestWorkflowEnvironment}})
	}
	e.provider = newScripted(t, replies...)
	e.acts = &chatActivities{baseURL: e.provider.srv.URL, keys: map[string]string{"team-a": "sk-test-a", "team-b": "sk-test-b"}}
	opts := interceptor.Options{
		Store:        e.store,
		Limits:       func(capacity.Scope) (capacity.Limits, bool) { return limits, true },
		Clock:        envClock{e.TestWorkflowEnvironment},
		MaxLocalWait: -1,
		Rand:         func() float64 { return 0.5 },
	}
	if mod != nil {
		mod(&opts)
	}
	e.ledger, _ = opts.Ledger.(*ledger.Memory)
	var plugins []worker.Plugin
	for range copies {
		plugin, err := interceptor.NewPlugin(opts)
		require.NoError(t, err)
		plugins = append(plugins, plugin)
	}
	e.SetWorkerOptions(worker.Options{
		DeadlockDetectionTimeout: deadlockTimeout,
		Plugins:                  plugins,
		Interceptors:             append(append([]sdkinterceptor.WorkerInterceptor(nil), outer...), &recorder{e: e}),
	})
	e.RegisterWorkflow(ChatWorkflow)
	e.RegisterWorkflow(ParallelChatWorkflow)
	e.RegisterWorkflow(StepsWorkflow)
	e.RegisterWorkflow(ShortDeadlineWorkflow)
	e.RegisterActivityWithOptions(e.acts.Chat, activity.RegisterOptions{Name: "Chat"})
	return e
}

// recorder is an outer interceptor that logs every attempt's outcome as the
// worker hands it to Temporal.
type recorder struct {
	sdkinterceptor.WorkerInterceptorBase
	e *env
}

func (r *recorder) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	a := &recordingInbound{e: r.e}
	a.Next = next
	return a
}

type recordingInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	e *env
}

func (a *recordingInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	start := a.e.Now()
	res, err := a.Next.ExecuteActivity(ctx, in)
	a.e.mu.Lock()
	a.e.attempts = append(a.e.attempts, attempt{at: start, n: activity.GetInfo(ctx).Attempt, err: err})
	a.e.mu.Unlock()
	return res, err
}

func (e *env) attemptLog() []attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]attempt(nil), e.attempts...)
}

// deadlockTimeout is the test environments' DeadlockDetectionTimeout. The
// SDK's default, 1 s of wall time without a workflow goroutine yielding,
// failed a test under two full runs at once ("Potential deadlock
// detected"); a minute only catches a workflow that really hangs.
const deadlockTimeout = time.Minute

// envClock is the workflow environment's clock; its timers are real timers
// (local waits are short in these tests).
type envClock struct {
	e *testsuite.TestWorkflowEnvironment
}

func (c envClock) Now() time.Time { return c.e.Now() }
func (c envClock) NewTimer(d time.Duration) capacity.Timer {
	return capacity.SystemClock{}.NewTimer(d)
}

// run executes StepsWorkflow and returns its outcomes.
func (e *env) run(t *testing.T, steps ...Step) []Outcome {
	t.Helper()
	e.ExecuteWorkflow(StepsWorkflow, steps)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var out []Outcome
	require.NoError(t, e.GetWorkflowResult(&out))
	return out
}

func call(model, cred string) ChatInput {
	return ChatInput{Model: model, Credential: cred, MaxTokens: 50, Prompt: "hello"}
}

// ShortDeadlineWorkflow makes one call, then one whose schedule-to-close
// deadline (30 s) falls before the next request fits (60 s).
func ShortDeadlineWorkflow(ctx workflow.Context) ([]string, error) {
	var types []string
	for _, s2c := range []time.Duration{time.Hour, 30 * time.Second} {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ScheduleToCloseTimeout: s2c,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1000},
		})
		err := workflow.ExecuteActivity(actx, "Chat", call("gpt-4o", "team-a")).Get(ctx, nil)
		var ae *temporal.ApplicationError
		switch {
		case err == nil:
			types = append(types, "ok")
		case errors.As(err, &ae):
			types = append(types, ae.Type())
		default:
			types = append(types, err.Error())
		}
	}
	return types, nil
}
