// Package devserver starts a real Temporal dev server (the temporal CLI) for
// end-to-end tests: tollgate's own and its users'. It finds the CLI that
// `make temporal` builds (go install github.com/temporalio/cli/cmd/temporal@v1.5.1)
// and starts it with the SDK's testsuite.StartDevServer.
package devserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
)

// EnvCLI names the environment variable that points at the temporal CLI.
const EnvCLI = "TOLLGATE_TEMPORAL_CLI"

// ErrNoCLI is returned by Path when no temporal CLI is found.
var ErrNoCLI = errors.New("devserver: temporal CLI not found (set " + EnvCLI + " or run `make temporal`)")

// Path finds the temporal CLI: $TOLLGATE_TEMPORAL_CLI, then PATH, then
// $(go env GOPATH)/bin/temporal.
func Path() (string, error) {
	candidates := []string{os.Getenv(EnvCLI)}
	if p, err := exec.LookPath("temporal"); err == nil {
		candidates = append(candidates, p)
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(gopath)), "bin", "temporal"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", ErrNoCLI
}

// QuietLogger logs only what is worse than an error: Temporal's SDK logs
// every failed activity attempt at error level, which tests provoke on
// purpose. Pass a logger of your own to see them.
func QuietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Start starts a dev server with the CLI at Path. logger may be nil
// (QuietLogger). Stop it with its Stop method.
func Start(ctx context.Context, logger log.Logger) (*sdktestsuite.DevServer, error) {
	return StartWith(ctx, logger)
}

// PriorityMatcher is the dev server argument that makes Temporal's
// matching dispatch activity tasks by their priority key (temporal.Priority,
// which workflows.CallModel sets from the class): without it an interactive
// call's task waits in its task queue behind every bulk task queued before
// it. Temporal Server 1.29 has it off by default (dynamic config
// matching.useNewMatcher).
var PriorityMatcher = []string{"--dynamic-config-value", "matching.useNewMatcher=true"}

// FairnessMatcher is PriorityMatcher with Temporal's task-queue fairness
// on (dynamic config matching.enableFairness): activity tasks of the same
// priority are dispatched by their fairness key (temporal.Priority,
// which workflows.CallModel sets from Options.FairnessKey) in turn, so a
// tenant whose backlog was scheduled first does not reach the workers
// before every other's.
var FairnessMatcher = append(PriorityMatcher[:len(PriorityMatcher):len(PriorityMatcher)],
	"--dynamic-config-value", "matching.enableFairness=true")

// StartWith is Start with extra arguments for the dev server, such as
// PriorityMatcher.
func StartWith(ctx context.Context, logger log.Logger, args ...string) (*sdktestsuite.DevServer, error) {
	cli, err := Path()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = QuietLogger()
	}
	return sdktestsuite.StartDevServer(ctx, sdktestsuite.DevServerOptions{
		ExistingPath:  cli,
		ClientOptions: &client.Options{Logger: logger},
		LogLevel:      "error",
		ExtraArgs:     args,
		Stdout:        io.Discard,
		Stderr:        io.Discard,
	})
}

// StartForTest starts a dev server (with args, such as PriorityMatcher) for
// t and stops it when t ends. Without
// a CLI it skips t, or fails it when the CI environment variable is set (a
// green CI run must not hide a missing install step).
func StartForTest(t testing.TB, args ...string) *sdktestsuite.DevServer {
	t.Helper()
	if _, err := Path(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := StartWith(ctx, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}
