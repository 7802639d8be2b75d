package capacity

import (
	"math"
	"time"
)

// CooldownCut and RateRecovery shape how a scope's rate answers a
// provider's 429 (a Cooldown block): the refill rate of every per-minute
// bucket drops to CooldownCut of what it was (multiplicative decrease, to
// MinRateFactor of the limit's rate at the least) and grows back by
// RateRecovery of the limit's rate each second (additive increase). A
// client tollgate does not see, spending on the same key, makes the
// provider refill slower than the limit says: the rate settles just under
// what is left, with a 429 about every (1 − CooldownCut) / RateRecovery
// seconds, 30 s, at the most. While the rate is cut, a provider's report
// raises a level a little short of what it proves (memScope.raiseTo).
const (
	CooldownCut   = 0.7
	RateRecovery  = 0.01
	MinRateFactor = 0.25
)

// rate is bucket d's refill rate now: its budget's, less the cut.
func (m *memScope) rate(d int) float64 { return m.budgets[d].Rate * (1 - m.cut) }

// cooldown applies a provider's 429 that pauses the scope for w. The
// provider admits nothing for w, so each bucket it holds is taken to be w of
// refill short of empty (level + booked at most −rate × w): the calls booked
// behind the pause go at the rate after it, not all at its end (retime).
// And the rate is cut (CooldownCut).
func (m *memScope) cooldown(w time.Duration, now time.Time) {
	if !m.started || w <= 0 {
		return
	}
	m.cut = 1 - math.Max(MinRateFactor, (1-m.cut)*CooldownCut)
	for d := range numBuckets {
		if m.budgets[d].Limited {
			m.level[d] = math.Min(m.level[d], -m.booked[d]-m.rate(d)*w.Seconds())
		}
	}
	m.retime(now)
}
