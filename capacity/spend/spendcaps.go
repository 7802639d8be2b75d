package spend

import (
	"errors"
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Caps caps what a tenant and what a connection may spend per day, in
// the unit of the Prices that cost the calls. The gate reads the day's
// spend from the ledger (ledger.Ledger) before admission: a call whose worst case
// (Price.WorstCase) would take a capped tenant or connection past its cap
// is refused until the day window ends. The zero value caps nothing.
//
// A tenant is a fairness key, capped over every scope; a connection is a
// credential (Scope.CredentialKey, "openai/team-a"), capped over every
// model it serves. The day is each scope's day window (Limits.DayReset),
// named by the date it starts on (ledger.Day): a tenant's spend of a day sums
// its calls on every scope whose window is named by that date.
type Caps struct {
	// Tenants caps the fairness keys it names; "" names the calls without
	// a key. A cap of 0 in it means no cap for that key (an exception to
	// Tenant).
	Tenants map[string]float64
	// Tenant caps every non-empty fairness key not in Tenants; 0 caps none.
	Tenant float64
	// Connections caps the credentials it names (Scope.CredentialKey); 0
	// means no cap for that credential (an exception to Connection).
	Connections map[string]float64
	// Connection caps every credential not in Connections; 0 caps none.
	Connection float64
}

// ErrInvalidCaps is returned (wrapped) for spend caps that cannot be
// used. The error never holds a tenant's name.
var ErrInvalidCaps = errors.New("spend: invalid spend caps")

// Empty reports whether c caps nothing.
func (c Caps) Empty() bool {
	if c.Tenant > 0 || c.Connection > 0 {
		return false
	}
	for _, v := range c.Tenants {
		if v > 0 {
			return false
		}
	}
	for _, v := range c.Connections {
		if v > 0 {
			return false
		}
	}
	return true
}

// Validate reports whether every cap is a finite number >= 0 and every
// tenant a fairness key.
func (c Caps) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	if bad(c.Tenant) || bad(c.Connection) {
		return fmt.Errorf("%w: Tenant is %v and Connection %v; want finite caps >= 0 (0: no cap)", ErrInvalidCaps, c.Tenant, c.Connection)
	}
	for k, v := range c.Tenants {
		if err := capacity.ValidateFairnessKey(k); err != nil {
			return fmt.Errorf("%w: Tenants: %w", ErrInvalidCaps, err)
		}
		if bad(v) {
			return fmt.Errorf("%w: a cap in Tenants is %v; want a finite cap >= 0 (0: no cap)", ErrInvalidCaps, v)
		}
	}
	for k, v := range c.Connections {
		if k == "" {
			return fmt.Errorf("%w: Connections has an empty credential key; want provider/credential", ErrInvalidCaps)
		}
		if bad(v) {
			return fmt.Errorf("%w: Connections[%q] is %v; want a finite cap >= 0 (0: no cap)", ErrInvalidCaps, k, v)
		}
	}
	return nil
}

// TenantCap returns tenant's cap; false if it has none.
func (c Caps) TenantCap(tenant string) (float64, bool) {
	v, ok := c.Tenants[tenant]
	if !ok && tenant != "" {
		v = c.Tenant
	}
	return v, v > 0
}

// ConnectionCap returns the cap of the credential with key cred
// (Scope.CredentialKey); false if it has none.
func (c Caps) ConnectionCap(cred string) (float64, bool) {
	v, ok := c.Connections[cred]
	if !ok {
		v = c.Connection
	}
	return v, v > 0
}
