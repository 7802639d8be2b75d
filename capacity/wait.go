package capacity

import (
	"context"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// minSleep bounds how often Wait re-asks a store whose answer says "now".
const minSleep = time.Millisecond

// WaitOptions configures Wait.
type WaitOptions struct {
	// MaxWait bounds the total time Wait may wait. If the next chance lies
	// beyond it, Wait returns the denial instead of waiting. Zero means no
	// bound but the context.
	MaxWait time.Duration
	// Clock measures elapsed time and makes timers. If nil, SystemClock.
	Clock Clock
	// OnDenied, if set, is called with each denial before Wait sleeps (for
	// example to heartbeat an activity).
	OnDenied func(Reservation)
}

// Wait reserves req on s, waiting while it is denied, until it is granted,
// the context ends, or the next chance lies beyond opts.MaxWait.
//
// It sleeps until the store's computed RetryAt, or until the store (if it is a
// Notifier) announces released capacity, whichever is first; it never polls.
// With req.Book, the first denial books a ticket and the wait ends at the
// ticket's time. While it holds a ticket for a known time (booked now, or
// come early: DenyTicket) it does not listen for releases; since the store
// moves tickets with the budget (earlier on a refund, later when a limit
// falls), it asks again when the store (a TicketNotifier) announces that
// its ticket moved forward, or, with another store, halfway through each
// wait longer than 2 × TicketRecheck. A due
// ticket waiting for an in-flight slot listens. A deadline refusal
// (DenyDeadline) and a fairness key's spent day (DenyKeyQuota, which no
// release can end before its window does) return at once.
//
// It returns the granted Reservation; or the last denial, with a nil error,
// when waiting would exceed MaxWait (a booked ticket is kept for the
// caller's retry; the holder of a ticket a TicketNotifier announces first
// waits out MaxWait, listening, and asks once more); or ctx.Err() when the
// context ends first, after releasing any ticket it booked.
func Wait(ctx context.Context, s Store, req Request, opts WaitOptions) (Reservation, error) {
	clk := opts.Clock
	if clk == nil {
		clk = SystemClock{}
	}
	start := clk.Now()
	notifier, _ := s.(Notifier)
	tickets, _ := s.(TicketNotifier)
	booked := false
	for {
		var released, due <-chan struct{}
		stop, stopDue := func() {}, func() {}
		if notifier != nil {
			released, stop = notifier.Released(req.Scope)
		}
		if tickets != nil && req.Book {
			due, stopDue = tickets.TicketDue(req.Scope, req.Call)
		}
		sent := clk.Now()
		r, err := s.Reserve(ctx, req)
		if err != nil || r.Granted {
			stop()
			stopDue()
			return r, err
		}
		booked = booked || r.Booked
		if r.Reason == DenyDeadline || r.Reason == DenyKeyQuota {
			stop()
			stopDue()
			return r, nil
		}
		if r.HoldsTicket() {
			// Its time is known: a release would only wake it to be told
			// "not yet" (and take the wake-up from a caller it could help);
			// the store says when the ticket comes due early.
			stop()
			released, stop = nil, func() {}
		} else {
			stopDue()
			due, stopDue = nil, func() {}
		}
		// The store's wait (in its own clock), less the local time that
		// passed since the request was sent: a wake-up that raced the
		// answer never sleeps past RetryAt. A ticket holder sleeps the whole
		// wait from the answer: the time before the store decided (a queued
		// batch) would wake it early, to be told "not yet"; a store that
		// answers a while after it decided moves Now on by that (its doc),
		// and a claim late by the rest loses nothing but the time (the
		// ticket is held for its grace).
		d := minSleep
		if !r.RetryAt.IsZero() {
			if wait := r.RetryAt.Sub(r.Now); wait > minSleep {
				d = max(wait-clk.Now().Sub(sent), 0)
				if r.HoldsTicket() {
					d = ticketSleep(wait, tickets != nil)
				}
			}
		}
		if opts.MaxWait > 0 {
			left := opts.MaxWait - clk.Now().Sub(start)
			if due != nil && d > left && left > tuning.TicketRecheck {
				// A ticket holder whose time lies beyond the budget still
				// waits out the budget, listening: its ticket may be
				// brought within it.
				d = left
			}
			if d > left {
				stop()
				stopDue()
				return r, nil
			}
		}
		if opts.OnDenied != nil {
			opts.OnDenied(r)
		}
		t := clk.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			stop()
			stopDue()
			if booked {
				// Give the booked capacity back; ignore errors: the ticket
				// lapses by itself.
				_ = s.Release(context.WithoutCancel(ctx), Lease{Scope: req.Scope, Call: req.Call})
			}
			return Reservation{}, ctx.Err()
		case <-t.C():
		case <-released:
			t.Stop()
		case <-due:
			t.Stop()
		}
		stop()
		stopDue()
	}
}

// ticketSleep is how long a ticket holder with wait left sleeps before it
// asks again; announced says the store announces moved tickets.
func ticketSleep(wait time.Duration, announced bool) time.Duration {
	if announced || wait <= 2*tuning.TicketRecheck {
		return wait
	}
	return max(wait/2, tuning.TicketRecheck)
}

// HoldsTicket reports whether r tells a call that it holds a ticket granted
// at r.RetryAt whatever is released before: a ticket booked now or not yet
// due. A due ticket waiting for an in-flight slot (DenyCapacity on InFlight)
// does not: a settle frees the slot. Wait sleeps such a call's whole wait,
// RetryAt.Sub(Now), from the answer.
func (r Reservation) HoldsTicket() bool {
	return r.Booked && (r.Reason == DenyTicket || r.Reason == DenyCapacity && r.Binding != InFlight)
}
