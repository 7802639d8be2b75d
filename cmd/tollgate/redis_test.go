package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// parseConn parses args as a command's connection flags.
func parseConn(t *testing.T, args ...string) redisFlags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var rf redisFlags
	rf.register(fs)
	require.NoError(t, fs.Parse(args))
	return rf
}

// The connection flags become the UniversalOptions that pick the right
// client (single node, Cluster, Sentinel); bad ones are usage errors that
// name the flag.
func TestConnectionFlags(t *testing.T) {
	for _, env := range []string{"TOLLGATE_REDIS_ADDR", "TOLLGATE_REDIS_CLUSTER", "TOLLGATE_SENTINEL_MASTER", "TOLLGATE_REDIS_USER",
		"TOLLGATE_REDIS_PASSWORD", "TOLLGATE_SENTINEL_PASSWORD"} {
		t.Setenv(env, "")
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		args    []string
		mode    string
		addrs   []string
		cluster bool
		master  string
		where   string
		err     string // a usage error containing this
	}{
		{name: "default", mode: "single", addrs: []string{"127.0.0.1:6379"}, where: `Redis at "127.0.0.1:6379"`},
		{name: "env address", env: map[string]string{"TOLLGATE_REDIS_ADDR": "redis.internal:6380"}, mode: "single", addrs: []string{"redis.internal:6380"}},
		{name: "one address", args: []string{"-redis", "10.0.0.5:6379"}, mode: "single", addrs: []string{"10.0.0.5:6379"}},
		{name: "two dashes", args: []string{"--redis", "10.0.0.5:6379", "--prefix", "p"}, mode: "single", addrs: []string{"10.0.0.5:6379"}},
		{name: "cluster, one seed", args: []string{"-redis", "n1:7000", "-cluster"}, mode: "cluster", addrs: []string{"n1:7000"}, cluster: true,
			where: `Redis Cluster at "n1:7000"`},
		{name: "cluster, seeds imply it", args: []string{"-redis", "n1:7000, n2:7001,,n3:7002"}, mode: "cluster", addrs: []string{"n1:7000", "n2:7001", "n3:7002"},
			where: `Redis Cluster at "n1:7000,n2:7001,n3:7002"`},
		{name: "cluster from env", env: map[string]string{"TOLLGATE_REDIS_CLUSTER": "true"}, args: []string{"-redis", "n1:7000"}, mode: "cluster", addrs: []string{"n1:7000"}, cluster: true},
		{name: "sentinel", args: []string{"-redis", "s1:26379,s2:26379", "-sentinel-master", "tollgate"}, mode: "sentinel", addrs: []string{"s1:26379", "s2:26379"},
			master: "tollgate", where: `Redis master "tollgate" through Sentinels at "s1:26379,s2:26379"`},
		{name: "sentinel from env", env: map[string]string{"TOLLGATE_SENTINEL_MASTER": "m"}, args: []string{"-redis", "s1:26379"}, mode: "sentinel", addrs: []string{"s1:26379"}, master: "m"},
		{name: "empty address", args: []string{"-redis", " , "}, err: "-redis is empty"},
		{name: "no port", args: []string{"-redis", "localhost"}, err: `-redis address "localhost": want host:port`},
		{name: "bad port", args: []string{"-redis", "localhost:redis"}, err: `port "redis" is not a number`},
		{name: "port out of range", args: []string{"-redis", "localhost:70000"}, err: `port "70000"`},
		{name: "one bad of several", args: []string{"-redis", "n1:7000,n2"}, err: `"n2": want host:port`},
		{name: "cluster and sentinel", args: []string{"-redis", "n1:7000", "-cluster", "-sentinel-master", "m"}, err: "-cluster and -sentinel-master exclude each other"},
		{name: "zero timeout", args: []string{"-redis", "n1:7000", "-timeout", "0s"}, err: "-timeout is 0s; want > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			rf := parseConn(t, tt.args...)
			o, err := rf.options()
			if tt.err != "" {
				require.ErrorIs(t, err, errUsage)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.addrs, o.Addrs)
			assert.Equal(t, tt.cluster, o.IsClusterMode)
			assert.Equal(t, tt.master, o.MasterName)
			assert.Equal(t, tt.mode, rf.mode())
			assert.Equal(t, DefaultTimeout, o.DialTimeout)
			if tt.where != "" {
				assert.Equal(t, tt.where, rf.where())
			}
		})
	}
}

func TestConnectionSecretsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("TOLLGATE_REDIS_PASSWORD", "hunter2")
	t.Setenv("TOLLGATE_SENTINEL_PASSWORD", "s3cret")
	t.Setenv("TOLLGATE_REDIS_USER", "")
	rf := parseConn(t, "-redis", "s1:26379", "-sentinel-master", "m", "-user", "tollgate", "-tls")
	o, err := rf.options()
	require.NoError(t, err)
	assert.Equal(t, "tollgate", o.Username)
	assert.Equal(t, "hunter2", o.Password)
	assert.Equal(t, "s3cret", o.SentinelPassword)
	assert.NotNil(t, o.TLSConfig)
	b, err := json.Marshal(rf.source())
	require.NoError(t, err)
	assert.NotContains(t, string(b), "hunter2", "no secret in the -json source")
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// silentServer returns the address of a listener that accepts connections
// and never answers, as a firewalled or hung Redis does.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// A wrong address fails every command on the store within -timeout, with
// an error naming the address and the cause (exit 1).
func TestWrongAddress(t *testing.T) {
	closed := closedPort(t)
	silent := silentServer(t)
	redisAddr := testenv.RedisAddr()
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"status, closed port", []string{"status", "-redis", closed}, []string{`cannot reach Redis at "` + closed + `"`, "connection refused", "check -redis"}},
		{"advise, closed port", []string{"advise", "-redis", closed, "-json"}, []string{`cannot reach Redis at "` + closed + `"`, "connection refused"}},
		{"unblock, closed port", []string{"unblock", "-redis", closed, "openai/gpt-4o/team-a"}, []string{`cannot reach Redis at "` + closed + `"`}},
		{"status -watch, closed port", []string{"status", "-redis", closed, "-watch", "1s"}, []string{`cannot reach Redis at "` + closed + `"`}},
		{"no answer", []string{"status", "-redis", silent, "-timeout", "300ms"}, []string{`cannot reach Redis at "` + silent + `"`, "no answer within 300ms (-timeout)"}},
		{"sentinels closed", []string{"status", "-redis", closed, "-sentinel-master", "tollgate", "-timeout", "2s"},
			[]string{`cannot reach Redis master "tollgate" through Sentinels at "` + closed + `"`, "check -redis (the Sentinels' addresses) and -sentinel-master"}},
		{"cluster flag on a single node", []string{"status", "-redis", redisAddr, "-cluster"},
			[]string{`cannot reach Redis Cluster at "` + redisAddr + `"`, "it is not a Cluster: drop -cluster"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "single node") {
				testenv.RedisClient(t) // skips without the test Redis
			}
			var out, errOut bytes.Buffer
			// The messages name the timeout that ended each attempt; the
			// minute is a safety net that only fails a command that hangs.
			code := make(chan int, 1)
			go func() { code <- run(context.Background(), tt.args, &out, &errOut) }()
			select {
			case c := <-code:
				assert.Equal(t, exitFailure, c)
			case <-time.After(time.Minute):
				t.Fatal("the command hung past its timeout")
			}
			for _, w := range tt.want {
				assert.Contains(t, errOut.String(), w)
			}
			assert.Empty(t, out.String(), "nothing on stdout")
		})
	}
}

// Bad connection flags are usage errors (exit 2) that name the flag.
func TestConnectionUsageErrors(t *testing.T) {
	for _, cmd := range []string{"status", "advise", "unblock"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "-redis", "localhost", "-timeout", "1s"}
			if cmd == "unblock" {
				args = append(args, "openai/gpt-4o/team-a")
			}
			var out, errOut bytes.Buffer
			assert.Equal(t, exitUsage, run(context.Background(), args, &out, &errOut))
			assert.Contains(t, errOut.String(), `tollgate: usage: -redis address "localhost": want host:port`)
		})
	}
}

// Every command's -h documents the connection flags and the exit
// statuses, with examples.
func TestHelp(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want []string
	}{
		{"status", []string{"usage: tollgate status [flags]", "examples:", "-watch", "-count", "-json", "-classes"}},
		{"advise", []string{"usage: tollgate advise [flags]", "examples:", "-json"}},
		{"unblock", []string{"usage: tollgate unblock [flags] SCOPE", "examples:", "-credential", "-json"}},
	} {
		t.Run(tt.cmd, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, exitOK, run(context.Background(), []string{tt.cmd, "--help"}, &out, &errOut))
			help := errOut.String()
			for _, w := range append(tt.want, "-redis addr[,addr...]", "-cluster", "-sentinel-master name", "-prefix", "-timeout",
				"TOLLGATE_REDIS_PASSWORD", "Exit status: 0 ok, 1 failure", "3 empty") {
				assert.Contains(t, help, w)
			}
		})
	}
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"simulate", "-h"}, &out, &errOut))
	for _, w := range []string{"usage: tollgate simulate [flags]", "-workload file", "-config file", "-plot file", "-class name:rank=N", "-key name:weight=W",
		"-json", "examples:", `"fairness":`} {
		assert.Contains(t, errOut.String(), w)
	}
}
