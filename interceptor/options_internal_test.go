package interceptor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
)

func TestCheckActivityOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		info activity.Info
		ok   bool
	}{
		{"unlimited with deadline", activity.Info{ScheduleToCloseTimeout: time.Hour, RetryPolicy: &temporal.RetryPolicy{}}, true},
		{"large cap", activity.Info{ScheduleToCloseTimeout: time.Hour, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5000}}, true},
		{"small cap", activity.Info{ScheduleToCloseTimeout: time.Hour, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}}, false},
		{"no deadline", activity.Info{RetryPolicy: &temporal.RetryPolicy{}}, false},
		{"local activity", activity.Info{IsLocalActivity: true, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}}, true},
	} {
		err := checkActivityOptions(tc.info, DefaultMinMaximumAttempts)
		assert.Equal(t, tc.ok, err == nil, "%s: %v", tc.name, err)
	}
}

func TestOptionsValidation(t *testing.T) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	limits := func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true }
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no store", Options{Limits: limits}},
		{"negative ttl", Options{Store: store, Limits: limits, LeaseTTL: -time.Second}},
		{"short ttl", Options{Store: store, Limits: limits, LeaseTTL: time.Second}},
		{"negative failures", Options{Store: store, Limits: limits, MaxFailures: -1}},
		{"negative settle timeout", Options{Store: store, Limits: limits, SettleTimeout: -time.Second}},
	} {
		_, err := New(tc.opts)
		assert.ErrorIs(t, err, ErrInvalidOptions, tc.name)
	}
	o, err := Options{Store: store, Limits: limits}.withDefaults()
	assert.NoError(t, err)
	assert.Equal(t, DefaultMaxLocalWait, o.MaxLocalWait)
	assert.Equal(t, DefaultLeaseTTL, o.LeaseTTL)
	assert.Equal(t, DefaultMaxFailures, o.MaxFailures)
	assert.Equal(t, DefaultSettleTimeout, o.SettleTimeout)
}
