package testenv

import (
	"context"
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
	"github.com/stretchr/testify/require"
)

// RedisCluster is a throwaway Redis Cluster a test owns: masters only (no
// replicas), on loopback, no persistence, every node killed when the test
// ends.
type RedisCluster struct {
	Nodes []*RedisServer
}

// StartRedisCluster starts masters redis-server processes in cluster mode on
// free loopback ports, joins them with redis-cli --cluster create (the 16384
// slots split evenly, no replicas), and returns once every node reports
// cluster_state:ok, knows every other node and sees every slot assigned.
// Without redis-server or redis-cli, tb fails when $CI is set and is skipped
// otherwise, as in StartRedisServer.
func StartRedisCluster(tb testing.TB, masters int) *RedisCluster {
	tb.Helper()
	cli := lookRedisTool(tb, "redis-cli")
	c := &RedisCluster{}
	for range masters {
		// The cluster bus gets a port of its own: the default, port+10000,
		// may be taken or past 65535.
		dir := tb.TempDir()
		c.Nodes = append(c.Nodes, StartRedisServer(tb, "", "--cluster-enabled", "yes",
			"--cluster-port", freeLoopbackPort(tb), "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		var info string
		ok := assertEventually(10*time.Second, func() bool {
			var err error
			info, err = rdb.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_slots_assigned:16384") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)+"\r\n")
		})
		_ = rdb.Close()
		if !ok {
			tb.Fatalf("node %s never saw the whole cluster:\n%s", n.Addr(), info)
		}
	}
	return c
}

// Addrs returns the nodes' host:port addresses.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Client returns a *redis.ClusterClient on the cluster, closed when tb ends.
func (c *RedisCluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartRedisSentinel starts a Redis Sentinel (redis-server --sentinel) on a
// free loopback port that monitors the master at masterAddr under name with
// a quorum of 1, considers it down after downAfter without an answer, and
// fails over to one of its replicas. It returns once the sentinel answers;
// it is killed when tb ends. Without redis-server, tb fails or is skipped as
// in StartRedisServer.
func StartRedisSentinel(tb testing.TB, name, masterAddr string, downAfter time.Duration) *RedisServer {
	tb.Helper()
	bin := lookRedisTool(tb, "redis-server")
	host, mport, err := net.SplitHostPort(masterAddr)
	require.NoError(tb, err)
	port := freeLoopbackPort(tb)
	dir := tb.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // the sentinel rewrites it
	require.NoError(tb, os.WriteFile(conf, []byte(fmt.Sprintf(`port %s
bind 127.0.0.1
dir %s
sentinel monitor %s %s %s 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
`, port, dir, name, host, mport, name, downAfter.Milliseconds(), name)), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel")
	require.NoError(tb, cmd.Start())
	r := &RedisServer{Port: port, cmd: cmd}
	tb.Cleanup(r.Kill)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rdb.Close()
	require.Eventually(tb, func() bool { return rdb.Ping(context.Background()).Err() == nil }, 10*time.Second, 10*time.Millisecond, "redis-sentinel did not start")
	return r
}

// lookRedisTool returns the path of a Redis binary, or fails (with $CI) or
// skips tb without it.
func lookRedisTool(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s not found: install Debian's redis-server (make redis does)", name)
		}
		tb.Skip(name + " not found")
	}
	return bin
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 when it was asked.
func freeLoopbackPort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// assertEventually reports whether cond became true within wait, polling.
func assertEventually(wait time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(wait)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
