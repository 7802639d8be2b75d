package capacity

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
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

// TestLeasesByExpiry (rapid): through grants, renewals and ends, a
// leaseSet's earliest expiry is the earliest of its live leases, what it
// pops as expired at a time is exactly the live leases expired by then.
func TestLeasesByExpiry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newLeaseSet()
		base := time.Unix(1_700_000_000, 0)
		at := func(t *rapid.T) time.Time {
			return base.Add(time.Duration(rapid.IntRange(0, 50).Draw(t, "ms")) * time.Millisecond)
		}
		call := func(t *rapid.T) string { return fmt.Sprint("c", rapid.IntRange(0, 20).Draw(t, "call")) }
		earliest := func() time.Time {
			var e time.Time
			for _, le := range s.all() {
				if e.IsZero() || le.Expires.Before(e) {
					e = le.Expires
				}
			}
			return e
		}
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				c := call(t)
				s.put(c, Lease{Call: c, Expires: at(t)})
			},
			"renew": func(t *rapid.T) {
				c := call(t)
				if le, ok := s.get(c); ok {
					le.Expires = at(t)
					s.update(c, le)
				}
			},
			"end": func(t *rapid.T) { s.del(call(t)) },
			"expire": func(t *rapid.T) {
				now := at(t)
				want := map[string]bool{}
				for c, le := range s.all() {
					if !now.Before(le.Expires) {
						want[c] = true
					}
				}
				got := map[string]bool{}
				for {
					le, ok := s.popExpired(now)
					if !ok {
						break
					}
					require.False(t, got[le.Call], "%s popped twice", le.Call)
					got[le.Call] = true
					s.del(le.Call)
				}
				require.Equal(t, want, got)
			},
			"": func(t *rapid.T) {
				require.True(t, earliest().Equal(s.nextExpiry()), "next expiry: leases %v, filed %v", earliest(), s.nextExpiry())
			},
		})
	})
}

// TestLeasesByExpiryStayBounded: a scope that grants and ends a lease per
// call files each, and the entries of leases that ended are dropped once
// they outnumber the live ones: a hot scope's, ended long before they
// would have expired, do not pile up.
func TestLeasesByExpiryStayBounded(t *testing.T) {
	s := newLeaseSet()
	base := time.Unix(1_700_000_000, 0)
	s.put("held", Lease{Call: "held", Expires: base.Add(time.Hour)})
	for i := range 10_000 {
		c := fmt.Sprint("c", i)
		s.put(c, Lease{Call: c, Expires: base.Add(time.Minute + time.Duration(i)*time.Millisecond)})
		require.LessOrEqual(t, len(s.byExpiry), 2*s.len()+65)
		s.del(c)
	}
	require.True(t, s.nextExpiry().Equal(base.Add(time.Hour)))
}
