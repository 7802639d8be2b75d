package capacitytest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

var t0 = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// fired reports whether ch has a value, and which.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestManualClockTimers(t *testing.T) {
	c := capacitytest.NewManualClock(t0)
	a := c.NewTimer(time.Second)
	b := c.NewTimer(3 * time.Second)
	require.Equal(t, 2, c.Waiters())

	c.Advance(999 * time.Millisecond)
	_, ok := fired(a.C())
	assert.False(t, ok, "before its deadline")

	c.Advance(time.Millisecond)
	at, ok := fired(a.C())
	require.True(t, ok, "at its deadline")
	assert.Equal(t, t0.Add(time.Second), at)
	assert.Equal(t, 1, c.Waiters())
	assert.False(t, a.Stop(), "already fired")

	assert.True(t, b.Stop())
	assert.Equal(t, 0, c.Waiters())
	c.Advance(time.Hour)
	_, ok = fired(b.C())
	assert.False(t, ok, "stopped")
}

func TestManualClockNonPositiveTimerFiresAtOnce(t *testing.T) {
	c := capacitytest.NewManualClock(t0)
	at, ok := fired(c.NewTimer(0).C())
	require.True(t, ok)
	assert.Equal(t, t0, at)
	assert.Equal(t, 0, c.Waiters())
}

func TestManualClockSetNeverGoesBack(t *testing.T) {
	c := capacitytest.NewManualClock(t0)
	c.Set(t0.Add(time.Minute))
	assert.Equal(t, t0.Add(time.Minute), c.Now())
	c.Set(t0)
	assert.Equal(t, t0.Add(time.Minute), c.Now())
}
