package assistantbatch

import "github.com/tollgate-dev/tollgate/capacity"

// Prices are the sample model's list prices in US dollars per million
// tokens, for the cost ledger (interceptor.Options.Prices).
var Prices = capacity.Prices{
	capacity.PriceKey(capacity.OpenAI, Model): {Input: 0.15, CachedInput: 0.075, Output: 0.60},
}
