package replay_test

import (
	"fmt"
	"path/filepath"

	"go.temporal.io/sdk/worker"

	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/testsuite/replay"
)

// A history recorded on a dev server and committed as test data replays
// against today's code in a plain test, with no server. A change to
// AssistantWorkflow that would break runs in flight makes CheckFile fail.
func ExampleCheckFile() {
	path := filepath.Join("..", "..", "workflows", "testdata", "histories", "assistant.json")
	err := replay.CheckFile(path, devserver.QuietLogger(), func(r worker.WorkflowReplayer) {
		r.RegisterWorkflow(ab.AssistantWorkflow)
	})
	fmt.Println("replays:", err == nil)
	// Output: replays: true
}
