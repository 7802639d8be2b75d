package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

func TestSimulationMatchesTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      simConfig
		makespan time.Duration // expected, within 2%
		binding  string
	}{
		{
			// 500 × (1000 + 500) tokens at 142,500 TPM (95% of 150,000),
			// less the 5 s burst at the start, plus the last call's latency.
			name: "openai tokens bind",
			cfg: simConfig{Provider: capacity.OpenAI, Calls: 500, Input: 1000, MaxTokens: 500, Output: 250, Latency: 2 * time.Second,
				Limits: capacity.Limits{RequestsPerMinute: 500, TokensPerMinute: 150000, Burst: 5 * time.Second, SafetyMargin: 0.95}},
			makespan: time.Duration((750000-11875)*int64(time.Second)/2375) + 2*time.Second,
			binding:  "tokens",
		},
		{
			// 120 requests at 60 RPM, margin 1, a 1 s burst: one a second.
			name: "requests bind",
			cfg: simConfig{Provider: capacity.Anthropic, Calls: 120, Input: 10, MaxTokens: 10, Output: 5, Latency: time.Second,
				Limits: capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1}},
			makespan: 119*time.Second + time.Second,
			binding:  "requests",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runSimulation(tc.cfg)
			require.NoError(t, err)
			assert.InEpsilon(t, tc.makespan.Seconds(), r.Makespan.Seconds(), 0.02)
			assert.Equal(t, tc.binding, r.Binding)
			assert.Greater(t, r.Utilization, 0.95)
			assert.LessOrEqual(t, r.Utilization, 1.0+1e-9)
			assert.LessOrEqual(t, r.WaitP50, r.WaitP95)
		})
	}
}

func TestSimulationRefusesBadInput(t *testing.T) {
	_, err := runSimulation(simConfig{Provider: "nope", Calls: 1})
	assert.Error(t, err)
	_, err = runSimulation(simConfig{Provider: capacity.OpenAI, Calls: 0})
	assert.Error(t, err)
	_, err = runSimulation(simConfig{Provider: capacity.OpenAI, Calls: 1, Limits: capacity.Limits{TokensPerMinute: -1}})
	assert.ErrorIs(t, err, capacity.ErrInvalidLimits)
	_, err = runSimulation(simConfig{Provider: capacity.OpenAI, Calls: 1, Input: 10000, MaxTokens: 10000, Limits: capacity.Limits{TokensPerMinute: 6000}})
	assert.ErrorIs(t, err, capacity.ErrDemandTooLarge)
}

func TestRunUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), nil, &out, &errOut))
	assert.Equal(t, 2, run(context.Background(), []string{"frobnicate"}, &out, &errOut))
	assert.Equal(t, 0, run(context.Background(), []string{"help"}, &out, &errOut))
	out.Reset()
	assert.Equal(t, 0, run(context.Background(), []string{"simulate", "-rpm", "60", "-calls", "10", "-latency", "1s"}, &out, &errOut))
	assert.Contains(t, out.String(), "binding        requests")
	assert.Equal(t, 2, run(context.Background(), []string{"simulate", "-bogus"}, &out, &errOut))
	assert.Equal(t, 1, run(context.Background(), []string{"simulate", "-provider", "nope"}, &out, &errOut))
}
