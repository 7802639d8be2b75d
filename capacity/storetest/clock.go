package storetest

import (
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Epoch is the instant every suite clock starts at: a Thursday, 12:00 UTC.
var Epoch = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// Clock is a manual clock for store tests: time moves only when the test
// calls Advance or Set. It implements capacity.Clock; its timers fire when
// the clock passes their deadline. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	armed  chan struct{} // closed when a timer is armed
}

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch, armed: make(chan struct{})} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires due timers.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires due timers.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var keep []*manualTimer
	for _, tm := range c.timers {
		if !tm.at.After(c.now) {
			tm.fire(c.now)
		} else {
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
}

// Armed returns a channel closed the next time a timer is armed, so a test can
// advance time once a waiter sleeps.
func (c *Clock) Armed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}

// NewTimer implements capacity.Clock.
func (c *Clock) NewTimer(d time.Duration) capacity.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		tm.fire(c.now)
	} else {
		c.timers = append(c.timers, tm)
	}
	close(c.armed)
	c.armed = make(chan struct{})
	return tm
}

type manualTimer struct {
	c     *Clock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *manualTimer) fire(now time.Time) {
	if !t.fired {
		t.fired = true
		t.ch <- now
	}
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

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
