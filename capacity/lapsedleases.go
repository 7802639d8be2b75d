package capacity

import "time"

// endedLeases remembers the leases settled or released lately, by lease id,
// until EndedLeaseMemory after each ended: a second settle or release of
// one applies nothing. Ids are forgotten in the order they ended (a queue),
// so remembering and forgetting cost O(1) each, amortized, however many ids
// a hot scope holds (12,000 a minute at 200 settles a second).
type endedLeases struct {
	forget map[string]int64 // when each remembered id is forgotten (unix nanoseconds)
	order  []endedLease     // ids in the order they ended; order[head:] are live
	head   int
}

type endedLease struct {
	id     string
	forget int64
}

// has reports whether id ended and is not yet forgotten at now.
func (e *endedLeases) has(id string, now time.Time) bool {
	forget, ok := e.forget[id]
	return ok && now.UnixNano() < forget
}

// add remembers id until now + EndedLeaseMemory and forgets the ids whose
// time has come.
func (e *endedLeases) add(id string, now time.Time) {
	if e.forget == nil {
		e.forget = make(map[string]int64)
	}
	e.expire(now)
	forget := now.Add(EndedLeaseMemory).UnixNano()
	e.forget[id] = forget
	e.order = append(e.order, endedLease{id, forget})
}

// expire forgets the ids ended EndedLeaseMemory or more before now, from the
// oldest, stopping at the first that is still remembered. A clock that went
// back leaves later ids in place until their turn.
func (e *endedLeases) expire(now time.Time) {
	t := now.UnixNano()
	for e.head < len(e.order) && t >= e.order[e.head].forget {
		x := e.order[e.head]
		if f, ok := e.forget[x.id]; ok && f == x.forget {
			delete(e.forget, x.id) // not remembered again since
		}
		e.order[e.head] = endedLease{}
		e.head++
	}
	if e.head > 64 && e.head*2 >= len(e.order) {
		// Reuse the queue's space once most of it is forgotten.
		n := copy(e.order, e.order[e.head:])
		clear(e.order[n:])
		e.order, e.head = e.order[:n], 0
	}
}
