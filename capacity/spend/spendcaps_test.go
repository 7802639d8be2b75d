package spend_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tollgate-dev/tollgate/capacity/spend"
)

func TestSpendCaps(t *testing.T) {
	c := spend.Caps{
		Tenants:     map[string]float64{"acme": 5, "bigco": 0, "": 1},
		Tenant:      2,
		Connections: map[string]float64{"openai/team-a": 100, "openai/free": 0},
		Connection:  50,
	}
	assert.NoError(t, c.Validate())
	assert.False(t, c.Empty())
	for _, tt := range []struct {
		tenant string
		want   float64
		capped bool
	}{
		{"acme", 5, true},
		{"globex", 2, true}, // the default
		{"bigco", 0, false}, // excepted
		{"", 1, true},       // the calls without a key, named
	} {
		got, ok := c.TenantCap(tt.tenant)
		assert.Equal(t, tt.capped, ok, tt.tenant)
		assert.InDelta(t, tt.want, got, 0, tt.tenant)
	}
	_, ok := spend.Caps{Tenant: 2}.TenantCap("")
	assert.False(t, ok, "the default caps no call without a key")
	for _, tt := range []struct {
		cred   string
		want   float64
		capped bool
	}{
		{"openai/team-a", 100, true},
		{"anthropic/team-a", 50, true},
		{"openai/free", 0, false},
	} {
		got, ok := c.ConnectionCap(tt.cred)
		assert.Equal(t, tt.capped, ok, tt.cred)
		assert.InDelta(t, tt.want, got, 0, tt.cred)
	}

	assert.True(t, spend.Caps{}.Empty())
	assert.True(t, spend.Caps{Tenants: map[string]float64{"a": 0}}.Empty())
	assert.False(t, spend.Caps{Connections: map[string]float64{"openai/x": 1}}.Empty())
	for name, bad := range map[string]spend.Caps{
		"negative default":      {Tenant: -1},
		"NaN connection":        {Connection: math.NaN()},
		"a tenant with a space": {Tenants: map[string]float64{"acme corp": 1}},
		"infinite tenant cap":   {Tenants: map[string]float64{"acme": math.Inf(1)}},
		"empty credential":      {Connections: map[string]float64{"": 1}},
		"negative connection":   {Connections: map[string]float64{"openai/a": -2}},
	} {
		assert.ErrorIs(t, bad.Validate(), spend.ErrInvalidCaps, name)
	}
}
