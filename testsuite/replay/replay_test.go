package replay_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/testsuite/replay"
)

// A history recorded on a dev server by the workflows package.
var recorded = filepath.Join("..", "..", "workflows", "testdata", "histories", "fallback.json")

// Save writes what Load reads, byte for byte the file it was read from:
// re-saving a committed history leaves no diff.
func TestSaveLoadRoundTrip(t *testing.T) {
	h, err := replay.Load(recorded)
	require.NoError(t, err)
	require.NotEmpty(t, h.Events)
	path := filepath.Join(t.TempDir(), "h.json")
	require.NoError(t, replay.Save(h, path))
	want, err := os.ReadFile(recorded)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	again, err := replay.Load(path)
	require.NoError(t, err)
	assert.Len(t, again.Events, len(h.Events))
}

func TestEmptyHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"events":[]}`), 0o644))
	_, err := replay.Load(path)
	assert.ErrorIs(t, err, replay.ErrEmptyHistory)
	err = replay.Check(&historypb.History{}, nil, func(worker.WorkflowReplayer) {})
	assert.ErrorIs(t, err, replay.ErrEmptyHistory)
	_, err = replay.Load(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
