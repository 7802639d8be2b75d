package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// fallback is the local budget of FallbackLocal: a MemoryStore on wall-clock
// time whose limits are the requested ones scaled by FallbackFraction. It
// only admits while Redis is unreachable; the leases it grants are its own
// until they end.
type fallback struct {
	mem  *capacity.MemoryStore
	frac float64

	mu     sync.Mutex
	leases map[fallbackKey]struct{}
}

type fallbackKey struct {
	scope capacity.Scope
	id    string
}

func newFallback(o Options) *fallback {
	return &fallback{
		mem:    capacity.NewMemoryStore(capacity.MemoryOptions{TicketGrace: o.TicketGrace}),
		frac:   o.FallbackFraction,
		leases: make(map[fallbackKey]struct{}),
	}
}

// isUnavailable reports whether err says the store could not be reached.
func isUnavailable(err error) bool { return errors.Is(err, capacity.ErrStoreUnavailable) }

// reserveFallback answers a Reserve that Redis could not: with the fallback
// budget if there is one and Redis is unreachable, else with err.
func (s *Store) reserveFallback(ctx context.Context, req capacity.Request, err error) (capacity.Reservation, error) {
	if s.fallback == nil || !isUnavailable(err) {
		return capacity.Reservation{}, err
	}
	return s.fallback.reserve(ctx, req, err)
}

func (f *fallback) reserve(ctx context.Context, req capacity.Request, cause error) (capacity.Reservation, error) {
	local := req
	local.Limits = scaleLimits(req.Limits, f.frac)
	res, err := f.mem.Reserve(ctx, local)
	var tooLarge *capacity.DemandTooLargeError
	if errors.As(err, &tooLarge) && fits(req) {
		// Too large only for the scaled budget: wait for Redis rather than
		// fail a call that the shared budget would admit.
		return capacity.Reservation{}, fmt.Errorf("%w (and too large for the local fallback budget: %v)", cause, tooLarge)
	}
	if err != nil || !res.Granted {
		return res, err
	}
	f.mu.Lock()
	f.leases[fallbackKey{req.Scope, res.Lease.ID}] = struct{}{}
	f.mu.Unlock()
	return res, nil
}

func (f *fallback) owns(le capacity.Lease) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.leases[fallbackKey{le.Scope, le.ID}]
	return ok
}

func (f *fallback) forget(le capacity.Lease) {
	f.mu.Lock()
	delete(f.leases, fallbackKey{le.Scope, le.ID})
	f.mu.Unlock()
}

func (f *fallback) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases)
}

func (f *fallback) settle(ctx context.Context, le capacity.Lease, final capacity.Charges) error {
	f.forget(le)
	return f.mem.Settle(ctx, le, final)
}

func (f *fallback) release(ctx context.Context, le capacity.Lease) error {
	if le.ID != "" {
		f.forget(le)
	}
	return f.mem.Release(ctx, le)
}

func (f *fallback) renew(ctx context.Context, le capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	out, err := f.mem.Renew(ctx, le, ttl)
	if errors.Is(err, capacity.ErrLeaseNotFound) {
		f.forget(le)
	}
	return out, err
}

// scaleLimits returns l with every limit (and TokenBurst) scaled by frac,
// keeping at least 1 of each limited dimension.
func scaleLimits(l capacity.Limits, frac float64) capacity.Limits {
	scale := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return max(1, int64(math.Floor(float64(v)*frac)))
	}
	for _, d := range capacity.Dimensions() {
		l = l.SetLimit(d, scale(l.Limit(d)))
	}
	l.TokenBurst = scale(l.TokenBurst)
	return l
}

// fits reports whether req's demand is admissible under the unscaled limits.
func fits(req capacity.Request) bool {
	most := req.Limits.Admissible()
	for d, c := range req.Charges {
		if most[d] > 0 && float64(c) > most[d] {
			return false
		}
	}
	return true
}
