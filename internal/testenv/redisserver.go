package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// RedisServer is a throwaway redis-server a test owns: no persistence, its
// files in the test's temporary folder, killed when the test ends.
type RedisServer struct {
	Port string
	cmd  *exec.Cmd
}

// StartRedisServer starts a redis-server on port (a free one if empty) with
// extra arguments, and waits until it answers. Without a redis-server
// binary, tb fails when $CI is set (a green CI must not hide a missing
// install step) and is skipped otherwise.
func StartRedisServer(tb testing.TB, port string, args ...string) *RedisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redis-server not found: install Debian's redis-server (make redis does)")
		}
		tb.Skip("redis-server not found")
	}
	auto := port == ""
	for attempt := 1; ; attempt++ {
		if auto {
			port = freePort(tb)
		}
		cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tb.TempDir()}, args...)...)
		require.NoError(tb, cmd.Start())
		r := &RedisServer{Port: port, cmd: cmd}
		if r.answers(20 * time.Second) {
			tb.Cleanup(r.Kill)
			return r
		}
		r.Kill()
		// A free port may be taken by another test's server between the
		// check and the start: try another.
		if !auto || attempt == 3 {
			tb.Fatalf("redis-server did not start on port %s", port)
		}
	}
}

// freePort returns a loopback port free at the moment of asking.
func freePort(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// answers reports whether the server answers within d, and is this
// process (not another test's server that took the port first).
func (r *RedisServer) answers(d time.Duration) bool {
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer rdb.Close()
	mine := "process_id:" + strconv.Itoa(r.cmd.Process.Pid) + "\r\n"
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if info, err := rdb.Info(context.Background(), "server").Result(); err == nil {
			return strings.Contains(info, mine)
		}
	}
	return false
}

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + r.Port }

// Kill stops the server with SIGKILL: nothing is saved. A paused server is
// killed too.
func (r *RedisServer) Kill() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// Pause stops the server with SIGSTOP: it keeps its connections and data
// but answers nothing (as a server stalled by the host does) until Resume.
func (r *RedisServer) Pause() error { return r.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT: it then serves what its
// clients sent meanwhile.
func (r *RedisServer) Resume() error { return r.cmd.Process.Signal(syscall.SIGCONT) }
