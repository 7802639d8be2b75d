package assistantbatch

import (
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/spend"
)

// Prices are the sample model's list prices in US dollars per million
// tokens, for the cost ledger (interceptor.Options.Prices).
var Prices = spend.Prices{
	spend.PriceKey(capacity.OpenAI, Model): {Input: 0.15, CachedInput: 0.075, Output: 0.60},
}
