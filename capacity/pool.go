package capacity

import "time"

// What a key pool reads of a member scope: several credentials of one
// provider and model, each its own scope, that calls share (the
// interceptor's Options.Pools). A member is out of its pool while a block
// that no wait can end is in force, paused while a block that only delays it
// is, and otherwise ranked by how much of its budget is in use.

// OutBlock returns the block in force at the snapshot that takes the scope
// out of a key pool until it ends: a refused credential (CredentialDisabled,
// of the scope or of its whole credential) or an exhausted quota
// (QuotaExhausted). A refused credential whose half-open probe is in flight
// (Probing) is not out: the probe decides. Of several, the one that ends
// last.
func (s Snapshot) OutBlock() (Block, bool) {
	var out Block
	found := false
	for _, b := range s.Blocks {
		if !b.Until.After(s.Now) {
			continue
		}
		switch {
		case b.Reason == QuotaExhausted, b.Reason == CredentialDisabled && !b.Probing:
			if !found || b.Until.After(out.Until) {
				out, found = b, true
			}
		}
	}
	return out, found
}

// Paused returns how long, from the snapshot, the scope is held by blocks
// that only delay it: a cooldown after a 429, an open breaker, a refused
// credential's probe in flight. Zero if none is in force.
func (s Snapshot) Paused() time.Duration {
	var d time.Duration
	for _, b := range s.Blocks {
		if !b.Until.After(s.Now) {
			continue
		}
		switch {
		case b.Reason == Cooldown, b.Reason == Overloaded, b.Reason == CredentialDisabled && b.Probing:
			d = max(d, b.Until.Sub(s.Now))
		}
	}
	return d
}

// Used returns the largest fraction, over the scope's limited dimensions, of
// its budget in use at the snapshot: of a per-minute bucket, what it lacks
// to be full (debt and booked tickets count, so it may exceed 1); of a
// per-day allowance, what was spent; of the in-flight slots, those held. A
// scope with no state (never used, or expired) uses 0.
func (s Snapshot) Used() float64 {
	u := 0.0
	for d := range Dimension(NumDimensions) {
		b := s.Budget[d]
		if !b.Limited || b.Capacity <= 0 {
			continue
		}
		u = max(u, 1-s.Level[d]/b.Capacity)
	}
	return u
}
