package capacity

import (
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// lapsedLeases remembers the leases that ended without a settle or release
// (expired, or superseded by a later attempt of their call), by lease id,
// until LapsedLeaseMemory after each lapsed: a late settle of one applies
// its debt, once. Ids are forgotten in the order they lapsed (a queue), so
// remembering and forgetting cost O(1) each, amortized. Leases that end
// normally are not remembered: a settle or release finds them gone from
// the live leases and applies nothing, so a hot scope settling 200 calls a
// second keeps no record of them.
type lapsedLeases struct {
	forget map[string]int64 // when each remembered id is forgotten (unix nanoseconds)
	order  []lapsedLease    // ids in the order they lapsed; order[head:] are live
	head   int
	// changed holds the ids remembered or forgotten (records.go).
	changed changedKeys[string]
}

type lapsedLease struct {
	id     string
	forget int64
}

// take reports whether lease id lapsed within LapsedLeaseMemory before now,
// and forgets it: a second take of the same id returns false.
func (e *lapsedLeases) take(id string, now time.Time) bool {
	if len(e.forget) == 0 {
		return false
	}
	forget, ok := e.forget[id]
	if ok {
		delete(e.forget, id)
		e.changed.note(id)
	}
	return ok && now.UnixNano() < forget
}

// drop forgets id, if remembered: a lease granted again under the same id
// (the same attempt of its call) is live, not lapsed.
func (e *lapsedLeases) drop(id string) {
	if len(e.forget) == 0 {
		return
	}
	if _, ok := e.forget[id]; ok {
		delete(e.forget, id)
		e.changed.note(id)
	}
}

// add remembers id until now + LapsedLeaseMemory and forgets the ids whose
// time has come.
func (e *lapsedLeases) add(id string, now time.Time) {
	e.expire(now)
	forget := now.Add(tuning.LapsedLeaseMemory).UnixNano()
	e.remember(id, forget)
}

// remember remembers id until forget (unix nanoseconds).
func (e *lapsedLeases) remember(id string, forget int64) {
	if e.forget == nil {
		e.forget = make(map[string]int64)
	}
	e.forget[id] = forget
	e.order = append(e.order, lapsedLease{id, forget})
	e.changed.note(id)
}

// expire forgets the ids lapsed LapsedLeaseMemory or more before now, from
// the front of the queue.
func (e *lapsedLeases) expire(now time.Time) {
	t := now.UnixNano()
	for e.head < len(e.order) && t >= e.order[e.head].forget {
		x := e.order[e.head]
		if f, ok := e.forget[x.id]; ok && f == x.forget {
			delete(e.forget, x.id) // not remembered again since
			e.changed.note(x.id)
		}
		e.order[e.head] = lapsedLease{}
		e.head++
	}
	if e.head > 64 && e.head*2 >= len(e.order) {
		// Reuse the queue's space once most of it is forgotten.
		n := copy(e.order, e.order[e.head:])
		clear(e.order[n:])
		e.order, e.head = e.order[:n], 0
	}
}
