package spend_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/spend"
)

// Prices are per million tokens, in a currency unit of your choosing; a
// model without its own price takes its limit group's.
func ExamplePrices() {
	prices := spend.Prices{
		spend.PriceKey(capacity.OpenAI, "gpt-4o"): {Input: 2.50, CachedInput: 1.25, Output: 10},
	}
	p, ok := prices.Lookup(capacity.OpenAI, "gpt-4o-2024-08-06", "gpt-4o")
	u := capacity.Usage{InputTokens: 12_000, CacheReadInputTokens: 8_000, OutputTokens: 1_500}
	fmt.Printf("priced: %v, cost %.4f\n", ok, p.Cost(u))
	// Output: priced: true, cost 0.0550
}

// Caps bound a day's spend per tenant (fairness key) and per connection.
func ExampleCaps() {
	caps := spend.Caps{Tenant: 5, Tenants: map[string]float64{"acme": 50, "internal": 0}}
	for _, tenant := range []string{"acme", "globex", "internal"} {
		c, capped := caps.TenantCap(tenant)
		fmt.Println(tenant, c, capped)
	}
	// Output:
	// acme 50 true
	// globex 5 true
	// internal 0 false
}
