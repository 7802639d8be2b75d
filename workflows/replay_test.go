package workflows_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/testsuite/replay"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Every committed history replays against today's code: a change that
// would break workflows already running fails here, with no server. If the
// change is deliberate, version it (workflow.GetVersion) or record the
// histories again with `make histories`.
func TestReplayHistories(t *testing.T) {
	for _, name := range historyNames {
		t.Run(name, func(t *testing.T) {
			err := replay.CheckFile(historyPath(name), devserver.QuietLogger(), func(r worker.WorkflowReplayer) {
				registerWorkflows(r)
			})
			require.NoError(t, err, "the recorded history no longer replays")
		})
	}
}

// The histories on disk are exactly historyNames: none missing (a
// vanished file must not pass silently), none unreplayed.
func TestReplayHistoriesAreCommitted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	want := slices.Clone(historyNames)
	slices.Sort(want)
	assert.Equal(t, want, names)
	for _, name := range historyNames {
		h, err := replay.Load(historyPath(name))
		require.NoError(t, err, name)
		assert.Greater(t, len(h.Events), 5, name)
	}
}

// Histories are committed: no API key, in the JSON or in a payload.
func TestReplayHistoriesHoldNoSecrets(t *testing.T) {
	for _, name := range historyNames {
		found, err := historySecretInFile(historyPath(name))
		require.NoError(t, err, name)
		assert.Empty(t, found, "%s holds a secret", name)
	}
	found, err := historySecret([]byte(`{"data":"` + "c2stdG9sbGdhdGUtdGVzdA==" + `"}`))
	require.NoError(t, err)
	assert.NotEmpty(t, found, "a key inside a base64 payload is found")
}

// fallbackAudited is FallbackWorkflow after an incompatible edit: an
// activity call before the chain.
func fallbackAudited(ctx workflow.Context) (string, error) {
	actx := workflow.WithActivityOptions(ctx, workflows.Options{}.ActivityOptions(capacity.Standard))
	if err := workflow.ExecuteActivity(actx, "Audit").Get(ctx, nil); err != nil {
		return "", err
	}
	return FallbackWorkflow(ctx)
}

// The replay test catches an incompatible change.
func TestReplayCatchesAnIncompatibleChange(t *testing.T) {
	err := replay.CheckFile(historyPath(histFallback), devserver.QuietLogger(), func(r worker.WorkflowReplayer) {
		r.RegisterWorkflowWithOptions(fallbackAudited, workflow.RegisterOptions{Name: "FallbackWorkflow"})
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TMPRL1100", "the SDK's nondeterminism error")
}
