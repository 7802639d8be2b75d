package assistantbatch

import (
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Limits are the shared quota of the sample, scaled so a batch of a few
// hundred documents takes tens of seconds: 120,000 tokens and 6,000
// requests a minute. Bulk work may not consume the last 30% of any budget
// (BulkFloor), so interactive calls find room at once; bulk work that has
// waited two minutes is lifted a class (AgingAfter).
var Limits = capacity.Limits{
	RequestsPerMinute: 6000,
	TokensPerMinute:   120000,
	Burst:             5 * time.Second,
	BulkFloor:         0.3,
	AgingAfter:        2 * time.Minute,
}
