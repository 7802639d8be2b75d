package capacity_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

func TestMemoryStoreLearner(t *testing.T) {
	storetest.RunLearner(t, func(t *testing.T, clock capacity.Clock) capacity.Learner {
		return capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	})
}
