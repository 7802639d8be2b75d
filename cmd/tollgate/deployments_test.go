package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// blockScope puts state and a cooldown on sc in the store on rdb, on the
// scripts.
func blockScope(t *testing.T, rdb redis.UniversalClient, prefix string, sc capacity.Scope) {
	t.Helper()
	blockScopeOn(t, rdb, redisstore.EngineScripts, prefix, sc)
}

// blockScopeOn is blockScope on engine.
func blockScopeOn(t *testing.T, rdb redis.UniversalClient, engine redisstore.Engine, prefix string, sc capacity.Scope) {
	t.Helper()
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	defer store.Close()
	ctx := context.Background()
	var c capacity.Charges
	c[capacity.Requests] = 1
	_, err = store.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1}, Call: "c", Attempt: 1, Charges: c})
	require.NoError(t, err)
	require.NoError(t, store.Block(ctx, sc, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Minute)}))
}

// statusAndUnblock runs status -json and unblock -json with conn and
// checks that they see and lift sc's block, on the scripts.
func statusAndUnblock(t *testing.T, conn []string, sc capacity.Scope, mode string) {
	t.Helper()
	statusAndUnblockOn(t, conn, sc, mode, redisstore.EngineScripts)
}

// statusAndUnblockOn is statusAndUnblock for a scope engine holds.
func statusAndUnblockOn(t *testing.T, conn []string, sc capacity.Scope, mode string, engine redisstore.Engine) {
	t.Helper()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(ctx, append(append([]string{"status"}, conn...), "-json"), &out, &errOut), errOut.String())
	var rep statusReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, mode, rep.Source.Mode)
	require.Len(t, rep.Scopes, 1)
	assert.Equal(t, sc.Key(), rep.Scopes[0].Scope)
	assert.Equal(t, engine.String(), rep.Scopes[0].Engine)
	require.Len(t, rep.Scopes[0].Blocks, 1)

	out.Reset()
	require.Equal(t, exitOK, run(ctx, append(append([]string{"unblock"}, conn...), "-json", sc.Key()), &out, &errOut), errOut.String())
	var res unblockResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Len(t, res.Lifted, 1)
	assert.True(t, strings.HasPrefix(res.Lifted[0], "cooldown"))
}

// TestStatusOnTheRecordsEngine: status names the engine that holds a
// scope, and status and unblock (whose store starts new scopes on the
// scripts) see and lift a block on a scope the records engine holds.
func TestStatusOnTheRecordsEngine(t *testing.T) {
	rdb := testenv.RedisClient(t)
	prefix := fmt.Sprintf("status-engine-%d", time.Now().UnixNano())
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	blockScopeOn(t, rdb, redisstore.EngineRecords, prefix, sc)
	conn := []string{"-redis", rdb.Options().Addr, "-prefix", prefix}
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), append([]string{"status"}, conn...), &out, &errOut), errOut.String())
	var row []string // the scope's row of the first table
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); row == nil && len(f) > 1 && f[0] == sc.Key() {
			row = f
		}
	}
	require.NotNil(t, row, "no row for %s in:\n%s", sc.Key(), out.String())
	assert.Equal(t, "records", row[1], "the ENGINE column")
	statusAndUnblockOn(t, conn, sc, "single", redisstore.EngineRecords)
}

// status and unblock on a Redis Cluster (a one-node cluster owning every
// slot), with -cluster.
func TestStatusOnACluster(t *testing.T) {
	srv := testenv.StartRedisServer(t, "", "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.Eventually(t, func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 15*time.Second, 50*time.Millisecond, "cluster never became ok")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	defer cc.Close()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-c"}
	blockScope(t, cc, "cl", sc)
	statusAndUnblock(t, []string{"-redis", srv.Addr(), "-cluster", "-prefix", "cl"}, sc, "cluster")
}

// status and unblock through a Sentinel to the master it monitors, with
// -sentinel-master.
func TestStatusThroughSentinel(t *testing.T) {
	master := testenv.StartRedisServer(t, "")
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor tollgate 127.0.0.1 %s 1\n", port, dir, master.Port)), 0o600))
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "StartRedisServer found it")
	cmd := exec.Command(bin, conf, "--sentinel")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sentinel := "127.0.0.1:" + strconv.Itoa(port)
	s := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer s.Close()
	require.Eventually(t, func() bool { return s.GetMasterAddrByName(context.Background(), "tollgate").Err() == nil },
		10*time.Second, 20*time.Millisecond, "sentinel did not start")

	m := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer m.Close()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-s"}
	blockScope(t, m, "se", sc)
	statusAndUnblock(t, []string{"-redis", sentinel, "-sentinel-master", "tollgate", "-prefix", "se"}, sc, "sentinel")

	var out, errOut bytes.Buffer
	assert.Equal(t, exitFailure, run(context.Background(), []string{"status", "-redis", sentinel, "-sentinel-master", "nope", "-timeout", "2s"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `cannot reach Redis master "nope" through Sentinels at "`+sentinel+`"`)
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
