package capacity

import "time"

// Clock is tollgate's one time source: stores read their time from Now
// (MemoryOptions.Clock), and blocking code (Wait, the interceptor's local
// waits and lease keepalive) measures time with Now and sleeps on NewTimer,
// so tests control time instead of sleeping. SystemClock is the wall clock;
// capacitytest.ManualClock moves only when a test tells it to. A Clock must be
// safe for concurrent use.
type Clock interface {
	// Now returns the clock's current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, after d has passed on the
	// clock. A non-positive d fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that tollgate's blocking code uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock is the wall clock. Its zero value is ready to use.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a *time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
