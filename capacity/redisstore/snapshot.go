package redisstore

import (
	"context"
	"sort"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Snapshot implements capacity.Store. It reclaims expired leases and lapsed
// tickets on the way, as every script does.
func (s *Store) Snapshot(ctx context.Context, sc capacity.Scope) (capacity.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return capacity.Snapshot{}, err
	}
	if err := sc.Validate(); err != nil {
		return capacity.Snapshot{}, err
	}
	if err := s.down("snapshot"); err != nil {
		return capacity.Snapshot{}, err
	}
	k := s.keysFor(sc)
	b1, b2 := s.knownBounds(k)
	exec := s.scripts.snapshot.Run
	if s.scripts.readOnlySnapshot {
		exec = s.scripts.snapshot.RunRO // reading a scope never changes it
	}
	r, h, err := s.runWith(ctx, "snapshot", exec, k, s.commonArgs(k, b1, b2, 0))
	if err != nil {
		return capacity.Snapshot{}, err
	}
	snap := capacity.Snapshot{Scope: sc, Now: h.now}
	if cb := r.sub(); cb.more() {
		snap.Blocks = append(snap.Blocks, cb.block())
		r.check(cb)
	}
	if h.kind == "none" {
		return snap, r.err
	}
	sig := r.str()
	snap.DayResetAt = r.time()
	bud := r.sub()
	for d := range snap.Budget {
		b := bud.sub()
		snap.Budget[d] = capacity.Budget{Limited: b.int() == 1, Rate: b.float(), Capacity: b.float()}
		bud.check(b)
	}
	r.check(bud)
	lv := r.sub()
	for d := range snap.Level {
		snap.Level[d] = lv.float()
		if capacity.Dimension(d).PerDay() && !snap.Budget[d].Limited {
			snap.Level[d] = 0 // an unlimited daily budget has no level
		}
	}
	r.check(lv)
	leases := r.sub()
	for leases.more() {
		e := leases.sub()
		snap.Leases = append(snap.Leases, e.lease(sc, e.str()))
		leases.check(e)
	}
	r.check(leases)
	tickets := r.sub()
	for tickets.more() {
		e := tickets.sub()
		tk := e.ticket(e.str())
		tickets.check(e)
		snap.Tickets = append(snap.Tickets, tk)
	}
	r.check(tickets)
	if sb := r.sub(); sb.more() {
		snap.Blocks = append(snap.Blocks, sb.block())
		r.check(sb)
	}
	if r.err != nil {
		return capacity.Snapshot{}, r.err
	}
	limits, err := s.limitsOf(sig)
	if err != nil {
		return capacity.Snapshot{}, err
	}
	snap.Limits = limits
	if snap.DayResetAt.IsZero() && sig != "" {
		snap.DayResetAt = limits.DayReset.Next(h.now)
	}
	sort.Slice(snap.Leases, func(i, j int) bool { return snap.Leases[i].ID < snap.Leases[j].ID })
	sort.SliceStable(snap.Tickets, func(i, j int) bool {
		if !snap.Tickets[i].At.Equal(snap.Tickets[j].At) {
			return snap.Tickets[i].At.Before(snap.Tickets[j].At)
		}
		return snap.Tickets[i].Call < snap.Tickets[j].Call
	})
	return snap, nil
}
