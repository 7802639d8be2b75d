package activities_test

import (
	"context"
	"fmt"
	"strings"
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

// EmbedBatchWorkflow embeds every batch at once, as a nightly embedding
// job does, through CallModel (class Bulk), and returns the input tokens
// each result reported.
func EmbedBatchWorkflow(ctx workflow.Context, batches []activities.OpenAIEmbedRequest) ([]int64, error) {
	tokens := make([]int64, len(batches))
	errs := make([]error, len(batches))
	wg := workflow.NewWaitGroup(ctx)
	for i, b := range batches {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			var res activities.EmbedResult
			_, errs[i] = workflows.CallModel(ctx, workflows.Options{ScheduleToClose: 2 * time.Minute}, capacity.Bulk,
				[]workflows.Call{{Activity: "Embeddings", Input: b}}, &res)
			tokens[i] = res.Usage.InputTokens
		})
	}
	wg.Wait(ctx)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// TestEmbeddingBatchThroughTheGate: a batch of embeddings requests, all
// scheduled at once, nearly three times the 1 s token burst, passes
// the gate on a dev server with no 429, every request charged its input
// only, and the usage each result reports is the provider's record.
func TestEmbeddingBatchThroughTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const model, batches, textsPerBatch = testsuite.DefaultOpenAIEmbeddingModel, 24, 8
	limits := testsuite.Limits{RequestsPerMinute: 60000, TokensPerMinute: 600000, BurstWindow: time.Second}
	srv := devserver.StartForTest(t)
	fp, err := testsuite.New(testsuite.Options{
		Models:  []testsuite.Model{{Name: model, Provider: testsuite.OpenAI, Embeddings: true, Limits: limits}},
		Keys:    []string{e2eKey},
		Latency: func(testsuite.Call, int64) time.Duration { return 20 * time.Millisecond },
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store: capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits: func(s capacity.Scope) (capacity.Limits, bool) {
			l := ours(limits)
			l.Burst = time.Second
			return l, s.LimitGroup == model
		},
	})
	require.NoError(t, err)
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: activities.StaticCredentials{"e2e": e2eKey}, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	w := worker.New(srv.Client(), "embed", worker.Options{Plugins: []worker.Plugin{plugin}})
	w.RegisterActivity(oa)
	w.RegisterWorkflow(EmbedBatchWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	reqs := make([]activities.OpenAIEmbedRequest, batches)
	var want int64
	for i := range reqs {
		texts := make([]string, textsPerBatch)
		var tokens int64
		for j := range texts {
			texts[j] = fmt.Sprintf("document %d of batch %d: %s", j, i, strings.Repeat("lorem ipsum dolor sit amet ", 20))
			tokens += testsuite.CountTokens(texts[j])
		}
		want += tokens
		// The fake counts a token per 4 bytes, not as OpenAI's tokenizer
		// does: the exact count is given, as in the chat runs.
		reqs[i] = activities.OpenAIEmbedRequest{Model: model, Credential: "e2e", Input: texts, Dimensions: 8, InputTokens: tokens}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "embed-batch-" + t.Name(), TaskQueue: "embed"}, EmbedBatchWorkflow, reqs)
	require.NoError(t, err)
	var got []int64
	require.NoError(t, run.Get(ctx, &got))

	var reported, recorded, charged int64
	for _, n := range got {
		reported += n
	}
	rateLimited := 0
	for _, e := range fp.Entries() {
		if e.Status == 429 {
			rateLimited++
		}
		if e.Admitted {
			recorded += e.Usage.InputTokens
			charged += e.Charged[testsuite.Tokens]
			assert.Zero(t, e.Usage.OutputTokens, "an embedding has no output")
		}
	}
	t.Logf("%d embeddings requests, %d input tokens (%.1fx the 1 s burst of %d), %d provider 429s",
		batches, want, float64(want)/float64(limits.TokensPerMinute/60), limits.TokensPerMinute/60, rateLimited)
	assert.Zero(t, rateLimited, "no 429")
	assert.Equal(t, want, recorded, "the provider's record: every text's tokens")
	assert.Equal(t, recorded, reported, "the usage the results report is the provider's")
	assert.Equal(t, recorded, charged, "charged the input only")
}
