package capacity

import (
	"iter"
	"maps"
	"slices"
	"time"
)

// leaseSet holds a scope's live leases by call. A Lease is too large for a
// map to hold in place (Go stores map values over 128 bytes behind a
// pointer, one allocation per insert), so the leases live in a slab whose
// freed slots are reused, and the map holds their indexes: granting and
// ending a lease allocate nothing once the slab has grown to the most
// leases the scope has held at once.
//
// The leases are also kept by expiry (byExpiry), so that the ones expired
// and the earliest expiry are found without reading every lease.
type leaseSet struct {
	index map[string]int32 // call -> slot in slab
	slab  []Lease
	// gen counts each slot's occupants: a slot and its generation name one
	// lease for as long as it lives (recentGrants holds them).
	gen      []uint32
	free     []int32 // slots of slab not in use
	byExpiry expiryHeap
	changed  changedKeys[string] // calls whose lease changed (records.go)
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
	s.noteExpiry(i)
	s.changed.note(call)
	return i, s.gen[i]
}

// update replaces call's live lease with le, the same lease changed (its
// expiry renewed): it keeps its slot and generation. It reports whether
// call had a lease.
func (s *leaseSet) update(call string, le Lease) bool {
	i, ok := s.index[call]
	if ok {
		s.slab[i] = le
		s.noteExpiry(i)
		s.changed.note(call)
	}
	return ok
}

// at returns the lease in slot if it is still the one put there as
// generation gen.
func (s *leaseSet) at(slot int32, gen uint32) (Lease, bool) {
	if slot < 0 || int(slot) >= len(s.slab) || s.gen[slot] != gen {
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
	s.changed.note(call)
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
	return leaseSet{index: maps.Clone(s.index), slab: slices.Clone(s.slab), gen: slices.Clone(s.gen), free: slices.Clone(s.free),
		byExpiry: slices.Clone(s.byExpiry)}
}

// noteExpiry files the lease in slot by its expiry. An entry whose lease
// ended, or was renewed, stays until it reaches the top (nextExpiry drops
// it). Once the entries number more than twice the live leases and 64, the
// lease is filed by filing every live lease again, so that after a grant
// they number at most twice the live leases and 65 (a hot scope's ended
// leases, each filed a minute ahead, do not pile up), at a cost of one
// entry per lease filed, spread over the grants.
func (s *leaseSet) noteExpiry(slot int32) {
	if len(s.byExpiry) > 2*len(s.index)+64 {
		s.byExpiry = s.byExpiry[:0]
		for _, i := range s.index {
			s.byExpiry = append(s.byExpiry, s.entry(i))
		}
		s.byExpiry.init()
		return // slot is live, so it was filed with the others
	}
	s.byExpiry.push(s.entry(slot))
}

func (s *leaseSet) entry(slot int32) expiryEntry {
	return expiryEntry{at: s.slab[slot].Expires.UnixNano(), slot: slot, gen: s.gen[slot]}
}

// live reports whether e still names a live lease at its expiry.
func (s *leaseSet) live(e expiryEntry) bool {
	return s.gen[e.slot] == e.gen && s.slab[e.slot].Expires.UnixNano() == e.at
}

// nextExpiry returns the earliest expiry of a live lease (zero: none).
func (s *leaseSet) nextExpiry() time.Time {
	for len(s.byExpiry) > 0 {
		e := s.byExpiry[0]
		if s.live(e) {
			return s.slab[e.slot].Expires
		}
		s.byExpiry.pop()
	}
	return time.Time{}
}

// popExpired returns a lease that expired at or before now, and files it
// no more; the caller ends it (del). It returns false when none is left.
func (s *leaseSet) popExpired(now time.Time) (Lease, bool) {
	next := s.nextExpiry() // the top entry is live, if any
	if next.IsZero() || now.Before(next) {
		return Lease{}, false
	}
	le := s.slab[s.byExpiry[0].slot]
	s.byExpiry.pop()
	return le, true
}

// expiryEntry is a lease filed by its expiry (unix nanoseconds): the
// lease in slot as generation gen.
type expiryEntry struct {
	at   int64
	slot int32
	gen  uint32
}

// expiryHeap is a min-heap of expiryEntry by expiry. Its own push and pop,
// not container/heap's: an entry passed as an interface would be
// allocated, once per lease granted.
type expiryHeap []expiryEntry

// init orders h as a heap.
func (h expiryHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *expiryHeap) push(e expiryEntry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// pop removes the earliest entry.
func (h *expiryHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].at <= h[i].at {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (h expiryHeap) down(i int) {
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].at < h[least].at {
			least = l
		}
		if r < len(h) && h[r].at < h[least].at {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
