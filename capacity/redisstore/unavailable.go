package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// failed turns a Redis error into the error an operation returns: the
// context's error if it ended, a wrapped capacity.ErrStoreUnavailable if Redis
// cannot be reached (and Redis is skipped for ProbeInterval) or if the
// scope's Cluster slot is moving (and only this operation fails), else the
// error.
func (s *Store) failed(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	if isOnRecords(err) {
		return errOnRecords
	}
	if s.slotMoving(err) {
		s.unavailable.Add(1)
		return fmt.Errorf("redisstore: %s: %w (Cluster slot moving): %w", op, capacity.ErrStoreUnavailable, err)
	}
	if !unreachable(err) {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	s.unavailable.Add(1)
	s.lastErr.Store(&err) // errors of any type (an atomic.Value panics on a second type)
	if s.downUntil.Swap(time.Now().Add(s.opts.ProbeInterval).UnixNano()) == 0 {
		if l := s.opts.Logger; l != nil {
			l.Warn("tollgate: Redis unreachable", "op", op, "err", err, "policy", s.opts.OnUnavailable.String())
		}
	}
	return fmt.Errorf("redisstore: %s: %w: %w", op, capacity.ErrStoreUnavailable, err)
}

// down reports whether Redis was found unreachable less than ProbeInterval
// ago, with the error that said so.
func (s *Store) down(op string) error {
	until := s.downUntil.Load()
	if until == 0 || time.Now().UnixNano() >= until {
		return nil
	}
	s.unavailable.Add(1)
	var cause error
	if p := s.lastErr.Load(); p != nil {
		cause = *p
	}
	return fmt.Errorf("redisstore: %s: %w (Redis unreachable; next try within %v): %w", op, capacity.ErrStoreUnavailable, s.opts.ProbeInterval, cause)
}

// up records that Redis answered.
func (s *Store) up() {
	if s.downUntil.Load() != 0 {
		s.downUntil.Store(0)
	}
}

// unreachable reports whether err means Redis could not serve the request
// (network, pool, a server that is loading, read-only or out of memory),
// as opposed to a reply it gave.
func unreachable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return !errors.Is(err, redis.Nil)
	}
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "BUSY", "OOM", "NOREPLICAS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// slotMoving reports whether err says that the Cluster slot of the keys is
// being moved to another master (redis-cli --cluster reshard, rebalance):
// TRYAGAIN while its keys are split between the two, or a MOVED or ASK
// redirection left when a Cluster client ran out of MaxRedirects. The other
// slots are served meanwhile, so the store keeps using Redis. MOVED to a
// client that is not a Cluster client is a misconfiguration, not a move.
func (s *Store) slotMoving(err error) bool {
	if redis.HasErrorPrefix(err, "TRYAGAIN") {
		return true
	}
	_, cluster := s.rdb.(*redis.ClusterClient)
	return cluster && (redis.HasErrorPrefix(err, "MOVED ") || redis.HasErrorPrefix(err, "ASK "))
}
