package redisstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// slack is added to every key's TTL: a key outlives the moment it stops
// mattering by this much, so clock jitter never drops live state.
const slack = time.Second

// LoweredLimitMemory is how long a provider-reported limit below the
// configured one is remembered after the last report that said so
// (tuning.LoweredLimitMemory).
const LoweredLimitMemory = tuning.LoweredLimitMemory

// HalfOpenMemory is how long a half-open block whose probe nobody claims is
// kept after its half-open time: it ends with a probe, not on its own, but an
// abandoned one is not kept forever (tuning.HalfOpenMemory).
const HalfOpenMemory = tuning.HalfOpenMemory

// scripts are the store's Lua scripts, one per operation, each one round
// trip: a function of their library (FCALL; see library), or the script
// itself (EVALSHA, falling back to EVAL on NOSCRIPT after a restart or
// failover). A scope script is eval.lua, globals.lua, constants.lua,
// state.lua, rules.lua and its own file, joined as they are: nothing is
// written into them. The library is library.lua, the same files, every
// script's own file and register.lua, after a two-line header that names
// it.
type scripts struct {
	ops, renew, block, snapshot, unblock *script // scope scripts
	blockCred, failure                   *script // no state: constants.lua and their own file
	// release is the release script of scripts before 5.2 (nil in later
	// ones, whose releases are operations of ops).
	release *script
	// library is the scripts as functions (nil in scripts before 5.3).
	library *library
	// readOnlySnapshot: snapshot writes nothing and runs as EVALSHA_RO
	// (scripts 3.2 and later) or FCALL_RO.
	readOnlySnapshot bool
}

// script is one script: its name, the function's in the library, and its
// source for EVALSHA.
type script struct {
	name string
	eval *redis.Script
}

// current are the scripts of this version.
var current = func() *scripts {
	s := mustLoadScripts(luaFiles, "lua")
	s.readOnlySnapshot = true
	return s
}()

// loadScripts reads the scripts from dir of files: this version's, or an
// older one's (tests of a rolling deploy), which has no eval.lua or
// library.lua.
func loadScripts(files fs.FS, dir string) (*scripts, error) {
	var firstErr error
	join := func(names ...string) string {
		var src []byte
		for _, name := range names {
			b, err := fs.ReadFile(files, path.Join(dir, name))
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("redisstore: script %s: %w", name, err)
			}
			src = append(append(src, b...), '\n')
		}
		return string(src)
	}
	_, err := fs.Stat(files, path.Join(dir, "library.lua"))
	functions := err == nil
	src := scriptSources()
	read := func(name string) *script {
		files := src[name]
		if !functions {
			files = files[2:] // no eval.lua or globals.lua
		}
		return &script{name: name, eval: redis.NewScript(join(files...))}
	}
	s := &scripts{
		ops: read("ops"), renew: read("renew"), block: read("block"), snapshot: read("snapshot"),
		unblock: read("unblock"), blockCred: read("blockcred"), failure: read("failure"),
	}
	if functions {
		s.library = newLibrary(join(librarySources()...))
	}
	if _, err := fs.Stat(files, path.Join(dir, "release.lua")); err == nil {
		s.release = &script{name: "release", eval: redis.NewScript(join("constants.lua", "state.lua", "rules.lua", "release.lua"))}
	}
	return s, firstErr
}

// scriptNames are the scripts, in the order the library holds them.
var scriptNames = []string{"ops", "renew", "block", "snapshot", "unblock", "blockcred", "failure"}

// scriptSources returns the files each script is joined from, by script:
// a scope script is eval.lua, globals.lua, constants.lua, state.lua,
// rules.lua and its own file; blockcred and failure are eval.lua,
// globals.lua, constants.lua and their own. (Scripts before 5.3 have no
// eval.lua or globals.lua; those before 5.2 also release.lua, a scope
// script.)
func scriptSources() map[string][]string {
	src := map[string][]string{}
	for _, name := range scriptNames {
		switch name {
		case "blockcred", "failure":
			src[name] = []string{"eval.lua", "globals.lua", "constants.lua", name + ".lua"}
		default:
			src[name] = []string{"eval.lua", "globals.lua", "constants.lua", "state.lua", "rules.lua", name + ".lua"}
		}
	}
	return src
}

// librarySources returns the files the library is joined from.
func librarySources() []string {
	files := []string{"library.lua", "globals.lua", "constants.lua", "state.lua", "rules.lua"}
	for _, name := range scriptNames {
		files = append(files, name+".lua")
	}
	return append(files, "register.lua")
}

// mustLoadScripts loads the embedded scripts; they are part of the binary,
// so a failure is a build defect caught by every test.
func mustLoadScripts(files fs.FS, dir string) *scripts {
	s, err := loadScripts(files, dir)
	if err != nil {
		panic(err)
	}
	return s
}
