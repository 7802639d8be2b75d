package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// Environment of the scale benchmarks.
const (
	// scaleEnvSeconds is the measured wall time in seconds (default 10).
	scaleEnvSeconds = "TOLLGATE_SCALE_SECONDS"
	// scaleEnvProcs is the number of child processes (default 8 for
	// BenchmarkHotScope, 4 for BenchmarkManyScopes).
	scaleEnvProcs = "TOLLGATE_SCALE_PROCS"
	// scaleEnvCallers is the number of concurrent callers over all
	// processes (default 1000).
	scaleEnvCallers = "TOLLGATE_SCALE_CALLERS"
	// scaleEnvScopes is BenchmarkManyScopes' number of scopes (default 1000).
	scaleEnvScopes = "TOLLGATE_SCALE_SCOPES"
	// scaleEnvServer, if set, is the Redis to measure on (host:port);
	// else the benchmark starts a redis-server of its own, so the server's
	// counters see only its load; else TOLLGATE_REDIS_ADDR.
	scaleEnvServer = "TOLLGATE_SCALE_ADDR"
)

// BenchmarkHotScope measures one hot scope at scale against a real
// redis-server, once whatever b.N (run it with -benchtime 1x): 1,000 callers
// (TOLLGATE_SCALE_CALLERS) spread over 8 child processes
// (TOLLGATE_SCALE_PROCS), each process with its own Store on one shared
// prefix, share a budget of 200 grants/s (RequestsPerMinute 12,000, every
// other limit at its default: the default bucket, and the default safety
// margin, which grants 95 % of the rate: 190/s). A second row runs the same
// with a one-second bucket (Burst). Each caller loops for 10 s
// (TOLLGATE_SCALE_SECONDS):
// capacity.Wait with Book, hold 20 ms, Settle with the same charges. A
// third row runs at the default bucket with calls that reserve 1,000 tokens
// and settle with 250 (tokens per minute 60M, so requests still bind), as
// calls that reserve their max_tokens do: every settle refunds. A fourth
// has calls reserve 250 tokens and settle 300, as calls whose reservation
// was learned from what settles (learn) do when they use more: every
// settle is a debt. A fifth spreads the callers over 4 fairness keys
// (tenants) of equal weight. It asserts nothing about time; it reports,
// over the window:
//
//   - grants/s: grants in the window / its length; grants/s-min and -max:
//     the fewest and most grants in a whole one-second window after the
//     first (the first holds the burst);
//   - reserve-p50-us, reserve-p99-us: the duration of each Reserve call,
//     time inside Store.Reserve (not time waiting); steady-p99-us of the
//     calls started after the first second, later-p99-us from the third
//     second on (once every caller has arrived);
//   - claim-late-1st-p99-us, claim-late-later-p99-us: how long after its
//     ticket came due (on the caller's clock: the answer's time plus
//     RetryAt.Sub(Now)) a call that held one got its grant, for tickets due
//     in the first second and from the third on (the log adds the second,
//     and how long the claim's Reserve took);
//   - reserves/grant, settles/grant: Reserve and Settle calls per grant;
//     rt/grant: commands the clients sent per grant (every command is a
//     round trip: batches of reserves and settles share a script call);
//     reserve-rt/grant and settle-rt/grant split the script calls among
//     the operations they carried;
//   - cmds/wait/s: Redis commands per waiting call per second: every
//     command the server ran in the window (INFO commandstats delta, the
//     commands scripts call included) / (average number of callers inside
//     capacity.Wait × seconds);
//   - overhead-ops/wait/s: the waiting overhead, Reserve calls beyond each
//     admitted call's booking reserve and claiming reserve (wake-ups, "ticket
//     not due" retries), per waiting call per second; overhead-rt/wait/s is
//     the same in client commands (those reserves' share of the script calls,
//     plus every command that is not a script call: subscriptions);
//   - redis-cpu-busy: the server's CPU (used_cpu_sys + used_cpu_user delta)
//     / wall time; slowest-cmd-us: the longest command the server ran in
//     the window (SLOWLOG; a script call with what it called);
//     slowest-later-us: the same from the window's third second on, once
//     every caller has booked;
//   - clients-cpu-cores: the CPU (user and system) the child processes
//     used over the window, in cores;
//   - shutdown-slowest-us and shutdown-redis-ms: the longest command, and
//     the commands of 1 ms or more in all, after the window, when every
//     waiting caller is cancelled at once and releases what it booked.
func BenchmarkHotScope(b *testing.B) {
	if testing.Short() {
		b.Skip("a multi-second multi-process run")
	}
	for _, c := range scaleBursts {
		b.Run(c.name, func(b *testing.B) { benchmarkHotScope(b, c.burst, scaleHotShape{}) })
	}
	b.Run("burst=default,settle=refund", func(b *testing.B) { benchmarkHotScope(b, 0, scaleHotShape{settle: scaleSettleRefund}) })
	b.Run("burst=default,settle=debt", func(b *testing.B) { benchmarkHotScope(b, 0, scaleHotShape{settle: scaleSettleDebt}) })
	b.Run("burst=default,tenants=4", func(b *testing.B) { benchmarkHotScope(b, 0, scaleHotShape{tenants: 4}) })
	b.Run("burst=default,hold=4s,reports", func(b *testing.B) { benchmarkHotScope(b, 0, scaleHotShape{reportHold: 4 * time.Second}) })
}

// scaleHotShape is what a row of BenchmarkHotScope changes in its calls:
// settle, calls that reserve tokens and settle with fewer or more
// (scaleSettleCharges; "": a request each, settled as reserved); tenants,
// callers spread over that many fairness keys of equal weight; reportHold,
// calls held that long (about 800 in flight) whose answers each report
// rate-limit headers, as OpenAI's do (scaleReportObs; 0: held scaleHold,
// no reports), with twice the callers unless TOLLGATE_SCALE_CALLERS says
// (the first second's burst takes 1,000, and they hold it for that long).
type scaleHotShape struct {
	settle     string
	tenants    int
	reportHold time.Duration
}

// scaleBursts are the buckets the scale benchmarks run at: the default
// users get, and one second.
var scaleBursts = []struct {
	name  string
	burst time.Duration
}{{"burst=default", 0}, {"burst=1s", time.Second}}

// benchmarkHotScope is BenchmarkHotScope with the hot scope's Limits.Burst
// set to burst (zero: the default) and its calls of shape.
func benchmarkHotScope(b *testing.B, burst time.Duration, shape scaleHotShape) {
	run := scaleSetup(b, "hot", 8)
	run.burst, run.shape = burst, shape
	if shape.reportHold > 0 && os.Getenv(scaleEnvCallers) == "" {
		run.callers *= 2
	}
	reps, srv := run.run(b, 0)
	var (
		casCommits, casConflicts, reloads                       int64
		grants, extra, waitNS, cmds, scripts, reserves, settles int64
		clientCPU                                               int64
		lat, steady, later, at                                  []int64
		claims                                                  []scaleClaim
		reasons                                                 = map[string]int64{}
	)
	for _, r := range reps {
		grants += int64(len(r.Grants))
		casCommits += r.CASCommits
		casConflicts += r.CASConflicts
		reloads += r.Reloads
		at = append(at, r.Grants...)
		claims = append(claims, r.Claims...)
		lat = append(lat, r.ReserveNS...)
		steady = append(steady, r.SteadyNS...)
		later = append(later, r.LaterNS...)
		extra += r.Extra
		waitNS += r.WaitNS
		cmds += r.Commands
		scripts += r.Scripts
		reserves += r.Reserves
		settles += r.Settles
		clientCPU += r.CPUNS
		for k, v := range r.Reasons {
			reasons[k] += v
		}
	}
	if grants == 0 {
		b.Fatal("no grants")
	}
	secs := run.window.Seconds()
	perSec := scaleWindows(at, run.start, run.window)
	lo, hi := scaleMinMax(perSec[1:])
	byPhase := scaleClaimsByPhase(claims, run.start)
	ops := reserves + settles
	waiting := float64(waitNS) / 1e9 / secs // average callers inside Wait
	g := float64(grants)
	f := map[string]float64{
		"grants/s":                g / secs,
		"grants/s-min":            float64(lo),
		"grants/s-max":            float64(hi),
		"reserve-p50-us":          scalePercentile(lat, 50) / 1e3,
		"reserve-p99-us":          scalePercentile(lat, 99) / 1e3,
		"steady-p99-us":           scalePercentile(steady, 99) / 1e3,
		"later-p99-us":            scalePercentile(later, 99) / 1e3,
		"claim-late-1st-p99-us":   scalePercentile(byPhase[0].late, 99) / 1e3,
		"claim-late-later-p99-us": scalePercentile(byPhase[2].late, 99) / 1e3,
		"reserves/grant":          float64(reserves) / g,
		"settles/grant":           float64(settles) / g,
		"rt/grant":                float64(cmds) / g,
		"reserve-rt/grant":        float64(scripts) * float64(reserves) / float64(ops) / g,
		"settle-rt/grant":         float64(scripts) * float64(settles) / float64(ops) / g,
		"cmds/wait/s":             float64(srv.commands) / (waiting * secs),
		"overhead-ops/wait/s":     float64(extra) / (waiting * secs),
		"overhead-rt/wait/s":      (float64(scripts)*float64(extra)/float64(ops) + float64(cmds-scripts)) / (waiting * secs),
		"redis-cpu-busy":          srv.cpu / secs,
		"clients-cpu-cores":       float64(clientCPU) / 1e9 / secs,
		"slowest-cmd-us":          float64(srv.slowest.Microseconds()),
		"slowest-later-us":        float64(srv.slowestLater.Microseconds()),
		"shutdown-slowest-us":     float64(srv.shutdown.longest.Microseconds()),
		"shutdown-redis-ms":       float64(srv.shutdown.total.Milliseconds()),
	}
	for k, v := range f {
		b.ReportMetric(v, k)
	}
	settle := "settle what was reserved"
	if c, ok := scaleSettleCharges[shape.settle]; ok {
		settle = fmt.Sprintf("reserve %d tokens and settle %d", c[0][capacity.Tokens], c[1][capacity.Tokens])
	}
	if shape.tenants > 0 {
		settle += fmt.Sprintf(", over %d fairness keys", shape.tenants)
	}
	hold := scaleHold
	if shape.reportHold > 0 {
		hold, settle = shape.reportHold, settle+", then report the answer's headers"
	}
	b.Logf("HotScope (%s): %d processes × %d callers (%d in all), 200 grants/s budget with %s, hold %v, %s, %.0f s on %s",
		scaleStoreName(b), run.procs, run.callers/run.procs, run.callers, scaleBucket(burst), hold, settle, secs, run.addr)
	b.Logf("  grants: %d = %.1f/s; per 1-s window %v (min %d, max %d after the burst window)", grants, g/secs, perSec, lo, hi)
	b.Logf("  Reserve latency (inside Store.Reserve, %d calls): p50 %.0f µs, p99 %.0f µs; after the first second (every caller arriving at once): p99 %.0f µs; from the third second on: p99 %.0f µs",
		len(lat), f["reserve-p50-us"], f["reserve-p99-us"], f["steady-p99-us"], f["later-p99-us"])
	b.Logf("  claims of a ticket (grants of calls that held one), from when it came due to the grant: %v", byPhase)
	b.Logf("  per grant: %.2f reserves (%.2f beyond booking+claim), %.2f settles; %.2f client round trips (%.2f script calls: %.2f for reserves, %.2f for settles; %.1f operations per script call)",
		f["reserves/grant"], float64(extra)/g, f["settles/grant"], f["rt/grant"], float64(scripts)/g, f["reserve-rt/grant"], f["settle-rt/grant"], float64(ops)/float64(scripts))
	b.Logf("  denials: %v", scaleSorted(reasons))
	b.Logf("  waiting callers: %.0f on average; server commands %d (%s): %.3f per waiting call per second; waiting overhead %.3f reserves = %.3f round trips per waiting call per second",
		waiting, srv.commands, srv.top, f["cmds/wait/s"], f["overhead-ops/wait/s"], f["overhead-rt/wait/s"])
	b.Logf("  Redis CPU busy: %.1f%% of one core; longest command %v (%s, in second %d of the window; loading the scripts, compiling them: %v); the longest from the third second on: %v",
		100*f["redis-cpu-busy"], srv.slowest, srv.slowName, int(srv.slowAt/time.Second)+1, srv.compile, srv.slowestLater)
	b.Logf("  after the window, every waiting caller cancelled (releasing its ticket): %v", srv.shutdown)
	b.Logf("  the %d client processes' CPU over the window: %.2f cores (the machine has %d)", run.procs, f["clients-cpu-cores"], runtime.NumCPU())
	if casCommits > 0 {
		b.Logf("  writes of the compare-and-set prototype or the records engine: %d applied, %d found another version (%.1f%%); %d copies read whole",
			casCommits, casConflicts, 100*float64(casConflicts)/float64(casCommits+casConflicts), reloads)
	}
}

// BenchmarkManyScopes measures many scopes at once against a real
// redis-server, once whatever b.N (run it with -benchtime 1x): 1,000 scopes
// (TOLLGATE_SCALE_SCOPES: 50 credentials × 20 limit groups), each allowing
// 100 calls/s (so that the store, not the budget, bounds the rate) and 4 in
// flight, at the default bucket and with a one-second one, driven by 4 child
// processes (TOLLGATE_SCALE_PROCS) of 250 goroutines each
// (TOLLGATE_SCALE_CALLERS over all, default 1000). Every process drives every
// scope: each goroutine cycles over its share, reserving (no booking; a
// denied scope is skipped) and settling at once, for 10 s
// (TOLLGATE_SCALE_SECONDS). It reports admitted calls/s, denials/s, the
// Reserve latency, round trips per admitted call, the server's CPU busy
// fraction, the clients' CPU, the CPU each admitted call cost the clients
// and Redis (clients-cpu-us/admitted, redis-cpu-us/admitted: on a machine
// they share, the rate is what their sum allows) and Redis memory per
// scope: used_memory after the run (clients gone) less before, / scopes,
// and the MEMORY USAGE of every key of the prefix / scopes.
func BenchmarkManyScopes(b *testing.B) {
	if testing.Short() {
		b.Skip("a multi-second multi-process run")
	}
	for _, c := range scaleBursts {
		b.Run(c.name, func(b *testing.B) { benchmarkManyScopes(b, c.burst) })
	}
}

// benchmarkManyScopes is BenchmarkManyScopes with each scope's Limits.Burst
// set to burst (zero: the default).
func benchmarkManyScopes(b *testing.B, burst time.Duration) {
	run := scaleSetup(b, "many", 4)
	run.burst = burst
	scopes := scaleEnvInt(b, scaleEnvScopes, 1000)
	reps, srv := run.run(b, scopes)
	var admitted, denied, cmds, scripts, reserves, settles int64
	var writes, refused, reloads, clientCPU int64
	var lat []int64
	for _, r := range reps {
		writes += r.CASCommits
		refused += r.CASConflicts
		reloads += r.Reloads
		clientCPU += r.CPUNS
		admitted += r.Admitted
		denied += r.Denied
		cmds += r.Commands
		scripts += r.Scripts
		reserves += r.Reserves
		settles += r.Settles
		lat = append(lat, r.ReserveNS...)
	}
	if admitted == 0 {
		b.Fatal("no calls admitted")
	}
	secs := run.window.Seconds()
	keys, keyBytes, one := scaleKeyMemory(b, run.rdb, run.prefix)
	f := map[string]float64{
		"admitted/s":          float64(admitted) / secs,
		"denied/s":            float64(denied) / secs,
		"reserve-p50-us":      scalePercentile(lat, 50) / 1e3,
		"reserve-p99-us":      scalePercentile(lat, 99) / 1e3,
		"rt/admitted":         float64(cmds) / float64(admitted),
		"redis-cpu-busy":      srv.cpu / secs,
		"used-memory-B/scope": float64(srv.memory) / float64(scopes),
		"key-memory-B/scope":  float64(keyBytes) / float64(scopes),
		"clients-cpu-cores":   float64(clientCPU) / 1e9 / secs,
		// What an admitted call costs the machine, whatever its speed that
		// minute: the clients' CPU and Redis's.
		"clients-cpu-us/admitted": float64(clientCPU) / 1e3 / float64(admitted),
		"redis-cpu-us/admitted":   srv.cpu * 1e6 / float64(admitted),
	}
	for k, v := range f {
		b.ReportMetric(v, k)
	}
	b.Logf("ManyScopes (%s): %d scopes, %d processes × %d goroutines, 100 calls/s per scope with %s, %.0f s on %s",
		scaleStoreName(b), scopes, run.procs, run.callers/run.procs, scaleBucket(burst), secs, run.addr)
	b.Logf("  admitted %d = %.0f/s, denied %.0f/s; Reserve p50 %.0f µs, p99 %.0f µs; %.2f client round trips per admitted call (%.2f script calls, %.1f operations each)",
		admitted, f["admitted/s"], f["denied/s"], f["reserve-p50-us"], f["reserve-p99-us"], f["rt/admitted"], float64(scripts)/float64(admitted), float64(reserves+settles)/float64(scripts))
	b.Logf("  Redis CPU busy %.1f%% of one core (%.1f µs per admitted call); server commands %d (%s)",
		100*f["redis-cpu-busy"], f["redis-cpu-us/admitted"], srv.commands, srv.top)
	b.Logf("  the %d client processes' CPU over the window: %.2f cores (the machine has %d; %.1f µs per admitted call)",
		run.procs, f["clients-cpu-cores"], runtime.NumCPU(), f["clients-cpu-us/admitted"])
	if writes > 0 {
		b.Logf("  per admitted call: %.2f writes applied, %.2f refused (another worker wrote first), %.2f other script calls (reads); %d copies read whole",
			float64(writes)/float64(admitted), float64(refused)/float64(admitted), float64(scripts-writes-refused)/float64(admitted), reloads)
	}
	b.Logf("  memory: used_memory +%d B = %.0f B per scope; %d keys of the prefix hold %d B (MEMORY USAGE) = %.0f B per scope; one scope: %s",
		srv.memory, f["used-memory-B/scope"], keys, keyBytes, f["key-memory-B/scope"], one)
}

// scaleRun is one scenario: its processes, callers and window.
type scaleRun struct {
	role           string
	addr, prefix   string
	rdb            *redis.Client
	procs, callers int
	burst          time.Duration // the hot scope's Limits.Burst; zero: the default
	shape          scaleHotShape // the hot scope's calls
	// during, if set, runs in this process over the window, while the
	// children run: [start, end).
	during func(start, end time.Time)
	start  time.Time
	window time.Duration
}

// scaleServerFigures are the server's counters over the window.
type scaleServerFigures struct {
	commands int64   // every command run, scripts' commands included
	top      string  // the most frequent commands
	cpu      float64 // CPU seconds
	memory   int64   // used_memory after the run (children gone) less before
	// slowest is the longest command the server ran in the window (SLOWLOG:
	// a script call counts as one command, with what it called), and
	// slowName its name.
	slowest  time.Duration
	slowName string
	// slowAt is when the slowest ran, from the window's start (the slow
	// log keeps whole seconds), and slowestLater the longest command that
	// ran from the window's third second on, when every caller has booked.
	slowAt       time.Duration
	slowestLater time.Duration
	compile      time.Duration // the longest EVAL: a script compiled on its first run
	// shutdown is the slow log of the children's end, when every waiting
	// caller is cancelled and releases what it booked.
	shutdown scaleSlowlog
}

// scaleSlowlog sums slow-log entries (commands of 1 ms or more).
type scaleSlowlog struct {
	n, over5ms int
	longest    time.Duration
	total      time.Duration
}

func (l scaleSlowlog) String() string {
	return fmt.Sprintf("%d commands of 1 ms or more (%d over 5 ms), the longest %v, %v in all", l.n, l.over5ms, l.longest, l.total)
}

// scaleSetup reads the environment and returns a run on a server.
func scaleSetup(b *testing.B, role string, procs int) *scaleRun {
	b.Helper()
	addr := scaleAddr(b)
	// Patient: the server's counters are read while the children load it
	// (with 32 processes on 2 cores, a reply can take seconds).
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		b.Skip("no Redis at " + addr)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	r := &scaleRun{
		role: role, addr: addr, rdb: rdb, prefix: "tgscale-" + hex.EncodeToString(id[:]),
		procs:   scaleEnvInt(b, scaleEnvProcs, procs),
		callers: scaleEnvInt(b, scaleEnvCallers, 1000),
		window:  time.Duration(scaleEnvInt(b, scaleEnvSeconds, 10)) * time.Second,
	}
	b.Cleanup(func() { scaleDeleteKeys(rdb, r.prefix) })
	return r
}

// run starts the children, takes the server's counters at the window's
// start and end, and returns the children's reports.
func (r *scaleRun) run(b *testing.B, scopes int) ([]scaleReport, scaleServerFigures) {
	b.Helper()
	ctx := context.Background()
	mem0 := scaleInfoInt(b, r.rdb, "memory", "used_memory")
	r.start = time.Now().Add(time.Second + time.Duration(r.procs)*50*time.Millisecond)
	end := r.start.Add(r.window)
	dir := b.TempDir()
	var cmds []*exec.Cmd
	for p := range r.procs {
		n := r.callers / r.procs
		if p < r.callers%r.procs {
			n++
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestScaleChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			scaleEnvRole+"="+r.role, scaleEnvAddr+"="+r.addr, scaleEnvPrefix+"="+r.prefix,
			scaleEnvProc+"="+strconv.Itoa(p), scaleEnvProcCallers+"="+strconv.Itoa(n), scaleEnvProcScopes+"="+strconv.Itoa(scopes),
			scaleEnvBurst+"="+scaleBurstEnv(r.burst), scaleEnvSettle+"="+r.shape.settle,
			scaleEnvTenants+"="+scaleTenantsEnv(r.shape.tenants), scaleEnvReportHold+"="+scaleReportHoldEnv(r.shape.reportHold),
			scaleEnvStart+"="+strconv.FormatInt(r.start.UnixNano(), 10), scaleEnvEnd+"="+strconv.FormatInt(end.UnixNano(), 10),
			scaleEnvOut+"="+filepath.Join(dir, fmt.Sprintf("proc-%d.json", p)))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	b.ResetTimer()
	time.Sleep(time.Until(r.start))
	scaleSlowlogStart(b, r.rdb)
	stats0, cpu0 := scaleServerStats(b, r.rdb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r.during != nil {
			r.during(r.start, end)
		}
	}()
	// The slow log is read just before the window ends: at its end every
	// waiting caller is cancelled at once, and what their releases cost is
	// measured apart (shutdown).
	time.Sleep(time.Until(end.Add(-scaleSlowlogMargin)))
	slow := scaleSlowest(b, r.rdb, r.start)
	time.Sleep(time.Until(end))
	<-done
	stats1, cpu1 := scaleServerStats(b, r.rdb)
	b.StopTimer()
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Fatalf("process %d: %v\n%s", p, err, cmd.Stdout)
		}
	}
	shutdown := scaleSlowSince(b, r.rdb, slow.lastID)
	var reps []scaleReport
	for p := range r.procs {
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("proc-%d.json", p)))
		if err != nil {
			b.Fatal(err)
		}
		var rep scaleReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			b.Fatal(err)
		}
		if len(rep.Errors) > 0 {
			b.Errorf("process %d: %d errors, first: %v", p, len(rep.Errors), rep.Errors)
		}
		reps = append(reps, rep)
	}
	scaleLogLate(b, reps)
	f := scaleServerFigures{cpu: cpu1 - cpu0, slowest: slow.longest, slowName: slow.name, slowAt: slow.at, slowestLater: slow.later, compile: slow.compile, shutdown: shutdown}
	type count struct {
		name string
		n    int64
	}
	var counts []count
	for name, n := range stats1 {
		if d := n - stats0[name]; d > 0 {
			f.commands += d
			counts = append(counts, count{name, d})
		}
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i].n > counts[j].n })
	var top []string
	for _, c := range counts[:min(len(counts), 6)] {
		top = append(top, fmt.Sprintf("%s %d", c.name, c.n))
	}
	f.top = strings.Join(top, ", ")
	// Let the server free what the children's connections held.
	time.Sleep(200 * time.Millisecond)
	_ = r.rdb.Do(ctx, "MEMORY", "PURGE").Err()
	f.memory = scaleInfoInt(b, r.rdb, "memory", "used_memory") - mem0
	return reps, f
}

// scaleLogLate logs how many processes were ready only after the window
// began, and the latest: their callers come late to the first second.
func scaleLogLate(b *testing.B, reps []scaleReport) {
	var late int
	var latest time.Duration
	for _, r := range reps {
		if r.LateNS > 0 {
			late++
			latest = max(latest, time.Duration(r.LateNS))
		}
	}
	b.ReportMetric(float64(latest.Microseconds()), "ready-late-max-us")
	b.Logf("  processes ready after the window began: %d of %d (the latest %v after)", late, len(reps), latest.Round(time.Millisecond))
}

// scaleSlowlogStart makes the server log every command that takes 1 ms or
// more, from an empty log (the last 1,024 of them).
func scaleSlowlogStart(b *testing.B, rdb *redis.Client) {
	ctx := context.Background()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "1000"}, {"slowlog-max-len", "1024"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if err := rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		b.Fatal(err)
	}
}

// scaleSlowest reads the slow log of a window that began at start. The
// library's load on a server (FUNCTION LOAD), or a script's first run there
// (EVAL), compiles it and is reported apart as compile. The benchmark's own
// SLOWLOG, CONFIG, INFO and MEMORY commands are left out (on a shared
// server, TOLLGATE_SCALE_ADDR, a SLOWLOG RESET of a long log takes
// milliseconds).
func scaleSlowest(b *testing.B, rdb *redis.Client, start time.Time) scaleSlowEntries {
	logs, err := rdb.SlowLogGet(context.Background(), 1024).Result()
	if err != nil {
		b.Fatal(err)
	}
	var s scaleSlowEntries
	for _, l := range logs {
		s.lastID = max(s.lastID, l.ID)
		switch {
		case len(l.Args) == 0, scaleOwnCommand(l.Args[0]):
		case strings.EqualFold(l.Args[0], "eval"), strings.EqualFold(l.Args[0], "function"):
			s.compile = max(s.compile, l.Duration)
		default:
			at := l.Time.Sub(start.Truncate(time.Second))
			if l.Duration > s.longest {
				s.longest, s.name, s.at = l.Duration, l.Args[0], at
			}
			if at >= 2*time.Second {
				s.later = max(s.later, l.Duration)
			}
		}
	}
	return s
}

// scaleSlowEntries is what scaleSlowest finds in the slow log.
type scaleSlowEntries struct {
	longest time.Duration // the longest command
	name    string        // its name
	at      time.Duration // when it ran, in whole seconds from the window's start
	later   time.Duration // the longest from the window's third second on
	compile time.Duration // the longest FUNCTION LOAD or EVAL
	lastID  int64         // the log's last entry
}

// scaleOwnCommand reports whether name is one of the commands the
// benchmark itself sends the server to measure it.
func scaleOwnCommand(name string) bool {
	for _, own := range []string{"slowlog", "config", "info", "memory"} {
		if strings.EqualFold(name, own) {
			return true
		}
	}
	return false
}

// scaleSlowlogMargin is how long before the window's end its slow log is
// read: the children stop at the end, so a later read would race with
// their shutdown.
const scaleSlowlogMargin = 100 * time.Millisecond

// scaleSlowSince sums the slow-log entries after entry id (the log holds
// the last 1,024).
func scaleSlowSince(b *testing.B, rdb *redis.Client, id int64) scaleSlowlog {
	logs, err := rdb.SlowLogGet(context.Background(), 1024).Result()
	if err != nil {
		b.Fatal(err)
	}
	var s scaleSlowlog
	for _, l := range logs {
		if l.ID <= id || len(l.Args) > 0 && scaleOwnCommand(l.Args[0]) {
			continue
		}
		s.n++
		s.total += l.Duration
		s.longest = max(s.longest, l.Duration)
		if l.Duration > 5*time.Millisecond {
			s.over5ms++
		}
	}
	return s
}

// scaleBucket names the bucket of Limits.Burst burst.
func scaleBucket(burst time.Duration) string {
	if burst == 0 {
		return "the default bucket"
	}
	return "a " + burst.String() + " bucket"
}

// scaleBurstEnv is burst as the children read it: empty for the default.
func scaleBurstEnv(burst time.Duration) string {
	if burst == 0 {
		return ""
	}
	return burst.String()
}

// scaleTenantsEnv is TOLLGATE_SCALE_TENANTS's value for tenants.
// scaleReportHoldEnv is scaleEnvReportHold's value for hold (0: unset).
func scaleReportHoldEnv(hold time.Duration) string {
	if hold == 0 {
		return ""
	}
	return hold.String()
}

func scaleTenantsEnv(tenants int) string {
	if tenants == 0 {
		return ""
	}
	return strconv.Itoa(tenants)
}

// scaleAddr returns the Redis the scale benchmarks run on: see
// scaleEnvServer.
func scaleAddr(b *testing.B) string {
	if addr := os.Getenv(scaleEnvServer); addr != "" {
		return addr
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return testenv.RedisAddr()
	}
	return testenv.StartRedisServer(b, "").Addr()
}

// scaleEnvInt returns the positive integer in env variable k, or def.
func scaleEnvInt(b *testing.B, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", k, v)
	}
	return n
}

// scaleInfo returns the fields of INFO sections.
func scaleInfo(b *testing.B, rdb *redis.Client, sections ...string) map[string]string {
	info, err := rdb.Info(context.Background(), sections...).Result()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

func scaleInfoInt(b *testing.B, rdb *redis.Client, section, field string) int64 {
	n, err := strconv.ParseInt(scaleInfo(b, rdb, section)[field], 10, 64)
	if err != nil {
		b.Fatalf("INFO %s %s: %v", section, field, err)
	}
	return n
}

// scaleServerStats returns the calls of every command so far and the
// server's CPU seconds (user + system), from one INFO.
func scaleServerStats(b *testing.B, rdb *redis.Client) (map[string]int64, float64) {
	m := scaleInfo(b, rdb, "cpu", "commandstats")
	calls := map[string]int64{}
	var cpu float64
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			for _, kv := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(kv, "calls="); ok {
					calls[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
				}
			}
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO %s: %v", k, err)
			}
			cpu += f
		}
	}
	return calls, cpu
}

// scaleKeyMemory returns the number of keys of prefix, the sum of their
// MEMORY USAGE and a description of scope 0's keys.
func scaleKeyMemory(b *testing.B, rdb *redis.Client, prefix string) (int, int64, string) {
	ctx := context.Background()
	var n int
	var total int64
	suffix := ":" + scaleManyScope(0).Key()
	var one []string
	var oneBytes int64
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		use, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			continue // expired meanwhile
		}
		n++
		total += use
		if strings.HasSuffix(k, suffix) {
			one = append(one, fmt.Sprintf("%s %d B", k[strings.Index(k, "}")+1:], use))
			oneBytes += use
		}
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(one)
	return n, total, fmt.Sprintf("%d B in %v", oneBytes, one)
}

// scaleDeleteKeys removes every key of prefix.
func scaleDeleteKeys(rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for ks := range slices.Chunk(keys, 500) {
		_ = rdb.Del(ctx, ks...).Err()
	}
}

// scaleWindows counts the times at (unix nanoseconds) in each whole second
// of [start, start+window).
func scaleWindows(at []int64, start time.Time, window time.Duration) []int {
	per := make([]int, int(window/time.Second))
	for _, t := range at {
		if i := int(time.Unix(0, t).Sub(start) / time.Second); i >= 0 && i < len(per) {
			per[i]++
		}
	}
	return per
}

// scaleClaimPhases holds the claims' lateness and their Reserve's time
// (ns) by when their tickets came due: in the window's first second, in its
// second, and from its third on.
type scaleClaimPhases [3]struct{ late, reserve []int64 }

// scaleClaimsByPhase splits claims, of a window that began at start, by
// phase.
func scaleClaimsByPhase(claims []scaleClaim, start time.Time) scaleClaimPhases {
	var p scaleClaimPhases
	for _, c := range claims {
		i := min(int(time.Unix(0, c.DueNS).Sub(start)/time.Second), 2)
		p[i].late = append(p[i].late, c.LateNS)
		p[i].reserve = append(p[i].reserve, c.ReserveNS)
	}
	return p
}

// String renders each phase's count, and p50 and p99 of its lateness and of
// its claims' Reserve, in ms.
func (p scaleClaimPhases) String() string {
	var b strings.Builder
	for i, name := range []string{"due in the first second", "in the second", "from the third on"} {
		if i > 0 {
			b.WriteString("; ")
		}
		ph := p[i]
		fmt.Fprintf(&b, "%s %d: late p50 %.1f, p99 %.1f ms (their Reserve p50 %.1f, p99 %.1f ms)", name, len(ph.late),
			scalePercentile(ph.late, 50)/1e6, scalePercentile(ph.late, 99)/1e6, scalePercentile(ph.reserve, 50)/1e6, scalePercentile(ph.reserve, 99)/1e6)
	}
	return b.String()
}

func scaleMinMax(v []int) (int, int) {
	if len(v) == 0 {
		return 0, 0
	}
	return slices.Min(v), slices.Max(v)
}

// scalePercentile returns the p-th percentile of v (sorting v).
func scalePercentile(v []int64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return float64(v[min(len(v)*p/100, len(v)-1)])
}

// scaleSorted renders m sorted by key.
func scaleSorted(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
