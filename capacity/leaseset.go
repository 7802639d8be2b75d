package capacity

import (
	"iter"
	"maps"
	"slices"
)

// leaseSet holds a scope's live leases by call. A Lease is too large for a
// map to hold in place (Go stores map values over 128 bytes behind a
// pointer, one allocation per insert), so the leases live in a slab whose
// freed slots are reused, and the map holds their indexes: granting and
// ending a lease allocate nothing once the slab has grown to the most
// leases the scope has held at once.
type leaseSet struct {
	index map[string]int32 // call -> slot in slab
	slab  []Lease
	// gen counts each slot's occupants: a slot and its generation name one
	// lease for as long as it lives (recentGrants holds them).
	gen  []uint32
	free []int32 // slots of slab not in use
}

func newLeaseSet() leaseSet { return leaseSet{index: make(map[string]int32)} }

// len returns the number of live leases.
func (s *leaseSet) len() int { return len(s.index) }

// get returns call's lease.
func (s *leaseSet) get(call string) (Lease, bool) {
	i, ok := s.index[call]
	if !ok {
		return Lease{}, false
	}
	return s.slab[i], true
}

// put makes le call's lease, ending any it had, and returns its slot and
// generation.
func (s *leaseSet) put(call string, le Lease) (slot int32, gen uint32) {
	s.del(call)
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
		s.slab[i] = le
	} else {
		i = int32(len(s.slab))
		s.slab = append(s.slab, le)
		s.gen = append(s.gen, 0)
	}
	s.index[call] = i
	return i, s.gen[i]
}

// update replaces call's live lease with le, the same lease changed (its
// expiry renewed): it keeps its slot and generation. It reports whether
// call had a lease.
func (s *leaseSet) update(call string, le Lease) bool {
	i, ok := s.index[call]
	if ok {
		s.slab[i] = le
	}
	return ok
}

// at returns the lease in slot if it is still the one put there as
// generation gen.
func (s *leaseSet) at(slot int32, gen uint32) (Lease, bool) {
	if int(slot) >= len(s.slab) || s.gen[slot] != gen {
		return Lease{}, false
	}
	return s.slab[slot], true
}

// del removes call's lease, if any.
func (s *leaseSet) del(call string) {
	i, ok := s.index[call]
	if !ok {
		return
	}
	delete(s.index, call)
	s.slab[i] = Lease{} // its strings are not kept alive
	s.gen[i]++
	s.free = append(s.free, i)
}

// all yields every live lease by call, in no order.
func (s *leaseSet) all() iter.Seq2[string, Lease] {
	return func(yield func(string, Lease) bool) {
		for call, i := range s.index {
			if !yield(call, s.slab[i]) {
				return
			}
		}
	}
}

// clone returns a copy of s that shares nothing with it, each lease in
// the same slot and generation.
func (s *leaseSet) clone() leaseSet {
	return leaseSet{index: maps.Clone(s.index), slab: slices.Clone(s.slab), gen: slices.Clone(s.gen), free: slices.Clone(s.free)}
}
