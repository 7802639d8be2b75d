package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/workerproc"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// TestMain makes the test binary a tollgate-redis worker process when it is
// re-executed as one.
func TestMain(m *testing.M) {
	if spec, ok := workerproc.Arg(os.Args[1:]); ok {
		if err := workerMain(spec); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestShortComparison runs tollgate and the cookbook on a small workload
// against OpenAI's accounting with 5 s buckets, on a real dev server.
func TestShortComparison(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t, devserver.PriorityMatcher...)
	env := &Env{Client: srv.Client(), HostPort: srv.FrontendHostPort(), Namespace: "default", Log: logWriter{t}}
	o := Options{
		Workload:   Workload{Seed: 1, Calls: 40, Every: 500 * time.Millisecond},
		Target:     6 * time.Second,
		Timeout:    15 * time.Second,
		Strategies: []string{Tollgate, Cookbook},
		Providers:  Providers[:1],
		Buckets:    Buckets[:1],
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := Compare(ctx, env, o)
	require.NoError(t, err)
	require.Len(t, results, 2)

	tg := results[0].Row()
	require.Equal(t, Tollgate, tg.Strategy)
	assert.Zero(t, tg.Provider429s, "tollgate draws no 429")
	assert.Equal(t, tg.Calls, tg.Completed, "every batch call completes")
	assert.Zero(t, results[0].InteractiveFailed, "every interactive call completes")
	// The drain ratio, utilization and interactive p99 are measured on the
	// wall clock and move with the machine's load: the table below prints
	// them, and the program prints them against the README's bar (drain
	// ratio ≤ 1.03, utilization ≥ 0.97, interactive p99 ≤ 1 s).
	for _, r := range results {
		if r.TimedOut {
			continue // (the cookbook, at times) no last call to split at
		}
		// The batch's requests are tagged, so the excess splits at its
		// last call: left + answer − filled is the excess, less what the
		// provider's bucket lost at its capacity before that call (none,
		// unless a strategy left it full).
		tail, f := r.Figures.Tail, r.Figures
		assert.Positive(t, tail.Answer, "%s: the last batch call is found", r.Spec.Strategy)
		assert.LessOrEqual(t, (tail.Left + tail.Answer - tail.Filled).Seconds(), (f.Drain-f.Binding.Minimum).Seconds()+0.001,
			"%s: left + answer − filled ≤ drain − minimum", r.Spec.Strategy)
	}

	var table, lines, page bytes.Buffer
	require.NoError(t, writeTable(&table, results))
	t.Logf("\n%s", table.String())
	require.NoError(t, writeJSON(&lines, results))
	rows := strings.Split(strings.TrimSpace(lines.String()), "\n")
	require.Len(t, rows, 2)
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(rows[1]), &fields))
	for _, k := range []string{"strategy", "provider", "bucket", "calls", "completed", "provider_requests", "provider_429s", "utilization", "drain_ratio", "interactive_p99_s"} {
		assert.Contains(t, fields, k)
	}
	require.NoError(t, writeHTML(&page, results))
	assert.Contains(t, page.String(), "<svg")
	assert.NotContains(t, page.String(), "http://", "the page loads nothing")
}

// logWriter writes progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestOptionsValidate(t *testing.T) {
	valid := Options{Workload: Workload{Seed: 1, Calls: 300, Every: 500 * time.Millisecond}, Target: 25 * time.Second}
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string // "" for valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"the batch alone", func(o *Options) { o.Workload.Every = 0 }, ""},
		{"a timeout of its own", func(o *Options) { o.Timeout = time.Minute }, ""},
		{"no calls", func(o *Options) { o.Workload.Calls = 0 }, "-calls is 0"},
		{"negative every", func(o *Options) { o.Workload.Every = -time.Second }, "-every is -1s"},
		{"no target", func(o *Options) { o.Target = 0 }, "-target is 0s"},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }, "-timeout is -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			err := o.validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
			_, cerr := Compare(context.Background(), &Env{Log: &bytes.Buffer{}}, o)
			assert.ErrorContains(t, cerr, tt.wantErr, "Compare refuses it before running anything")
		})
	}
}

func TestInteractiveP99Shown(t *testing.T) {
	assert.Equal(t, "–", interactiveP99(Result{}), "a run without interactive calls (-every 0)")
	assert.Equal(t, "0.250s", interactiveP99(Result{Interactive: []time.Duration{100 * time.Millisecond, 250 * time.Millisecond}}))
}
