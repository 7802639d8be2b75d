package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// A scope has one state: the scripts' or the records engine's. Options.Engine
// says which a scope that has neither starts with; a scope that has one stays
// with it until it stops mattering and expires. Each side refuses a scope the
// other holds, atomically in the scope's slot: the exchange replies
// {'scripts'} while the scripts' state exists and no records do, and a script
// fails with TGRECORDS rather than give a state to a scope that has records.
// So workers of scripts 6.4 and later share one budget per scope whatever
// their Engine, and a Prefix moves from one engine to the other with a
// rolling deploy (the package doc, The records engine).

// errOnScripts says that the scripts hold the scope, errOnRecords that the
// records engine does: the Store runs the operation with the other.
var (
	errOnScripts = errors.New("redisstore: the scripts hold the scope")
	errOnRecords = errors.New("redisstore: the records engine holds the scope")
)

// onRecordsPrefix begins the error of a script that found the scope's
// records (lua/state.lua, stored.checkRecords).
const onRecordsPrefix = "TGRECORDS"

// isOnRecords reports whether err is a script's TGRECORDS.
func isOnRecords(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && redis.HasErrorPrefix(rerr, onRecordsPrefix)
}

// heldMemory is how long a Store that found the engine it does not start
// scopes with holding a scope sends its operations on the scope straight
// to that engine, rather than to its own first: a busy scope the other
// engine holds costs it one round trip an operation, not two, and one
// whose state expired (which takes seconds of rest) starts again on the
// Store's own engine.
const heldMemory = time.Second

// route runs an operation on sc with the engine that holds the scope:
// records or scripts, first the one it last found holding sc if that was
// within heldMemory, else the one this Store starts scopes with, then, if
// that one says the other holds it, the other. A scope that moves between
// the engines more often than that fails the operation with
// capacity.ErrStoreUnavailable (a wait).
func (s *Store) route(sc capacity.Scope, records, scripts func() error) error {
	k := s.keysFor(sc)
	onRecords := s.opts.Engine == EngineRecords
	recordsAt, scriptsAt := k.onRecordsAt.Load(), k.onScriptsAt.Load()
	if time.Since(time.Unix(0, max(recordsAt, scriptsAt))) < heldMemory {
		onRecords = recordsAt > scriptsAt
	}
	for range 3 {
		var err error
		if onRecords {
			err = records()
		} else {
			err = scripts()
		}
		switch {
		case onRecords && errors.Is(err, errOnScripts):
			k.onScriptsAt.Store(time.Now().UnixNano())
		case !onRecords && errors.Is(err, errOnRecords):
			k.onRecordsAt.Store(time.Now().UnixNano())
		default:
			return err
		}
		onRecords = !onRecords
	}
	return fmt.Errorf("%w: scope %s moved between the engines on every try", capacity.ErrStoreUnavailable, k.scopeKey)
}

// EngineOf reports which engine holds scope sc: the scripts or the records
// engine, whichever has its state; ok is false for a scope with neither (it
// rests). For operators (tollgate status), not the admission path.
func (s *Store) EngineOf(ctx context.Context, sc capacity.Scope) (engine Engine, ok bool, err error) {
	if err := sc.Validate(); err != nil {
		return 0, false, err
	}
	k := s.keysFor(sc)
	var scripts, records *redis.IntCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		scripts = p.Exists(ctx, k.keys[keyState])
		records = p.Exists(ctx, k.keys[keyRecords])
		return nil
	})
	if err != nil {
		return 0, false, s.failed(ctx, "engine of", err)
	}
	switch {
	case records.Val() > 0:
		return EngineRecords, true, nil
	case scripts.Val() > 0:
		return EngineScripts, true, nil
	}
	return 0, false, nil
}
