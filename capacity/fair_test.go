package capacity_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

func TestMemoryStoreFairness(t *testing.T) {
	storetest.RunCases(t, storetest.FairCases, func(t *testing.T, clock capacity.Clock) capacity.Store {
		return capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	})
}
