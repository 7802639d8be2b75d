package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// The Store's operations on the records engine: each is the memory store's,
// on the scope's copy, in the scope's next batch (recEngine.do). The
// Store's own methods check their input, the fallback budget and whether
// Redis is down first, as with the scripts. An operation's results are read
// only when it returns no error, and never through named results: after a
// caller gave up, the batch may still be writing them.

func (e *recEngine) reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	var res capacity.Reservation
	var decided time.Time // on this machine's clock
	err := e.do(ctx, "reserve", req.Scope, func(m *capacity.MemoryStore) (err error) {
		decided = time.Now()
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
	if err != nil {
		return capacity.Reservation{}, err // res may still be written: the caller gave up
	}
	if res.HoldsTicket() && e.s.opts.Clock == nil {
		// The answer comes a write's round trip (and any conflicts) after
		// the decision: Now is the store's clock at the answer, so that the
		// ticket's holder, who sleeps RetryAt.Sub(Now) from it, claims on
		// time however long the answer took (capacity.Reservation.Now). (The
		// batch's clock stood still while the operations before this one
		// were decided, for microseconds: Now is behind the answer by that.)
		res.Now = res.Now.Add(time.Since(decided))
	}
	return res, nil
}

func (e *recEngine) settle(ctx context.Context, lease capacity.Lease, final capacity.Charges) (time.Time, error) {
	var at time.Time
	err := e.do(ctx, "settle", lease.Scope, func(m *capacity.MemoryStore) error {
		at = e.scope(lease.Scope).clock.Now()
		return m.Settle(ctx, lease, final)
	}, nil)
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}

func (e *recEngine) release(ctx context.Context, lease capacity.Lease) error {
	return e.do(ctx, "release", lease.Scope, func(m *capacity.MemoryStore) error {
		return m.Release(ctx, lease)
	}, nil)
}

func (e *recEngine) renew(ctx context.Context, lease capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	var out capacity.Lease
	err := e.do(ctx, "renew", lease.Scope, func(m *capacity.MemoryStore) (err error) {
		out, err = m.Renew(ctx, lease, ttl)
		return err
	}, nil)
	if err != nil {
		return capacity.Lease{}, err
	}
	return out, nil
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

func (e *recEngine) addFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	var n int
	err := e.do(ctx, "add failure", sc, func(m *capacity.MemoryStore) (err error) {
		n, err = m.AddFailure(ctx, sc, call, ttl)
		return err
	}, nil)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// summary reads sc: its Snapshot, or with summary its Summary for call. A
// read writes nothing.
func (e *recEngine) summary(ctx context.Context, sc capacity.Scope, summary bool, call string) (capacity.Summary, error) {
	var sum capacity.Summary
	err := e.do(ctx, "snapshot", sc, func(m *capacity.MemoryStore) (err error) {
		if summary {
			sum, err = m.Summary(ctx, sc, call)
		} else {
			sum.Snapshot, err = m.Snapshot(ctx, sc)
		}
		return err
	}, nil)
	if err != nil {
		return capacity.Summary{}, err
	}
	return sum, nil
}

// credential applies change, a credential-wide Block or Unblock by the
// memory store's rules, to the credential's block the records engine keeps,
// whichever engine holds sc: on a scratch copy that holds only the block, at
// Redis's time (now), written if no other worker wrote the block meanwhile.
// The scripts keep the credential's block in a key of their own, which the
// Store writes beside it (Store.Block).
func (e *recEngine) credential(ctx context.Context, name string, sc capacity.Scope, change func(m *capacity.MemoryStore, now time.Time) error) error {
	rs := e.scope(sc)
	send := func(have int64, cred string, ttl int64) ([]string, error) {
		args := &recArgs{have: -1, credHave: have, what: "cred", credTTL: ttl, cred: cred}
		raw, err := e.pipe.send(context.WithoutCancel(ctx), newRecCall(args.command(nil, rs.head, rs.keys)))
		if err != nil {
			return nil, e.s.failed(ctx, name, err)
		}
		return raw, nil
	}
	raw, err := send(-1, "", 0) // a read: no version is -1
	for range recMaxConflicts {
		switch {
		case err != nil:
			return err
		case len(raw) == 3 && raw[0] == "ok":
			e.s.up()
			return nil
		case len(raw) != 5 || raw[0] != "cred":
			return fmt.Errorf("redisstore: %s: %w: exchange: a reply of %d values", name, ErrBadReply, len(raw))
		}
		secs, err1 := strconv.ParseInt(raw[1], 10, 64)
		usecs, err2 := strconv.ParseInt(raw[2], 10, 64)
		version, err3 := strconv.ParseInt(raw[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("redisstore: %s: %w: exchange: %v", name, ErrBadReply, err)
		}
		now := time.Unix(secs, usecs*1e3).UTC()
		if c := e.s.opts.Clock; c != nil {
			now = c.Now()
		}
		clock := &recClock{}
		clock.now.Store(now.UnixNano())
		m := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
		m.TrackRecords(sc)
		block := map[string][]byte{capacity.CredentialRecord: nil}
		if raw[4] != "" {
			block[capacity.CredentialRecord] = []byte(raw[4])
		}
		if err := m.LoadRecords(sc, capacity.Records{Fields: block}); err != nil {
			return fmt.Errorf("redisstore: %s: %w", name, err)
		}
		if err := change(m, now); err != nil {
			return err
		}
		ch := m.TakeRecords(sc)
		cred := recCredArg(ch.Fields)
		if cred == "" {
			return nil // nothing to change
		}
		raw, err = send(version, cred, recCredTTL(ch, now))
	}
	return fmt.Errorf("redisstore: %s: %w: %w (the credential's block)", name, capacity.ErrStoreUnavailable, ErrConflicts)
}
