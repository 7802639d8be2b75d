package capacity

import (
	"sort"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// retime moves the first tuning.RetimeWindow booked tickets, in their fair
// order, to the time the provider's bucket (level + booked) holds its
// charges and those of every ticket due before it, above its class's floor:
// tickets follow the budget. A refund, a release, a higher reported level
// or a raised limit brings them forward; debt, a borrow, a lower reported
// level or limit, a 429's pause or a booking placed ahead pushes them back.
// A ticket lapses grace after its time or, if later, the time its call was
// last told (ticketExpiry).
//
// The tickets further back keep their times, which may be late or early,
// and the scope is left retime-pending: a ticket further back is not
// claimed (beyondFirst), and a Reserve retimes the first again once a
// ticket left them (windowCurrent). A ticket is thus retimed, and its call
// told if it moved well forward (broughtForward), as it comes within the
// window of the head, and no move walks the whole queue: a move that
// brings tickets far back well forward (a higher report, a raised limit)
// reaches each as it nears the head, and its call, which sleeps until the
// time it was told, is told then (TicketDue). It requires the scope's lock.
func (m *memScope) retime(now time.Time) {
	n := tuning.RetimeWindow
	m.retimePending, m.windowCurrent = m.tickets.len() > n, true
	if m.tickets.len() == 0 {
		return
	}
	var ahead [numBuckets]float64 // the charges of the tickets due so far
	var gathered int64            // the tickets due at the gathering's end so far
	for _, tk := range m.tickets.first(n) {
		fl := tk.Floor
		var w time.Duration
		for d := range numBuckets {
			b := m.budgets[d]
			c := float64(tk.Charges[d])
			if !b.Limited || c == 0 {
				continue
			}
			ahead[d] += c
			if need := ahead[d] + fl*b.Capacity - (m.level[d] + m.booked[d]); need > epsilon {
				w = max(w, waitFor(need, m.rate(d)))
			}
		}
		if w > 0 || tk.At.After(now) {
			tk.At = now.Add(w)
		} // else it is due, and keeps the time it came due at
		if g := m.gatherFloor(tk); !g.IsZero() && !tk.At.After(g) {
			// Released together, the gathered calls are due in their fair
			// order, GatherSpacing apart.
			tk.At = g.Add(time.Duration(gathered) * tuning.GatherSpacing)
			gathered++
		}
		tk.Expires = m.ticketExpiry(tk)
		m.noteExpiry(tk.Expires) // it may come earlier than it was
		m.tickets.put(tk)
		if broughtForward(tk.told, tk.At, now) {
			m.announceDue(tk.Call)
		}
	}
}

// beyondFirst reports whether call's ticket is further back in the order
// than the first tuning.RetimeWindow tickets of a retime-pending scope,
// whose times are kept as retime gives them: further back, a time may be
// late (a refund, a release) or early (a booking placed ahead of it). If
// so, it returns the time of the last of the first, before which the
// ticket is not due. It requires the scope's lock.
func (m *memScope) beyondFirst(call string) (time.Time, bool) {
	if !m.retimePending {
		return time.Time{}, false
	}
	first := m.tickets.first(tuning.RetimeWindow)
	for _, tk := range first {
		if tk.Call == call {
			return time.Time{}, false
		}
	}
	return first[len(first)-1].At, true
}

// ticketExpiry is when ticket tk lapses unclaimed: grace after its time
// or, if later, the time its call was last told, so that a call that is
// away until then still finds it. It depends on the ticket as it is, not
// on the times a retime gave it before: a store that retimes once after
// several moves (the Redis store's batches) lapses it when one that
// retimed after each would.
func (m *memScope) ticketExpiry(tk Ticket) time.Time {
	at := tk.At
	if tk.told.After(at) {
		at = tk.told
	}
	return at.Add(m.grace)
}

// broughtForward reports whether a ticket whose call was told it is due at
// told, now due at at, is announced: its call sleeps until told
// (capacity.Wait), so it would come that late. A move of more than
// AnnounceMove and of more than a quarter of the wait left is announced:
// each announcement cuts the wait left by a quarter, so a call is told
// again of its ticket at most about log4/3(wait / AnnounceMove) times
// (17 for a second's wait, 31 for a minute's), however often refunds
// move it.
func broughtForward(told, at, now time.Time) bool {
	early := told.Sub(at)
	return told.After(now) && early > tuning.AnnounceMove && early > told.Sub(now)/4
}

// announceDue tells call, if it waits for its ticket (TicketDue), that
// the ticket moved forward; a scope that tracks its records also notes the
// call, for the processes where it may wait (Records.Announced).
func (m *memScope) announceDue(call string) {
	if m.tracking() {
		m.announced = append(m.announced, call)
	}
	m.wakeDue(call)
}

// wakeDue wakes call if it waits here for its ticket.
func (m *memScope) wakeDue(call string) {
	if ch, ok := m.due[call]; ok {
		close(ch)
		delete(m.due, call)
	}
}

// takeOverdue gives call's ticket the place of the earliest ticket of its
// rank that is OverdueTicket past its time, and moves that one to call's
// old time (their places in the fair order too); then the tickets are
// retimed. On a retime-pending scope only the first tickets may be
// overdue: further back a time is kept, not current, and may be early
// (eachOverdue). It reports whether it found one. It requires the
// scope's lock.
func (m *memScope) takeOverdue(call string, now time.Time) bool {
	mine, _ := m.tickets.get(call)
	var tk Ticket
	found := false
	m.eachOverdue(now, func(o Ticket) bool {
		found = o.Call != call && o.Rank == mine.Rank // only a ticket of its rank has a place in its order
		tk = o
		return !found
	})
	if !found {
		return false
	}
	mine.At, tk.At = tk.At, mine.At
	mine.Start, tk.Start = tk.Start, mine.Start
	mine.Finish, tk.Finish = tk.Finish, mine.Finish
	tk.Expires = m.ticketExpiry(tk)
	m.noteExpiry(tk.Expires)
	m.tickets.put(mine)
	m.tickets.put(tk)
	m.retime(now)
	return true
}

// eachOverdue calls fn with the tickets OverdueTicket or more past their
// times, the earliest first (then by call), until fn returns false: among
// every ticket, or only among the first tuning.RetimeWindow of a
// retime-pending scope.
func (m *memScope) eachOverdue(now time.Time, fn func(Ticket) bool) {
	overdue := func(tk Ticket) bool { return !tk.At.Add(tuning.OverdueTicket).After(now) }
	earliest := false
	m.tickets.byTime(func(tk Ticket) bool { earliest = overdue(tk); return false })
	if !earliest {
		return // no ticket is overdue
	}
	if !m.retimePending {
		m.tickets.byTime(func(tk Ticket) bool { return overdue(tk) && fn(tk) })
		return
	}
	first := m.tickets.first(tuning.RetimeWindow)
	sort.Slice(first, func(i, j int) bool { return timeKeyLess(timeKeyOf(first[i]), timeKeyOf(first[j])) })
	for _, tk := range first {
		if !overdue(tk) || !fn(tk) {
			return
		}
	}
}

// micros is d in microseconds, rounded up: the Redis store's resolution.
func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }
