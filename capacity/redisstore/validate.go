package redisstore

import "github.com/tollgate-dev/tollgate/capacity"

// validateRequest checks req as capacity.MemoryStore does.
func validateRequest(r capacity.Request) error {
	return r.Validate()
}
