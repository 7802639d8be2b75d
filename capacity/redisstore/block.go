package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Block implements capacity.Store. A credential-wide block is one key read by
// every scope script on the credential.
func (s *Store) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Until.IsZero() {
		return fmt.Errorf("%w: block without Until", capacity.ErrInvalidRequest)
	}
	if err := sc.Validate(); err != nil {
		return err
	}
	if s.fallback != nil {
		// The fallback budget honours every block it hears of, in case
		// Redis becomes unreachable before the block ends.
		_ = s.fallback.mem.Block(ctx, sc, b)
	}
	if err := s.down("block"); err != nil {
		return s.orFallback(err)
	}
	if b.Credential {
		// Every scope of the credential, on either engine, reads it: it is
		// written where each engine keeps it.
		lasts := b.Until.Sub(s.localNow())
		err := s.blockScripts(ctx, sc, b)
		if err == nil {
			err = s.rec.credential(ctx, "block", sc, func(m *capacity.MemoryStore, now time.Time) error {
				b := b
				b.Until = now.Add(lasts)
				return m.Block(ctx, sc, b)
			})
		}
		return s.orFallback(err)
	}
	return s.orFallback(s.route(sc, func() error {
		return s.rec.block(ctx, sc, b, s.localNow())
	}, func() error {
		return s.blockScripts(ctx, sc, b)
	}))
}

// blockScripts blocks sc, or its credential, with the scripts.
func (s *Store) blockScripts(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	k := s.keysFor(sc)
	// The block lasts from now on this worker's clock; the script adds that
	// to Redis time, so a worker whose clock is off still blocks for as long
	// as it meant.
	lasts := blockDuration(b.Until, s.localNow())
	// The state stores the detail as a zero-terminated string.
	detail := strings.ReplaceAll(b.Detail, "\x00", "")
	if b.Credential {
		args := []any{s.nowArg(), int(b.Reason), lasts, detail, b.HalfOpen.Microseconds(), boolArg(b.Probing)}
		if err := s.call(ctx, s.scripts.blockCred, k.keys[keyCredBlock:keyCredBlock+1], args, false).Err(); err != nil {
			return s.failed(ctx, "block", err)
		}
		s.up()
		return nil
	}
	b1, b2 := s.knownBounds(k)
	args := append(s.commonArgs(k, b1, b2, 5), int(b.Reason), lasts, detail, b.HalfOpen.Microseconds(), boolArg(b.Probing))
	_, _, err := s.run(ctx, "block", s.scripts.block, k, args)
	return err
}

// blockDuration is how long (whole microseconds, rounded up) a block until
// until lasts from now; negative for a block that already ended (it may still
// end half-open with a probe). The scripts bound it, as the memory store
// does, by capacity.MaxBlock.
func blockDuration(until, now time.Time) int64 {
	d := until.Sub(now)
	return d.Microseconds() + boolInt(d > 0 && d%time.Microsecond != 0)
}

// Unblock implements capacity.Store. Lifting a scope's block wakes its
// waiters (on every worker); lifting a credential's wakes this worker's.
func (s *Store) Unblock(ctx context.Context, sc capacity.Scope, credential bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
		return err
	}
	if s.fallback != nil {
		_ = s.fallback.mem.Unblock(ctx, sc, credential)
	}
	if err := s.down("unblock"); err != nil {
		return s.orFallback(err)
	}
	if credential {
		err := s.unblockScripts(ctx, sc, true)
		if err == nil {
			err = s.rec.credential(ctx, "unblock", sc, func(m *capacity.MemoryStore, _ time.Time) error {
				return m.Unblock(ctx, sc, true)
			})
		}
		return s.orFallback(err)
	}
	return s.orFallback(s.route(sc, func() error {
		return s.rec.unblock(ctx, sc, false)
	}, func() error {
		return s.unblockScripts(ctx, sc, false)
	}))
}

// unblockScripts lifts the block of sc, or of its credential, with the
// scripts.
func (s *Store) unblockScripts(ctx context.Context, sc capacity.Scope, credential bool) error {
	k := s.keysFor(sc)
	if credential {
		if err := s.rdb.Del(ctx, k.keys[keyCredBlock]).Err(); err != nil {
			return s.failed(ctx, "unblock", err)
		}
		s.up()
		s.notify.wakeCredential(k.credKey)
		return nil
	}
	if _, _, err := s.run(ctx, "unblock", s.scripts.unblock, k, s.commonArgs(k, "", "", 0)); err != nil {
		return err
	}
	s.notify.wake(k.scopeKey, 1)
	return nil
}

// orFallback returns nil for an unreachable Redis when the fallback budget
// took the operation, else err.
func (s *Store) orFallback(err error) error {
	if err != nil && s.fallback != nil && isUnavailable(err) {
		return nil
	}
	return err
}
