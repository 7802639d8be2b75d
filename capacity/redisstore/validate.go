package redisstore

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity"
)

// validateRequest checks req as capacity.MemoryStore does. Class floors and
// aging are refused until the scripts apply them: a limit the store would
// ignore must not look enforced.
func validateRequest(r capacity.Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if l := r.Limits; l.StandardFloor > 0 || l.BulkFloor > 0 || l.AgingAfter > 0 {
		return fmt.Errorf("%w: the Redis store does not apply class floors or aging yet (StandardFloor, BulkFloor, AgingAfter)", capacity.ErrInvalidLimits)
	}
	return nil
}
