package redisstore

import (
	"context"
	"flag"
	"os"
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite lua/constants.lua from the Go table")

// TestLuaConstants: lua/constants.lua is what luaConstants generates.
func TestLuaConstants(t *testing.T) {
	want := renderLuaConstants()
	if *update {
		require.NoError(t, os.WriteFile("lua/constants.lua", []byte(want), 0o644))
	}
	got, err := os.ReadFile("lua/constants.lua")
	require.NoError(t, err)
	require.Equal(t, want, string(got), "lua/constants.lua is stale: run go generate ./capacity/redisstore")
}

// TestScriptsPlain: the scripts are plain Lua, run as written: nothing is
// written into them and no loop is unrolled.
func TestScriptsPlain(t *testing.T) {
	entries, err := luaFiles.ReadDir("lua")
	require.NoError(t, err)
	marks := regexp.MustCompile(`-- unroll|\$[A-Z_]{2,}`)
	for _, e := range entries {
		b, err := luaFiles.ReadFile("lua/" + e.Name())
		require.NoError(t, err)
		require.Empty(t, marks.FindAllString(string(b), -1), e.Name())
	}
}

// TestScriptsLoad: Redis compiles every script, and loads the library
// with a function for each, the snapshot's read-only.
func TestScriptsLoad(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	s := current
	for _, sc := range []*script{s.ops, s.renew, s.block, s.snapshot, s.unblock, s.blockCred, s.failure} {
		require.NoError(t, sc.eval.Load(ctx, rdb).Err(), sc.name)
	}
	require.NoError(t, rdb.FunctionLoadReplace(ctx, s.library.source).Err())
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: s.library.name}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	got := map[string][]string{}
	for _, f := range libs[0].Functions {
		got[f.Name] = f.Flags
	}
	want := map[string][]string{}
	for _, name := range scriptNames {
		want[s.library.name+"_"+name] = []string{}
	}
	want[s.library.name+"_snapshot"] = []string{"no-writes"}
	require.Equal(t, want, got)
}
