package capacity

import "time"

// recentGrants holds the leases granted within ReorderWindow, oldest first,
// and what the live ones among them hold per dimension: Mark.InFlight. A
// grant adds one entry and drops those that left the window, so its cost
// does not grow with the leases in flight (the Redis store keeps the same
// queue in a list: lua/state.lua, recentHeld).
type recentGrants struct {
	queue []recentGrant // queue[head:] are in the window, oldest first
	head  int
	// held is what the live leases of the queue hold.
	held [NumDimensions]float64
	// cutoff is the grant time (unix nanoseconds) before which entries
	// have left the queue: a lease granted at or after it that ends takes
	// its charges out of held itself.
	cutoff int64
	// changed holds the grant numbers (Mark.Seq) of the entries added or
	// dropped (records.go).
	changed changedKeys[int64]
}

// recentGrant names a granted lease by its slot and generation in the
// scope's leaseSet: no pointer, so a hot scope's queue costs the garbage
// collector nothing to scan.
type recentGrant struct {
	slot      int32 // -1: a lease known to have ended (applied from records)
	gen       uint32
	seq       int64 // Mark.Seq
	grantedAt int64 // unix nanoseconds
}

// inWindow reports whether a lease granted at grantedAt is still counted
// in held (while it lives).
func (r *recentGrants) inWindow(grantedAt time.Time) bool {
	return grantedAt.UnixNano() >= r.cutoff
}

// add counts le, granted now in slot and generation gen of the scope's
// leases.
func (r *recentGrants) add(le Lease, slot int32, gen uint32) {
	if len(r.queue) == cap(r.queue) {
		r.grow()
	}
	r.queue = append(r.queue, recentGrant{slot, gen, le.Mark.Seq, le.GrantedAt.UnixNano()})
	r.changed.note(le.Mark.Seq)
	for d := range r.held {
		r.held[d] += float64(le.Charges[d])
	}
}

// grow makes room for more entries: it drops those before head, which
// left the window, and gives those in it twice their room. A window that
// fills so copies each entry about once, where append, which grows a large
// slice by a quarter, copied each several times, the left ones with them
// (BenchmarkReserveSettle at 200,000 grants: 14 % of its time).
func (r *recentGrants) grow() {
	live := r.queue[r.head:]
	q := make([]recentGrant, len(live), max(2*len(live), 64))
	copy(q, live)
	r.queue, r.head = q, 0
}

// ended takes lease le, which ended, out of held if it is counted there.
func (r *recentGrants) ended(le Lease) {
	if !r.inWindow(le.GrantedAt) {
		return
	}
	for d := range r.held {
		r.held[d] -= float64(le.Charges[d])
	}
}

// expire drops the entries granted before cutoff, taking the charges of
// the leases still live out of held. A cutoff earlier than the last one
// (a clock that went back) drops nothing more.
func (r *recentGrants) expire(cutoff time.Time, leases *leaseSet) {
	if c := cutoff.UnixNano(); c > r.cutoff {
		r.cutoff = c
	}
	for r.head < len(r.queue) && r.queue[r.head].grantedAt < r.cutoff {
		g := r.queue[r.head]
		r.changed.note(g.seq)
		if le, ok := leases.at(g.slot, g.gen); ok {
			for d := range r.held {
				r.held[d] -= float64(le.Charges[d])
			}
		}
		r.head++
	}
	if r.head == len(r.queue) {
		r.queue, r.head, r.held = r.queue[:0], 0, [NumDimensions]float64{}
	} else if r.head > 64 && r.head*2 >= len(r.queue) {
		n := copy(r.queue, r.queue[r.head:])
		r.queue, r.head = r.queue[:n], 0
	}
}

// clone returns a copy of r that shares nothing with it.
func (r recentGrants) clone() recentGrants {
	r.queue = append([]recentGrant(nil), r.queue[r.head:]...)
	r.head, r.changed = 0, nil
	return r
}
