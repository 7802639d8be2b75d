package capacity

import (
	"maps"
	"time"

	"github.com/google/btree"
)

// ticketBook holds a scope's booked tickets by call and in three orders:
// the order they are due in (higher ranks first, then by virtual finish,
// weighted fair queuing, then by call), their times and their expiries.
// A decision reads the first tickets, the latest, the overdue or the
// lapsed ones in O(log n) each, without reading the others, as the Redis
// store does from its sorted sets. The zero value is not usable: see
// newTicketBook.
type ticketBook struct {
	byCall   map[string]Ticket
	order    *btree.BTreeG[orderKey] // the order they are due in
	times    *btree.BTreeG[timeKey]  // At (µs, the Redis store's resolution), then Call
	expiries *btree.BTreeG[timeKey]  // Expires, then Call
	changed  changedKeys[string]     // calls whose ticket changed (records.go)
}

// orderKey is a ticket's place in the order tickets are due in.
type orderKey struct {
	rank   int
	finish float64
	call   string
}

// timeKey is a ticket's place among the tickets by a time (ns or µs).
type timeKey struct {
	at   int64
	call string
}

// ticketBookDegree is the B-trees' degree: nodes of up to 63 keys.
const ticketBookDegree = 32

func newTicketBook() ticketBook {
	return ticketBook{
		byCall: make(map[string]Ticket),
		order: btree.NewG(ticketBookDegree, func(a, b orderKey) bool {
			switch {
			case a.rank != b.rank:
				return a.rank > b.rank
			case a.finish != b.finish:
				return a.finish < b.finish
			}
			return a.call < b.call
		}),
		times:    btree.NewG(ticketBookDegree, timeKeyLess),
		expiries: btree.NewG(ticketBookDegree, timeKeyLess),
	}
}

func timeKeyLess(a, b timeKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.call < b.call
}

func orderKeyOf(tk Ticket) orderKey { return orderKey{tk.Rank, tk.Finish, tk.Call} }
func timeKeyOf(tk Ticket) timeKey {
	return timeKey{micros(time.Duration(tk.At.UnixNano())), tk.Call}
}
func expiryKeyOf(tk Ticket) timeKey { return timeKey{tk.Expires.UnixNano(), tk.Call} }

// clone returns a copy that shares nothing the original may change.
func (b *ticketBook) clone() ticketBook {
	return ticketBook{byCall: maps.Clone(b.byCall), order: b.order.Clone(), times: b.times.Clone(), expiries: b.expiries.Clone()}
}

// len returns the number of booked tickets.
func (b *ticketBook) len() int { return len(b.byCall) }

// get returns call's ticket.
func (b *ticketBook) get(call string) (Ticket, bool) {
	tk, ok := b.byCall[call]
	return tk, ok
}

// put books tk, or replaces its call's ticket, in every order.
func (b *ticketBook) put(tk Ticket) {
	if old, ok := b.byCall[tk.Call]; ok {
		if k := orderKeyOf(old); k != orderKeyOf(tk) {
			b.order.Delete(k)
			b.order.ReplaceOrInsert(orderKeyOf(tk))
		}
		if k := timeKeyOf(old); k != timeKeyOf(tk) {
			b.times.Delete(k)
			b.times.ReplaceOrInsert(timeKeyOf(tk))
		}
		if k := expiryKeyOf(old); k != expiryKeyOf(tk) {
			b.expiries.Delete(k)
			b.expiries.ReplaceOrInsert(expiryKeyOf(tk))
		}
	} else {
		b.order.ReplaceOrInsert(orderKeyOf(tk))
		b.times.ReplaceOrInsert(timeKeyOf(tk))
		b.expiries.ReplaceOrInsert(expiryKeyOf(tk))
	}
	b.byCall[tk.Call] = tk
	b.changed.note(tk.Call)
}

// remove drops call's ticket and returns it.
func (b *ticketBook) remove(call string) (Ticket, bool) {
	tk, ok := b.byCall[call]
	if !ok {
		return Ticket{}, false
	}
	delete(b.byCall, call)
	b.changed.note(call)
	b.order.Delete(orderKeyOf(tk))
	b.times.Delete(timeKeyOf(tk))
	b.expiries.Delete(expiryKeyOf(tk))
	return tk, true
}

// first returns the first n tickets in the order they are due (fewer if
// fewer are booked).
func (b *ticketBook) first(n int) []Ticket {
	out := make([]Ticket, 0, min(n, b.len()))
	b.order.Ascend(func(k orderKey) bool {
		if len(out) == n {
			return false
		}
		out = append(out, b.byCall[k.call])
		return true
	})
	return out
}

// place is how many tickets are due before call's, counted up to limit: a
// result of limit means limit or more.
func (b *ticketBook) place(call string, limit int) int {
	n := 0
	b.order.Ascend(func(k orderKey) bool {
		if k.call == call || n == limit {
			return false
		}
		n++
		return true
	})
	return n
}

// byTime calls fn with the tickets in the order of their times (then their
// calls), from the earliest, until fn returns false.
func (b *ticketBook) byTime(fn func(Ticket) bool) {
	b.times.Ascend(func(k timeKey) bool { return fn(b.byCall[k.call]) })
}

// latest calls fn with the tickets from the latest time back, until fn
// returns false.
func (b *ticketBook) latest(fn func(Ticket) bool) {
	b.times.Descend(func(k timeKey) bool { return fn(b.byCall[k.call]) })
}

// lapsed returns the tickets whose expiry is at or before now.
func (b *ticketBook) lapsed(now time.Time) []Ticket {
	var out []Ticket
	b.expiries.Ascend(func(k timeKey) bool {
		if k.at > now.UnixNano() {
			return false
		}
		out = append(out, b.byCall[k.call])
		return true
	})
	return out
}

// nextExpiry returns the earliest expiry of a ticket (zero: none booked).
func (b *ticketBook) nextExpiry() time.Time {
	k, ok := b.expiries.Min()
	if !ok {
		return time.Time{}
	}
	return b.byCall[k.call].Expires
}

// all returns every ticket, in no order.
func (b *ticketBook) all() []Ticket {
	out := make([]Ticket, 0, b.len())
	for _, tk := range b.byCall {
		out = append(out, tk)
	}
	return out
}
