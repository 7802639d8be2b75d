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
// abandoned one is not kept forever.
const HalfOpenMemory = 24 * time.Hour

// scripts are the store's Lua scripts, one per operation, each one round
// trip (EVALSHA, falling back to EVAL on NOSCRIPT after a restart or
// failover). A scope script is constants.lua, state.lua, rules.lua and its
// own file, joined as they are: nothing is written into them.
type scripts struct {
	ops, renew, block, snapshot, unblock *redis.Script // scope scripts
	blockCred, failure                   *redis.Script // constants.lua and their own file
	// release is the release script of scripts before 5.2 (nil in later
	// ones, whose releases are operations of ops).
	release *redis.Script
	// readOnlySnapshot: snapshot writes nothing and runs as EVALSHA_RO
	// (scripts 3.2 and later).
	readOnlySnapshot bool
}

// current are the scripts of this version.
var current = func() *scripts {
	s := mustLoadScripts(luaFiles, "lua")
	s.readOnlySnapshot = true
	return s
}()

// loadScripts reads the scripts from dir of files.
func loadScripts(files fs.FS, dir string) (*scripts, error) {
	var firstErr error
	read := func(names ...string) *redis.Script {
		var src []byte
		for _, name := range names {
			b, err := fs.ReadFile(files, path.Join(dir, name))
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("redisstore: script %s: %w", name, err)
			}
			src = append(append(src, b...), '\n')
		}
		return redis.NewScript(string(src))
	}
	src := scriptSources()
	s := &scripts{
		ops:       read(src["ops"]...),
		renew:     read(src["renew"]...),
		block:     read(src["block"]...),
		snapshot:  read(src["snapshot"]...),
		unblock:   read(src["unblock"]...),
		blockCred: read(src["blockcred"]...),
		failure:   read(src["failure"]...),
	}
	if _, err := fs.Stat(files, path.Join(dir, "release.lua")); err == nil {
		s.release = read("constants.lua", "state.lua", "rules.lua", "release.lua")
	}
	return s, firstErr
}

// scriptSources returns the files each script is joined from, by script:
// a scope script is constants.lua, state.lua, rules.lua and its own file.
// (Scripts before 5.2 also have release.lua, a scope script.)
func scriptSources() map[string][]string {
	scope := func(name string) []string {
		return []string{"constants.lua", "state.lua", "rules.lua", name + ".lua"}
	}
	return map[string][]string{
		"ops": scope("ops"), "renew": scope("renew"),
		"block": scope("block"), "snapshot": scope("snapshot"), "unblock": scope("unblock"),
		"blockcred": {"constants.lua", "blockcred.lua"},
		"failure":   {"constants.lua", "failure.lua"},
	}
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
