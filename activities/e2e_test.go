package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// TestEndToEnd runs 200 gated calls per provider on a real Temporal dev
// server against the fake provider, the naive approach beside them, a run
// with an uncontrolled second client, and a scan for secrets. It prints the
// figures the README quotes.
func TestEndToEnd(t *testing.T) {
	t.Parallel() // its own dev server (setup) and fake provider
	e := setup(t)
	scope := func(model string) testsuite.Scope { return testsuite.Scope{Key: e2eKey, Model: model} }
	spec := func(act, model string) GoodputSpec {
		return GoodputSpec{Activity: act, Model: model, N: calls, MaxTokens: 100, Words: 40, ScheduleClose: 5 * time.Minute}
	}

	// Each run has its own model (one budget each) on the fake provider:
	// two at once, then the scan of everything they left.
	concurrently(t, 2,
		subtest{"OpenAI", func(t *testing.T) {
			res := runGoodput(t, &e.harness, "gated", spec("Chat", modelOpenAI))
			assertGoodput(t, measure(e.fp, scope(modelOpenAI), testsuite.Tokens), res)
		}},
		subtest{"Anthropic", func(t *testing.T) {
			res := runGoodput(t, &e.harness, "gated", spec("Messages", modelAnthropic))
			assertGoodput(t, measure(e.fp, scope(modelAnthropic), testsuite.InputTokens), res)
		}},
		subtest{"Gemini", func(t *testing.T) {
			res := runGoodput(t, &e.harness, "gated", spec("GenerateContent", modelGemini))
			f := measure(e.fp, scope(modelGemini), testsuite.InputTokens)
			assertGoodput(t, f, res)
			// The gate counted the day on Gemini's boundary: midnight Pacific.
			snap, err := e.store.Snapshot(context.Background(), capacity.Scope{Provider: capacity.Gemini, LimitGroup: modelGemini, Credential: "e2e"})
			require.NoError(t, err)
			pacific, err := time.LoadLocation("America/Los_Angeles")
			require.NoError(t, err)
			assert.True(t, snap.DayResetAt.Equal(capacity.DayBoundary{Location: pacific}.Next(snap.Now)),
				"per-day budget resets at %v", snap.DayResetAt)
			var output int64
			for _, en := range e.fp.ScopeEntries(scope(modelGemini)) {
				output += en.Usage.OutputTokens
			}
			t.Logf("gemini: %d output tokens reported (not metered per minute); day resets at %v (%v)",
				output, snap.DayResetAt.UTC().Format(time.RFC3339), snap.DayResetAt.Format("15:04 MST"))
		}},
		subtest{"TwoWorkersOneRedisBudget", func(t *testing.T) {
			// Two workers, each with its own Redis store on the same Redis: one
			// budget, shared.
			startRedisWorkers(t, e, "gated-redis", 2, map[string]capacity.Limits{modelRedis: ours(openAILimits)})
			res := runGoodput(t, &e.harness, "gated-redis", spec("Chat", modelRedis))
			assertGoodput(t, measure(e.fp, scope(modelRedis), testsuite.Tokens), res)
		}},
		subtest{"Naive", func(t *testing.T) {
			s := spec("Chat", modelNaive)
			s.Naive, s.ScheduleClose = true, time.Minute
			res := runGoodput(t, &e.harness, "naive", s)
			f := measure(e.fp, scope(modelNaive), testsuite.Tokens)
			t.Logf("naive (SDK retries, default retry policy, 1 min schedule-to-close): %v", f)
			t.Logf("naive: %d of %d calls completed, %d failed; %d provider requests were wasted on 429s", res.OK, calls, res.Failed, f.RateLimited)
		}},
		subtest{"SecondClient", func(t *testing.T) {
			// An uncontrolled client spends a fifth of the budget on the same key.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(500 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						_, _ = e.fp.Spend(scope(modelShared), testsuite.Demand{InputTokens: 150, MaxTokens: 100})
					}
				}
			}()
			res := runGoodput(t, &e.harness, "gated", spec("Chat", modelShared))
			close(stop)
			wg.Wait()
			f := measure(e.fp, scope(modelShared), testsuite.Tokens)
			var direct, directOK int
			var directTokens int64
			for _, en := range e.fp.ScopeEntries(scope(modelShared)) {
				if en.Direct {
					direct++
					if en.Admitted {
						directOK++
						directTokens += en.Charged[testsuite.Tokens]
					}
				}
			}
			t.Logf("second client: %d requests, %d admitted, %d tokens", direct, directOK, directTokens)
			t.Logf("with a second client spending 500 tokens/s of 2,500: %v", f)
			assert.Equal(t, calls, res.OK, "all work completes")
			assert.LessOrEqual(t, f.RateLimited, calls*15/100, "tollgate's 429s are few")
			// Each 429 is honoured as a shared delay: the gate sets a cooldown
			// (retry-after, at least 1 s) and the store grants no gated call
			// on the scope while it holds. Asserted on the store's record of
			// its grants and cooldowns, not on arrivals: a call granted just
			// before a 429 may reach the provider late on a loaded machine.
			n429 := 0
			for _, en := range e.fp.ScopeEntries(scope(modelShared)) {
				if !en.Direct && en.Status == 429 {
					n429++
				}
			}
			cooldowns, grants := e.store.checkCooldownsHeld(t, modelShared, n429)
			t.Logf("second client: tollgate read %d 429s, set %d cooldowns; %d leases granted", n429, cooldowns, grants)
		}},
	)
	t.Run("NoSecretsOrPrompts", func(t *testing.T) {
		scanForSecrets(t, e)
	})
}

// scanForSecrets looks for the API key and the prompt marker in every
// workflow history (outside activity inputs and results), in the worker's
// logs and in the exported metrics.
func scanForSecrets(t *testing.T, e *e2e) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	needles := []string{e2eKey, marker}
	e.mu.Lock()
	runs := append([]client.WorkflowRun(nil), e.runs...)
	e.mu.Unlock()
	require.NotEmpty(t, runs)
	events := 0
	for _, run := range runs {
		it := e.c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			events++
			// Activity inputs and results hold the prompts by design.
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				a.Input = nil
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				a.Result = nil
			}
			b, err := protojson.Marshal(ev)
			require.NoError(t, err)
			for _, n := range needles {
				require.NotContainsf(t, string(b), n, "history event %v of %s carries a secret or prompt", ev.EventType, run.GetID())
			}
		}
	}
	logs := e.logs.String()
	require.NotEmpty(t, logs)
	var rm metricdata
	require.NoError(t, e.reader.Collect(ctx, &rm.ResourceMetrics))
	mb, err := json.Marshal(rm.ResourceMetrics)
	require.NoError(t, err)
	require.Contains(t, string(mb), "tollgate.admissions", "metrics were exported")
	for _, n := range needles {
		assert.NotContains(t, logs, n, "logs")
		assert.NotContains(t, string(mb), n, "metrics")
	}
	assert.True(t, strings.Contains(string(mb), "scope"), "metrics carry scope names")
	t.Logf("scanned %d history events of %d workflows, %d bytes of logs, %d bytes of metrics: no key, no prompt", events, len(runs), len(logs), len(mb))
}
