package activities_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric"
	sdkmetricdata "go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// Models of the end-to-end runs, one per run so runs never share a budget.
const (
	modelOpenAI    = "gpt-4o-mini"
	modelAnthropic = "claude-sonnet-4-5"
	modelNaive     = "gpt-4.1-mini"
	modelShared    = "gpt-4.1-nano"
	modelRedis     = "gpt-4.1"
	modelGemini    = "gemini-2.5-flash"
)

// Limits scaled so that each run of 200 calls takes about ten seconds.
var (
	openAILimits    = testsuite.Limits{RequestsPerMinute: 60000, TokensPerMinute: 150000, BurstWindow: 5 * time.Second}
	anthropicLimits = testsuite.Limits{RequestsPerMinute: 60000, InputTokensPerMinute: 84000, OutputTokensPerMinute: 600000, BurstWindow: 5 * time.Second}
	// Gemini: RPM, TPM of input tokens, and RPD (not binding; its day ends
	// at midnight Pacific on both sides).
	geminiLimits = testsuite.Limits{RequestsPerMinute: 60000, InputTokensPerMinute: 84000, RequestsPerDay: 1000000, BurstWindow: 5 * time.Second}
)

// ours mirrors a fake provider's limits in tollgate's terms, with the same
// 5 s burst and testMargin. The runs' token counts are exact (InputTokens
// from testsuite.PromptTokens), but the margin has a use no exact count
// removes: the gate decides when a call may leave, the provider counts it
// when it arrives, and calls that take different times to arrive bunch up.
// Grants within m of a bucket B at rate r conform to B at r for arrivals
// whose delays differ by up to (1−m)·B/(m·r): 263 ms at the default 0.95
// and a 5 s bucket, 556 ms at 0.9. Production's per-minute buckets give a
// default margin seconds of slack; a 5 s test bucket on a machine running
// two race-enabled suites on two cores does not: with 0.95, two worker
// processes on one Redis drew two token 429s in one loaded run of five
// (TwoWorkersOneRedisBudget), and with SafetyMargin 1 one run in six drew
// one unloaded.
func ours(l testsuite.Limits) capacity.Limits {
	return capacity.Limits{
		RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute,
		InputTokensPerMinute: l.InputTokensPerMinute, OutputTokensPerMinute: l.OutputTokensPerMinute,
		RequestsPerDay: l.RequestsPerDay, TokensPerDay: l.TokensPerDay,
		Burst: 5 * time.Second, SafetyMargin: testMargin,
	}
}

// testMargin is the SafetyMargin of the end-to-end tests' gates: see ours.
const testMargin = 0.9

type e2e struct {
	harness
	reader *metric.ManualReader
	store  *grantLog // the "gated" worker's: a memory store that records grants and cooldowns
}

// setup starts one dev server, one fake provider and two workers: "gated"
// with the tollgate plugin, "naive" without it.
func setup(t *testing.T) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{
			{Name: modelOpenAI, Provider: testsuite.OpenAI, Limits: openAILimits},
			{Name: modelAnthropic, Provider: testsuite.Anthropic, Limits: anthropicLimits},
			{Name: modelNaive, Provider: testsuite.OpenAI, Limits: openAILimits},
			{Name: modelShared, Provider: testsuite.OpenAI, Limits: openAILimits},
			{Name: modelRedis, Provider: testsuite.OpenAI, Limits: openAILimits},
			{Name: modelGemini, Provider: testsuite.Gemini, Limits: geminiLimits},
		},
		Keys:    []string{e2eKey},
		Seed:    7,
		Latency: func(testsuite.Call, int64) time.Duration { return 20 * time.Millisecond },
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	e := &e2e{harness: harness{c: srv.Client(), fp: fp, logs: &syncBuffer{}}, reader: metric.NewManualReader(),
		store: newGrantLog()}
	logger := log.NewStructuredLogger(slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	limits := map[string]capacity.Limits{
		modelOpenAI: ours(openAILimits), modelAnthropic: ours(anthropicLimits),
		modelShared: ours(openAILimits), modelNaive: ours(openAILimits), modelGemini: ours(geminiLimits),
	}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:         e.store,
		Limits:        func(s capacity.Scope) (capacity.Limits, bool) { l, ok := limits[s.LimitGroup]; return l, ok },
		Logger:        logger,
		MeterProvider: metric.NewMeterProvider(metric.WithReader(e.reader)),
	})
	require.NoError(t, err)
	creds := activities.StaticCredentials{"e2e": e2eKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL()})
	require.NoError(t, err)
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: creds, BaseURL: fp.GeminiBaseURL()})
	require.NoError(t, err)

	gated := worker.New(e.c, "gated", worker.Options{Plugins: []worker.Plugin{plugin}})
	gated.RegisterActivity(oa)
	gated.RegisterActivity(an)
	gated.RegisterActivity(gm)
	gated.RegisterWorkflow(GoodputWorkflow)
	require.NoError(t, gated.Start())
	t.Cleanup(gated.Stop)

	naive := worker.New(e.c, "naive", worker.Options{})
	n := &naiveActivities{baseURL: fp.OpenAIBaseURL()}
	naive.RegisterActivityWithOptions(n.Chat, activity.RegisterOptions{Name: "Chat"})
	naive.RegisterWorkflow(GoodputWorkflow)
	require.NoError(t, naive.Start())
	t.Cleanup(naive.Stop)
	return e
}

// naiveActivities is the approach tollgate replaces: the SDK's own retries
// (two, honouring retry-after) inside Temporal's default retry policy.
type naiveActivities struct{ baseURL string }

func (n *naiveActivities) Chat(ctx context.Context, req activities.OpenAIChatRequest) (string, error) {
	c := openai.NewClient(option.WithBaseURL(n.baseURL), option.WithAPIKey(e2eKey), option.WithHTTPClient(http.DefaultClient))
	out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               req.Model,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(req.Messages[0].Content)},
		MaxCompletionTokens: openai.Int(req.MaxTokens),
	})
	if err != nil {
		return "", err
	}
	return out.Choices[0].Message.Content, nil
}

type metricdata struct {
	ResourceMetrics sdkmetricdata.ResourceMetrics
}

// subtest is one named subtest for concurrently.
type subtest struct {
	name string
	run  func(t *testing.T)
}

// concurrently runs each subtest of t (t.Run) on a goroutine of its own,
// at most limit at once, and returns when all have. The end-to-end
// subtests wait on rate limits and servers, not on the CPU (the whole
// package used 0.65 of this machine's two cores), so they overlap past
// -parallel, which counts every t.Parallel test against GOMAXPROCS. Each
// subtest must have its own task queue, fake provider or model, and store
// prefix, and assert nothing that another one's load could move.
func concurrently(t *testing.T, limit int, subtests ...subtest) {
	t.Helper()
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, st := range subtests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(st.name, st.run)
		})
	}
	wg.Wait()
}
