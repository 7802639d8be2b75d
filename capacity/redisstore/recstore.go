package redisstore

import (
	"context"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// The Store's operations on the records engine: each is the memory store's,
// on the scope's copy, in the scope's next batch (recEngine.do). The
// Store's own methods check their input, the fallback budget and whether
// Redis is down first, as with the scripts.

func (e *recEngine) reserve(ctx context.Context, req capacity.Request) (res capacity.Reservation, err error) {
	err = e.do(ctx, "reserve", req.Scope, func(m *capacity.MemoryStore) (err error) {
		res, err = m.Reserve(ctx, req)
		return err
	}, func() {
		// The caller gave up while its request was decided: give back a
		// grant or a booked ticket.
		switch back := context.WithoutCancel(ctx); {
		case res.Granted:
			_ = e.s.Release(back, res.Lease)
		case res.Booked:
			_ = e.s.Release(back, capacity.Lease{Scope: req.Scope, Call: req.Call})
		}
	})
	return res, err
}

func (e *recEngine) settle(ctx context.Context, lease capacity.Lease, final capacity.Charges) (at time.Time, err error) {
	err = e.do(ctx, "settle", lease.Scope, func(m *capacity.MemoryStore) error {
		at = e.scope(lease.Scope).clock.Now()
		return m.Settle(ctx, lease, final)
	}, nil)
	return at, err
}

func (e *recEngine) release(ctx context.Context, lease capacity.Lease) error {
	return e.do(ctx, "release", lease.Scope, func(m *capacity.MemoryStore) error {
		return m.Release(ctx, lease)
	}, nil)
}

func (e *recEngine) renew(ctx context.Context, lease capacity.Lease, ttl time.Duration) (out capacity.Lease, err error) {
	err = e.do(ctx, "renew", lease.Scope, func(m *capacity.MemoryStore) (err error) {
		out, err = m.Renew(ctx, lease, ttl)
		return err
	}, nil)
	return out, err
}

func (e *recEngine) observe(ctx context.Context, sc capacity.Scope, obs capacity.Observation) error {
	return e.do(ctx, "observe", sc, func(m *capacity.MemoryStore) error {
		return m.Observe(ctx, sc, obs)
	}, nil)
}

// block blocks sc as b says, b.Until being on the worker's clock, which
// reads local: the block lasts as long from the store's time, so a worker
// whose clock is off still blocks for as long as it meant.
func (e *recEngine) block(ctx context.Context, sc capacity.Scope, b capacity.Block, local time.Time) error {
	lasts := b.Until.Sub(local)
	return e.do(ctx, "block", sc, func(m *capacity.MemoryStore) error {
		b.Until = e.scope(sc).clock.Now().Add(lasts)
		return m.Block(ctx, sc, b)
	}, nil)
}

func (e *recEngine) unblock(ctx context.Context, sc capacity.Scope, credential bool) error {
	return e.do(ctx, "unblock", sc, func(m *capacity.MemoryStore) error {
		return m.Unblock(ctx, sc, credential)
	}, nil)
}

func (e *recEngine) addFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (n int, err error) {
	err = e.do(ctx, "add failure", sc, func(m *capacity.MemoryStore) (err error) {
		n, err = m.AddFailure(ctx, sc, call, ttl)
		return err
	}, nil)
	return n, err
}

// summary reads sc: its Snapshot, or with summary its Summary for call. A
// read writes nothing.
func (e *recEngine) summary(ctx context.Context, sc capacity.Scope, summary bool, call string) (sum capacity.Summary, err error) {
	err = e.do(ctx, "snapshot", sc, func(m *capacity.MemoryStore) (err error) {
		if summary {
			sum, err = m.Summary(ctx, sc, call)
		} else {
			sum.Snapshot, err = m.Snapshot(ctx, sc)
		}
		return err
	}, nil)
	return sum, err
}
