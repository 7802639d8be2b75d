package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// library is the scripts as one Redis function library: loaded once per
// server (FUNCTION LOAD), then called by name (FCALL), so that a call runs
// its operation alone. A script sent with EVALSHA first defines every
// function of the scripts, about 120 µs of Redis per call, a quarter of a
// call on a busy scope (decision 0007, "Scripts 5.3").
//
// Its name is "tollgate_" and the SHA-1 of its source, as EVALSHA names a
// script: two versions of the scripts load side by side during a rolling
// deploy, and a library of the same name is always the same code. Its
// functions are that name, "_" and the script's name (ops, renew, …).
type library struct {
	name   string
	source string // what FUNCTION LOAD is sent: "#!lua name=…" first
}

// newLibrary returns the library of body, the files joined.
func newLibrary(body string) *library {
	sum := sha1.Sum([]byte(body))
	name := "tollgate_" + hex.EncodeToString(sum[:])
	header := "#!lua name=" + name + "\nlocal LIBRARY = \"" + name + "\"\n"
	return &library{name: name, source: header + body}
}

// functions is a store's use of its scripts' library. It starts on, and
// turns off for good when Redis refuses functions (a user whose ACL does
// not grant FCALL and FUNCTION LOAD, as the least rules of the package doc
// do not): the store then sends each script with EVALSHA, as before.
type functions struct {
	off atomic.Bool
	mu  sync.Mutex // one load at a time
	// loads counts the loads made, so that calls that found the library
	// missing together (every waiting call, after Redis restarted empty)
	// load it once: a call loads only if no load ended since it looked.
	loads atomic.Uint64
}

// call runs sc on keys with args: as a function of lib when it can,
// loading the library where the server lacks it (a new server, one
// restarted empty, a failover to a replica that never had it), else with
// EVALSHA. ro runs it read-only (FCALL_RO, EVALSHA_RO). lib is nil for
// scripts without a library.
func (f *functions) call(ctx context.Context, rdb redis.UniversalClient, lib *library, sc *script, keys []string, args []any, ro bool) *redis.Cmd {
	if lib != nil && !f.off.Load() {
		seen := f.loads.Load()
		cmd := fcall(ctx, rdb, lib, sc, keys, args, ro)
		err := cmd.Err()
		if functionMissing(err) {
			if err = f.load(ctx, rdb, lib, seen); err == nil {
				return fcall(ctx, rdb, lib, sc, keys, args, ro)
			}
			cmd.SetErr(err) // Redis unreachable, or refusing the library
		}
		if !refused(err) {
			return cmd
		}
		f.off.Store(true)
	}
	if ro {
		return sc.eval.RunRO(ctx, rdb, keys, args...)
	}
	return sc.eval.Run(ctx, rdb, keys, args...)
}

func fcall(ctx context.Context, rdb redis.UniversalClient, lib *library, sc *script, keys []string, args []any, ro bool) *redis.Cmd {
	name := lib.name + "_" + sc.name
	if ro {
		return rdb.FCallRO(ctx, name, keys, args...)
	}
	return rdb.FCall(ctx, name, keys, args...)
}

// load loads the library on every primary that serves keys (every primary
// of a Cluster, every shard of a Ring), replacing none but its own name,
// unless a load ended since seen (loads).
func (f *functions) load(ctx context.Context, rdb redis.UniversalClient, lib *library, seen uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads.Load() != seen {
		return nil // another call loaded it meanwhile
	}
	loadOn := func(ctx context.Context, c *redis.Client) error {
		return c.FunctionLoadReplace(ctx, lib.source).Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, loadOn)
	case *redis.Ring:
		err = c.ForEachShard(ctx, loadOn)
	default:
		err = rdb.FunctionLoadReplace(ctx, lib.source).Err()
	}
	if err == nil {
		f.loads.Add(1)
	}
	return err
}

// functionMissing reports whether err says the server has no such function:
// the library is not loaded there.
func functionMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// refused reports whether err is Redis refusing functions themselves, not
// one call: a user not allowed to run FCALL or FUNCTION LOAD (a NOPERM
// that names a command, not the keys), a server that does not know them,
// or one that rejects the library.
func refused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, "command") ||
		strings.Contains(msg, "unknown command") ||
		strings.HasPrefix(msg, "ERR Error registering functions") || strings.HasPrefix(msg, "ERR Error compiling function")
}
