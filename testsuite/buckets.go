package testsuite

import (
	"math"
	"time"
)

// epsilon absorbs float rounding so that a bucket refilled to exactly n
// tokens is seen as holding n.
const epsilon = 1e-9

// bucketCapacity returns limit × window / minute, at least 1.
func bucketCapacity(limit int64, window time.Duration) float64 {
	return math.Max(1, float64(limit)*float64(window)/float64(time.Minute))
}

// bucket is a continuously refilling token bucket for one per-minute limit,
// written from the providers' documentation: it refills at limit per minute up
// to its capacity, and its level may go below zero (debt) when a charge is
// forced through. The zero bucket is unlimited. It is not safe for concurrent
// use; its scope's mutex guards it.
type bucket struct {
	limit    int64   // per minute; 0 = unlimited
	capacity float64 // most tokens held
	level    float64 // tokens held now; negative is debt
	last     time.Time
}

// configure sets the limit and burst window at now, keeping the amount used
// (capacity − level) so that a lowered limit shows at once in remaining.
func (b *bucket) configure(limit int64, window time.Duration, now time.Time) {
	if limit <= 0 {
		*b = bucket{}
		return
	}
	capacity := bucketCapacity(limit, window)
	if b.limit <= 0 {
		*b = bucket{limit: limit, capacity: capacity, level: capacity, last: now}
		return
	}
	b.refill(now)
	used := b.capacity - b.level
	b.limit, b.capacity = limit, capacity
	b.level = math.Min(capacity, capacity-used)
}

func (b *bucket) enabled() bool { return b.limit > 0 }

// refill adds what the elapsed time since the last refill earned.
// A clock that goes backwards earns nothing.
func (b *bucket) refill(now time.Time) {
	if !b.enabled() {
		return
	}
	if now.After(b.last) {
		// elapsed × limit / minute, in this order so whole seconds stay exact.
		earned := float64(now.Sub(b.last)) * float64(b.limit) / float64(time.Minute)
		b.level = math.Min(b.capacity, b.level+earned)
		b.last = now
	}
}

// need returns the level a charge of cost requires: the cost, or the whole
// capacity for a charge larger than the bucket (admitted only when full, it
// leaves the bucket in debt).
func (b *bucket) need(cost float64) float64 { return math.Min(cost, b.capacity) }

// fits reports whether a charge of cost may be admitted now.
func (b *bucket) fits(cost float64) bool {
	return !b.enabled() || b.level+epsilon >= b.need(cost)
}

// take charges cost, possibly into debt.
func (b *bucket) take(cost float64) {
	if b.enabled() {
		b.level -= cost
	}
}

// takeRefused charges cost for a refused request, with debt bounded by one
// capacity so a client that keeps hammering is locked out for at most two
// refill periods of the bucket.
func (b *bucket) takeRefused(cost float64) {
	if b.enabled() {
		b.level = math.Max(-b.capacity, b.level-cost)
	}
}

// wait returns how long until a charge of cost fits, rounded up to the
// nanosecond.
func (b *bucket) wait(cost float64) time.Duration {
	if !b.enabled() {
		return 0
	}
	missing := b.need(cost) - b.level
	if missing <= epsilon {
		return 0
	}
	return time.Duration(math.Ceil(missing * float64(time.Minute) / float64(b.limit)))
}

// remaining returns the whole tokens held, never negative.
func (b *bucket) remaining() int64 {
	if b.level <= 0 {
		return 0
	}
	return int64(math.Floor(b.level + epsilon))
}

// untilFull returns how long until the bucket is full again: OpenAI's
// x-ratelimit-reset-* value, and Anthropic's reset timestamp minus now.
func (b *bucket) untilFull() time.Duration {
	if !b.enabled() || b.level >= b.capacity {
		return 0
	}
	return time.Duration(math.Ceil((b.capacity - b.level) * float64(time.Minute) / float64(b.limit)))
}

// dayCounter is a daily quota: a count that resets at midnight in loc
// (UTC if nil).
type dayCounter struct {
	loc      *time.Location
	start    time.Time // midnight in loc that began the current day
	requests int64
	tokens   int64
}

// roll resets the counter if now is on a later day than its start.
func (c *dayCounter) roll(now time.Time) {
	loc := c.loc
	if loc == nil {
		loc = time.UTC
	}
	lt := now.In(loc)
	day := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	if day.After(c.start) {
		*c = dayCounter{loc: c.loc, start: day}
	}
}

// resetAt returns when the current day's quota resets: the next midnight in
// loc (23 or 25 hours away on the days clocks change).
func (c *dayCounter) resetAt() time.Time {
	return time.Date(c.start.Year(), c.start.Month(), c.start.Day()+1, 0, 0, 0, 0, c.start.Location())
}
