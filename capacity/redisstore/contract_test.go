package redisstore

import (
	"testing"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// TestContract runs the contract suite every capacity.Store passes, class
// rules included, against a real redis-server, on the suite's manual clock.
func TestContract(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	factory := func(t *testing.T, clock capacity.Clock) capacity.Store {
		s, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(t, rdb), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	storetest.Run(t, factory)
	storetest.RunCases(t, storetest.ClassCases, factory)
	storetest.RunCases(t, storetest.FairCases, factory)
}
