package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestScriptCost measures what one batch of the reserve/settle script costs
// Redis: 300 batches of 4 reserves (fresh grants) and 4 settles (of the
// previous batch's grants), the shape a busy scope sends. It is a tool, not
// a check, and runs only when asked:
//
//	TOLLGATE_SCRIPT_COST_ADDR=127.0.0.1:6399 go test ./capacity/redisstore -run TestScriptCost -v
//
// prints microseconds per script (Redis's commandstats: noisy on a shared
// machine). For a count that does not vary, run that Redis under callgrind
// and name its process and dump directory:
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/callgrind.out.%p redis-server --port 6399 --save '' &
//	TOLLGATE_SCRIPT_COST_ADDR=127.0.0.1:6399 TOLLGATE_CALLGRIND_PID=<pid> TOLLGATE_CALLGRIND_DIR=/tmp/cg go test ...
//
// which prints the server's instructions per script (callgrind_control
// zeroes the counters before and dumps them after). TOLLGATE_SCRIPT_COST_BATCH
// sets the reserves (and settles) per batch (4); TOLLGATE_SCRIPT_COST_SCRIPT
// names a file holding another rendering of the script to measure instead
// (an experiment: write the rendered script out, edit it, measure both).
func TestScriptCost(t *testing.T) {
	addr := os.Getenv("TOLLGATE_SCRIPT_COST_ADDR")
	if addr == "" {
		t.Skip("set TOLLGATE_SCRIPT_COST_ADDR to measure the script's cost")
	}
	pid, dir := os.Getenv("TOLLGATE_CALLGRIND_PID"), os.Getenv("TOLLGATE_CALLGRIND_DIR")
	ctx := context.Background()
	// A Redis under callgrind is slow: give it time.
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer rdb.Close()
	s, err := New(rdb, Options{Prefix: "cost-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	require.NoError(t, err)
	defer s.Close()
	k := s.keysFor(benchScope)
	p := capacity.OpenAIProfile{}
	d := capacity.Demand{InputTokens: 800, MaxTokens: 256}
	charges := p.Charges(d)
	final := p.Settle(d, charges, capacity.Completed, capacity.Usage{InputTokens: 790, OutputTokens: 120})

	var granted []capacity.Lease
	batch := func(n int) {
		ops := make([]*op, 0, 2*n)
		reqs := make([]capacity.Request, n)
		for i := range n {
			reqs[i] = capacity.Request{Scope: benchScope, Limits: benchLimits, Call: fmt.Sprintf("c%d-%d", len(granted), i), Attempt: 1, Charges: charges, TTL: time.Minute}
			ops = append(ops, s.reserveOp(ctx, k, reqs[i]))
		}
		for _, le := range granted[max(0, len(granted)-n):] {
			ops = append(ops, s.settleOp(ctx, k, le, final))
		}
		runOps(s, k, ops)
		for i, req := range reqs {
			res, _, err := parseReserve(ops[i].res, ops[i].h, req)
			require.NoError(t, err)
			require.True(t, res.Granted)
			granted = append(granted, res.Lease)
		}
	}
	if f := os.Getenv("TOLLGATE_SCRIPT_COST_SCRIPT"); f != "" {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		old := scriptOps
		scriptOps = redis.NewScript(string(b))
		defer func() { scriptOps = old }()
	}
	n := 4
	if v := os.Getenv("TOLLGATE_SCRIPT_COST_BATCH"); v != "" {
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	for range 50 { // warm: state, leases and the script cache
		batch(n)
	}
	const runs = 300
	calls0, usec0 := evalStats(t, rdb)
	if pid != "" {
		require.NoError(t, exec.Command("callgrind_control", "-z", pid).Run())
	}
	for range runs {
		batch(n)
	}
	if pid != "" {
		require.NoError(t, exec.Command("callgrind_control", "-d", pid).Run())
		t.Logf("%.0f instructions of redis-server per script (%d reserves + %d settles)", callgrindTotal(t, dir)/runs, n, n)
	}
	calls1, usec1 := evalStats(t, rdb)
	t.Logf("%.1f µs per script over %.0f scripts (commandstats)", (usec1-usec0)/(calls1-calls0), calls1-calls0)
}

// evalStats returns the calls and microseconds Redis has counted for
// EVALSHA and EVAL.
func evalStats(t *testing.T, rdb *redis.Client) (calls, usec float64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += f
			case "usec":
				usec += f
			}
		}
	}
	return calls, usec
}

// callgrindTotal reads the instruction total of the newest callgrind dump in
// dir.
func callgrindTotal(t *testing.T, dir string) float64 {
	files, err := filepath.Glob(filepath.Join(dir, "callgrind.out.*"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no callgrind dump in %q", dir)
	slices.SortFunc(files, func(a, b string) int {
		sa, _ := os.Stat(a)
		sb, _ := os.Stat(b)
		return sa.ModTime().Compare(sb.ModTime())
	})
	data, err := os.ReadFile(files[len(files)-1])
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "summary:"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return f
		}
		if v, ok := strings.CutPrefix(line, "totals:"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no totals in %s", files[len(files)-1])
	return 0
}
