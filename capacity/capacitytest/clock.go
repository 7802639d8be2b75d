// Package capacitytest provides helpers for tests (and simulations) of code
// built on capacity.
package capacitytest

import (
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// ManualClock is a capacity.Clock that moves only when told: time stands
// still until the test calls Advance or Set, and a timer fires when the clock
// reaches its deadline. Tests use it to drive a store's time (and the waits
// of code built on it) by hand instead of sleeping. It is safe for
// concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer // armed, not yet fired or stopped
}

var _ capacity.Clock = (*ManualClock)(nil)

// NewManualClock returns a ManualClock that reads t until moved.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t and fires the timers that are due. The clock
// never goes backwards: a t before the clock's time leaves it where it is.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// setLocked is Set; c.mu must be held.
func (c *ManualClock) setLocked(t time.Time) {
	if t.After(c.now) {
		c.now = t
	}
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.fire(c.now)
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// NewTimer returns a timer that fires once the clock has moved d past its
// current time. A non-positive d fires at once.
func (c *ManualClock) NewTimer(d time.Duration) capacity.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		tm.fire(c.now)
	} else {
		c.timers = append(c.timers, tm)
	}
	return tm
}

// Waiters returns how many timers are armed and have neither fired nor been
// stopped: how many goroutines sleep on the clock, so a test can move time
// once a waiter sleeps.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type manualTimer struct {
	c     *ManualClock
	at    time.Time
	ch    chan time.Time
	fired bool // guarded by c.mu
}

// fire sends now on the timer's channel once; c.mu must be held.
func (t *manualTimer) fire(now time.Time) {
	if !t.fired {
		t.fired = true
		t.ch <- now
	}
}

// C returns the channel the timer fires on.
func (t *manualTimer) C() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing. It reports whether it stopped the
// timer: false if it had already fired or been stopped.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, tm := range t.c.timers {
		if tm == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}
