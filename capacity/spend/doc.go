// Package spend prices calls and caps what tenants and connections spend.
//
// Prices map a provider's model to a Price per million tokens (Price.Cost
// of a call's Usage, Price.WorstCase of its Demand); the gate records each
// settled call's cost in the store's ledger (capacity.Ledger). Caps bound
// what a tenant or a connection spends in a day: a call that would pass its
// cap is refused before it reaches the provider.
package spend
