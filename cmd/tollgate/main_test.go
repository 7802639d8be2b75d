package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
			assert.InEpsilon(t, tc.makespan.Seconds(), time.Duration(r.Makespan).Seconds(), 0.02)
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
	for _, w := range []string{"status", "unblock", "advise", "simulate", "-redis addr[,addr...]", "-sentinel-master", "Exit status: 0 ok, 1 failure, 2 usage, 3 empty"} {
		assert.Contains(t, out.String(), w)
	}
	out.Reset()
	assert.Equal(t, 0, run(context.Background(), []string{"simulate", "-rpm", "60", "-calls", "10", "-latency", "1s"}, &out, &errOut))
	assert.Contains(t, out.String(), "binding        requests")
	assert.Equal(t, 2, run(context.Background(), []string{"simulate", "-bogus"}, &out, &errOut))
	assert.Equal(t, 1, run(context.Background(), []string{"simulate", "-provider", "nope"}, &out, &errOut))
}

// exitStatus maps a command's error to the documented exit status and
// says why on stderr.
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"ok", nil, exitOK, ""},
		{"help", flag.ErrHelp, exitOK, ""},
		{"usage, printed by the flag set", errUsage, exitUsage, ""},
		{"usage with a reason", fmt.Errorf("%w: -count is -1", errUsage), exitUsage, "tollgate: usage: -count is -1\n"},
		{"empty", &emptyError{reason: "no scopes in Redis"}, exitEmpty, "tollgate: no scopes in Redis\n"},
		{"wrapped empty", fmt.Errorf("status: %w", &emptyError{reason: "no scopes"}), exitEmpty, "tollgate: status: no scopes\n"},
		{"failure", errors.New("boom"), exitFailure, "tollgate: boom\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			assert.Equal(t, tt.code, exitStatus(tt.err, &errOut))
			assert.Equal(t, tt.stderr, errOut.String())
		})
	}
}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // as main does
	os.Exit(m.Run())
}
