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
	// cutoff is the grant time before which entries have left the queue:
	// a lease granted at or after it that ends takes its charges out of
	// held itself.
	cutoff time.Time
}

type recentGrant struct {
	call      string
	attempt   int
	grantedAt time.Time
}

// inWindow reports whether a lease granted at grantedAt is still counted
// in held (while it lives).
func (r *recentGrants) inWindow(grantedAt time.Time) bool {
	return !grantedAt.Before(r.cutoff)
}

// add counts lease le, granted now.
func (r *recentGrants) add(le Lease) {
	r.queue = append(r.queue, recentGrant{le.Call, le.Attempt, le.GrantedAt})
	for d := range r.held {
		r.held[d] += float64(le.Charges[d])
	}
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

// expire drops the entries granted before cutoff, taking the leases of
// them that still live (leases, by call) out of held. With no entry left,
// held is exactly zero. The cutoff never moves back (a clock that did
// would count a lease twice).
func (r *recentGrants) expire(cutoff time.Time, leases map[string]Lease) {
	if cutoff.After(r.cutoff) {
		r.cutoff = cutoff
	}
	for r.head < len(r.queue) && r.queue[r.head].grantedAt.Before(r.cutoff) {
		g := r.queue[r.head]
		if le, ok := leases[g.call]; ok && le.Attempt == g.attempt && le.GrantedAt.Equal(g.grantedAt) {
			for d := range r.held {
				r.held[d] -= float64(le.Charges[d])
			}
		}
		r.queue[r.head] = recentGrant{}
		r.head++
	}
	if r.head == len(r.queue) {
		r.queue, r.head, r.held = r.queue[:0], 0, [NumDimensions]float64{}
	} else if r.head > 64 && r.head*2 >= len(r.queue) {
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
}

// clone returns a copy of r that shares nothing with it.
func (r recentGrants) clone() recentGrants {
	r.queue = append([]recentGrant(nil), r.queue[r.head:]...)
	r.head = 0
	return r
}
