// Package replay checks that workflows replay deterministically against
// histories recorded on a real Temporal server — the guard against a code
// change that would break workflows in flight. Record histories with Fetch
// and Save (or `temporal workflow show --output json`), commit them as test
// data, and replay them in a plain unit test with CheckFile.
//
// It is a thin layer over the SDK: Fetch reads client.GetWorkflowHistory,
// Load is client.HistoryFromJSON and CheckFile is
// worker.WorkflowReplayer.ReplayWorkflowHistoryFromJSONFile.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
)

// ErrEmptyHistory is returned for a history without events.
var ErrEmptyHistory = errors.New("replay: empty history")

// Fetch returns the full history of a workflow run from the server.
func Fetch(ctx context.Context, c client.Client, workflowID, runID string) (*historypb.History, error) {
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("replay: fetching %s: %w", workflowID, err)
		}
		h.Events = append(h.Events, ev)
	}
	if len(h.Events) == 0 {
		return nil, ErrEmptyHistory
	}
	return h, nil
}

// Save writes h to path as indented protobuf JSON, which Load, CheckFile
// and the SDK's replayer read. The output is stable: the same history
// always gives the same bytes.
func Save(h *historypb.History, path string) error {
	b, err := protojson.Marshal(h)
	if err != nil {
		return fmt.Errorf("replay: %s: %w", path, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("replay: %s: %w", path, err)
	}
	out.WriteByte('\n')
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// Load reads a history saved by Save or by `temporal workflow show --output
// json`, with client.HistoryFromJSON.
func Load(path string) (*historypb.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	if len(h.Events) == 0 {
		return nil, ErrEmptyHistory
	}
	return h, nil
}

// Check replays h with the workflows that register registers on a fresh
// replayer, and returns the nondeterminism error if the code no longer
// produces the recorded commands. logger may be nil (the SDK's default).
func Check(h *historypb.History, logger log.Logger, register func(worker.WorkflowReplayer)) error {
	if h == nil || len(h.Events) == 0 {
		return ErrEmptyHistory
	}
	r := worker.NewWorkflowReplayer()
	register(r)
	return r.ReplayWorkflowHistory(logger, h)
}

// CheckFile is Check on a history file, replayed with the SDK's
// ReplayWorkflowHistoryFromJSONFile.
func CheckFile(path string, logger log.Logger, register func(worker.WorkflowReplayer)) error {
	r := worker.NewWorkflowReplayer()
	register(r)
	if err := r.ReplayWorkflowHistoryFromJSONFile(logger, path); err != nil {
		return fmt.Errorf("replay: %s: %w", path, err)
	}
	return nil
}
