package capacity

import (
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// restsAt is when the scope's state stops mattering, as of now: every
// bucket full again, the day window over if a daily budget counted, every
// lease expired and ticket lapsed, a lowered limit forgotten, every key's
// caps at rest, the block over (a half-open one HalfOpenMemory after its
// half-open time, if its probe is never claimed). A scope that starts
// afresh then behaves as this one would, so a shared store may let its
// state expire (Records.RestsAt).
func (m *memScope) restsAt(now time.Time) time.Time {
	t := now
	for d := range numBuckets {
		b := m.budgets[d]
		if r := m.rate(d); b.Limited && m.level[d] < b.Capacity && r > 0 {
			t = later(t, now.Add(waitFor(b.Capacity-m.level[d], r)))
		}
	}
	for i, d := range [...]Dimension{RequestsPerDay, TokensPerDay} {
		if m.dayUsed[i] > 0 && m.budgets[d].Capacity > 0 {
			end := m.dayEnd
			if end.IsZero() {
				end = now.Add(24 * time.Hour)
			}
			t = later(t, end)
		}
	}
	t = later(t, later(m.lastExp, later(m.loweredUntil, m.keysUntil)))
	return later(t, m.block.restsAt())
}

// restsAt is when block b stops mattering: its end, or for a half-open
// block HalfOpenMemory after its half-open time (if its probe is never
// claimed); zero for no block.
func (b Block) restsAt() time.Time {
	if b.Until.IsZero() || b.HalfOpen <= 0 {
		return b.Until
	}
	return b.Until.Add(b.HalfOpen + tuning.HalfOpenMemory)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
