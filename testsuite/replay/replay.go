// Package replay checks that workflows replay deterministically against
// histories recorded on a real Temporal server — the guard against a code
// change that would break workflows in flight. Record histories with
// Fetch (or `temporal workflow show --output json`), keep them as test data,
// and replay them in a test with Check or CheckFile.
package replay

import (
	"context"
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

// Save writes h as JSON (the format the Temporal CLI shows) to path.
func Save(h *historypb.History, path string) error {
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a history saved by Save or by `temporal workflow show --output json`.
func Load(path string) (*historypb.History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := &historypb.History{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, h); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	if len(h.Events) == 0 {
		return nil, ErrEmptyHistory
	}
	return h, nil
}

// Check replays h with the workflows that register registers on a fresh
// replayer, and returns the nondeterminism error if the code no longer
// produces the recorded commands.
func Check(h *historypb.History, logger log.Logger, register func(worker.WorkflowReplayer)) error {
	if h == nil || len(h.Events) == 0 {
		return ErrEmptyHistory
	}
	r := worker.NewWorkflowReplayer()
	register(r)
	return r.ReplayWorkflowHistory(logger, h)
}

// CheckFile is Check on a history file.
func CheckFile(path string, logger log.Logger, register func(worker.WorkflowReplayer)) error {
	h, err := Load(path)
	if err != nil {
		return err
	}
	return Check(h, logger, register)
}
