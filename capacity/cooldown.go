package capacity

import (
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
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
	m.cut = 1 - math.Max(tuning.MinRateFactor, (1-m.cut)*tuning.CooldownCut)
	for d := range numBuckets {
		if m.budgets[d].Limited {
			m.level[d] = math.Min(m.level[d], -m.booked[d]-m.rate(d)*w.Seconds())
		}
	}
	m.retime(now)
}
