package capacity

// changedKeys is a set of the keys of one kind of a scope's records (leases
// by call, tickets by call, flows by id, …) that operations changed since
// the set was last taken. A nil set tracks nothing: noting into it is a
// no-op, so a scope that is not tracked pays one nil check per change.
type changedKeys[K comparable] map[K]struct{}

// note adds k to the set, if the set tracks.
func (c changedKeys[K]) note(k K) {
	if c != nil {
		c[k] = struct{}{}
	}
}

// reset makes *c an empty set that tracks: the set it was, cleared (its
// memory kept for the next changes), or a new one.
func (c *changedKeys[K]) reset() {
	if *c == nil {
		*c = changedKeys[K]{}
		return
	}
	clear(*c)
}
