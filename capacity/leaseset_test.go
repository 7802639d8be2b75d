package capacity

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLeaseSet: a leaseSet holds what a map of leases would through puts,
// replacements and deletions, reuses freed slots, and clones apart.
func TestLeaseSet(t *testing.T) {
	s := newLeaseSet()
	want := map[string]Lease{}
	check := func() {
		t.Helper()
		require.Equal(t, len(want), s.len())
		require.Equal(t, want, maps.Collect(s.all()))
		for call, le := range want {
			got, ok := s.get(call)
			require.True(t, ok)
			require.Equal(t, le, got)
		}
	}
	for i := range 100 {
		call := fmt.Sprint("c", i%40)
		switch i % 3 {
		case 0, 1:
			le := Lease{ID: LeaseID(call, i), Call: call, Attempt: i}
			s.put(call, le)
			want[call] = le
		case 2:
			s.del(call)
			delete(want, call)
		}
		check()
	}
	_, ok := s.get("never")
	require.False(t, ok)
	s.del("never")
	require.LessOrEqual(t, len(s.slab), 40, "freed slots are reused")

	// A lease put again is a new one; an update keeps its slot and
	// generation.
	slot, gen := s.put("c1", Lease{Call: "c1", Attempt: 1})
	_, ok = s.at(slot, gen)
	require.True(t, ok)
	require.True(t, s.update("c1", Lease{Call: "c1", Attempt: 1, ID: "renewed"}))
	le, ok := s.at(slot, gen)
	require.True(t, ok)
	require.Equal(t, "renewed", le.ID)
	again, againGen := s.put("c1", Lease{Call: "c1", Attempt: 2})
	_, ok = s.at(slot, gen)
	require.False(t, ok, "the first lease ended")
	_, ok = s.at(again, againGen)
	require.True(t, ok)
	require.False(t, s.update("never", Lease{}))
	want["c1"] = Lease{Call: "c1", Attempt: 2}
	check()

	c := s.clone()
	c.put("new", Lease{Call: "new"})
	for call := range want {
		c.del(call)
	}
	check() // the original is untouched
	require.Equal(t, 1, c.len())
}
