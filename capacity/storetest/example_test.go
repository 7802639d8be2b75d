package storetest_test

import (
	"fmt"
	"testing"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// A store of your own passes the contract in one test: the suite gives each
// case a fresh store on a clock it moves.
func ExampleRun() {
	// newStore makes an empty store on the suite's clock. A test of your
	// store's package passes it to Run:
	//
	//	func TestContract(t *testing.T) { storetest.Run(t, newStore) }
	var newStore storetest.Factory = func(t *testing.T, clock capacity.Clock) capacity.Store {
		return capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	}
	_ = newStore
}

// RunCases runs a part of the contract, such as the class rules; each case
// runs as a subtest of its name.
func ExampleRunCases() {
	for _, c := range storetest.ClassCases[:3] {
		fmt.Println(c.Name())
	}
	fmt.Println(len(storetest.ClassCases) > 3)
	// Output:
	// BulkLeavesTheFloorToInteractive
	// StandardSitsBetween
	// WaitingBulkDoesNotBlockInteractive
	// true
}
