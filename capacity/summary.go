package capacity

import (
	"context"
	"time"
)

// Summary is what a Summarizer reads of a scope: the budgets, levels and
// blocks of its Snapshot, how many leases are in flight and tickets
// booked, and whether one call holds a ticket.
type Summary struct {
	// Snapshot holds the scope, the time, the limits, the budgets, the
	// levels and the blocks; its Leases, Tickets, Flows and Keys are empty.
	Snapshot
	// InFlight is the number of live leases, Booked the number of tickets.
	InFlight, Booked int
	// HoldsTicket says the call the Summary was asked for holds a ticket
	// on the scope.
	HoldsTicket bool
}

// Summarizer is a Store that reads a scope's Summary without listing its
// leases, tickets, flows and keys, as Snapshot does: in Redis at a cost
// that does not grow with the calls in flight or waiting. The interceptor
// reads it, where the store has it, for each member of a pool on every
// pooled call and for the budget gauges.
type Summarizer interface {
	// Summary reads sc as Snapshot does, read-only, and says whether call
	// holds a ticket on it ("" for none).
	Summary(ctx context.Context, sc Scope, call string) (Summary, error)
}

// Summary implements Summarizer. While no lease or ticket of the scope has
// expired unreclaimed, it advances a copy of the scope's budgets alone to
// now, in time that does not grow with its leases and tickets (a Snapshot
// copies them all: 0.75 ms with 1,000 leases in flight and 13 ms with
// 10,000, under the scope's lock; BenchmarkSummary). Otherwise it is its
// Snapshot's.
func (s *MemoryStore) Summary(ctx context.Context, sc Scope, call string) (Summary, error) {
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	now := s.clock.Now()
	snap := s.snapshotOf(sc, now)
	st := s.scope(sc, false)
	if st == nil {
		return snap.Summary(call), nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.expiredBy(now) {
		return st.view(now).snapshot(snap, now).Summary(call), nil // reclaims
	}
	// Nothing to reclaim, so advancing moves only the budgets' state
	// (scopeState): the view holds that alone.
	view := &memScope{scope: st.scope, scopeState: st.scopeState}
	view.nextExp = time.Time{}
	view.advance(now)
	sum := view.snapshot(snap, now).Summary(call)
	sum.InFlight, sum.Booked = st.leases.len(), st.tickets.len()
	if call != "" {
		_, sum.HoldsTicket = st.tickets.get(call)
	}
	return sum, nil
}

// Summary returns what a Summarizer would read of the snapshot's scope for
// call: for a store that is not one.
func (snap Snapshot) Summary(call string) Summary {
	sum := Summary{InFlight: len(snap.Leases), Booked: len(snap.Tickets)}
	for _, tk := range snap.Tickets {
		if call != "" && tk.Call == call {
			sum.HoldsTicket = true
		}
	}
	snap.Leases, snap.Tickets, snap.Flows, snap.Keys = nil, nil, nil, nil
	sum.Snapshot = snap
	return sum
}
