package redisstore

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Snapshot implements capacity.Store. It reclaims expired leases and lapsed
// tickets on the way, as every script does. It lists every lease and
// ticket: Summary reads the rest without them.
func (s *Store) Snapshot(ctx context.Context, sc capacity.Scope) (capacity.Snapshot, error) {
	sum, err := s.snapshot(ctx, sc, false, "")
	return sum.Snapshot, err
}

// Summary implements capacity.Summarizer: Snapshot without the lists, at a
// cost that does not grow with the leases in flight and the tickets booked
// (BenchmarkSnapshot).
func (s *Store) Summary(ctx context.Context, sc capacity.Scope, call string) (capacity.Summary, error) {
	return s.snapshot(ctx, sc, true, call)
}

// snapshot is Snapshot, or with summary Summary for call.
func (s *Store) snapshot(ctx context.Context, sc capacity.Scope, summary bool, call string) (capacity.Summary, error) {
	if err := ctx.Err(); err != nil {
		return capacity.Summary{}, err
	}
	if err := sc.Validate(); err != nil {
		return capacity.Summary{}, err
	}
	if err := s.down("snapshot"); err != nil {
		return capacity.Summary{}, err
	}
	var sum capacity.Summary
	err := s.route(sc, func() (err error) {
		sum, err = s.rec.summary(ctx, sc, summary, call)
		return err
	}, func() (err error) {
		sum, err = s.snapshotScripts(ctx, sc, summary, call)
		return err
	})
	return sum, err
}

// snapshotScripts is snapshot with the scripts.
func (s *Store) snapshotScripts(ctx context.Context, sc capacity.Scope, summary bool, call string) (capacity.Summary, error) {
	k := s.keysFor(sc)
	b1, b2 := s.knownBounds(k)
	args := s.commonArgs(k, b1, b2, 2)
	if summary {
		args = append(args, "summary", call)
	}
	// Reading a scope never changes it: read-only where the scripts say so.
	r, h, err := s.runWith(ctx, "snapshot", s.scripts.snapshot, s.scripts.readOnlySnapshot, k, args)
	if err != nil {
		return capacity.Summary{}, err
	}
	sum := capacity.Summary{}
	snap := &sum.Snapshot
	snap.Scope, snap.Now = sc, h.now
	if cb := r.sub(); cb.more() {
		snap.Blocks = append(snap.Blocks, cb.block())
		r.check(cb)
	}
	if h.kind == "none" {
		return sum, r.err
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
	snap.Flows, snap.Keys = r.fair()
	if summary {
		counts := r.sub()
		sum.InFlight, sum.Booked, sum.HoldsTicket = int(counts.int()), int(counts.int()), counts.int() == 1
		r.check(counts)
	} else {
		sum.InFlight, sum.Booked = len(snap.Leases), len(snap.Tickets)
	}
	if r.err != nil {
		return capacity.Summary{}, r.err
	}
	limits, err := s.limitsOf(sig)
	if err != nil {
		return capacity.Summary{}, err
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
	return sum, nil
}

// fair reads the flows, the ranks' virtual times and the key caps of a
// snapshot's reply (lua/snapshot.lua).
func (r *reply) fair() ([]capacity.Flow, []capacity.KeyUsage) {
	if !r.more() {
		return nil, nil // scripts before 4.0 knew no fairness
	}
	var flows []capacity.Flow
	fs := r.sub()
	for fs.more() {
		e := fs.sub()
		id, v := e.str(), e.str()
		fs.check(e)
		class, key, _ := strings.Cut(id, "/")
		n := fields(v)
		c, _ := strconv.Atoi(class)
		flows = append(flows, capacity.Flow{Class: capacity.Class(c), Key: key, Rank: int(n[0]), Finish: n[1], Granted: n[2]})
	}
	r.check(fs)
	vs := r.sub()
	var virtual []float64
	for vs.more() {
		virtual = append(virtual, vs.float())
	}
	r.check(vs)
	for i := range flows {
		if rk := flows[i].Rank; rk >= 0 && rk < len(virtual) {
			flows[i].Virtual = virtual[rk]
		}
	}
	sort.Slice(flows, func(i, j int) bool {
		if flows[i].Class != flows[j].Class {
			return flows[i].Class < flows[j].Class
		}
		return flows[i].Key < flows[j].Key
	})
	var keys []capacity.KeyUsage
	ks := r.sub()
	for ks.more() {
		e := ks.sub()
		key, v := e.str(), e.str()
		ks.check(e)
		n := fields(v)
		u := capacity.KeyUsage{Key: key, DayUsed: n[2]}
		if n[3] > 0 {
			u.DayEnd = fromMicros(int64(n[3]))
		}
		for d := range capacity.Tokens + 1 {
			u.ShareLevel[d] = n[4+int(d)]
		}
		keys = append(keys, u)
	}
	r.check(ks)
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	return flows, keys
}

// fields reads a stored list of numbers, at least 8 (missing ones read 0).
func fields(v string) []float64 {
	n := make([]float64, 8)
	for i, f := range strings.Fields(v) {
		x, _ := strconv.ParseFloat(f, 64)
		if i < len(n) {
			n[i] = x
		} else {
			n = append(n, x)
		}
	}
	return n
}
