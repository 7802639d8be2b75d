package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
)

// Environment of a child process started by a scale benchmark.
const (
	scaleEnvRole        = "TOLLGATE_SCALE_ROLE" // "hot" or "many"; unset: not a child
	scaleEnvAddr        = "TOLLGATE_SCALE_CHILD_ADDR"
	scaleEnvPrefix      = "TOLLGATE_SCALE_PREFIX"
	scaleEnvProc        = "TOLLGATE_SCALE_PROC"
	scaleEnvProcCallers = "TOLLGATE_SCALE_PROC_CALLERS"
	scaleEnvProcScopes  = "TOLLGATE_SCALE_PROC_SCOPES"
	scaleEnvStart       = "TOLLGATE_SCALE_START" // local unix nanoseconds
	scaleEnvEnd         = "TOLLGATE_SCALE_END"
	scaleEnvOut         = "TOLLGATE_SCALE_OUT"   // the report file
	scaleEnvBurst       = "TOLLGATE_SCALE_BURST" // Limits.Burst (a duration); unset: the default
	// scaleEnvSettle, set to "refund" or "debt", has the hot scope's calls
	// reserve tokens and settle with fewer or more (scaleSettleCharges).
	scaleEnvSettle = "TOLLGATE_SCALE_SETTLE"
	// scaleEnvTenants, set to n, spreads the hot scope's callers over n
	// fairness keys of equal weight (caller i: key "tenant-<i mod n>").
	scaleEnvTenants = "TOLLGATE_SCALE_TENANTS"
	// scaleEnvReportHold, set to a duration, has the hot scope's callers
	// hold each grant that long instead of scaleHold, and report each
	// answer's rate-limit headers after settling (scaleReportObs).
	scaleEnvReportHold = "TOLLGATE_SCALE_REPORT_HOLD"
	// scaleEnvStore, set to "scripts" or "records", runs the scopes on the
	// Redis store with that Options.Engine (unset: the default, records);
	// set to "cas", on the compare-and-set prototype (casproto_test.go).
	scaleEnvStore = "TOLLGATE_SCALE_STORE"
	// scaleEnvCPUProfile, set to a path, has the first process write its
	// CPU profile there, and its allocations (a heap profile) there with
	// ".mem" added.
	scaleEnvCPUProfile = "TOLLGATE_SCALE_CPUPROFILE"
)

// scaleEngine returns the Options.Engine that scaleEnvStore names: the
// default when it is unset, and when it names the prototype ("cas"), which
// runs beside a Store of the default engine.
func scaleEngine(tb testing.TB) redisstore.Engine {
	var e redisstore.Engine
	if v := os.Getenv(scaleEnvStore); v != "" && v != "cas" {
		if err := e.UnmarshalText([]byte(v)); err != nil {
			tb.Fatalf("%s: %v", scaleEnvStore, err)
		}
	}
	return e
}

// scaleStoreName names what the scale benchmarks run on (scaleEnvStore),
// for their reports.
func scaleStoreName(tb testing.TB) string {
	if os.Getenv(scaleEnvStore) == "cas" {
		return "the compare-and-set prototype"
	}
	return "the " + scaleEngine(tb).String() + " engine"
}

// scaleHold is how long a hot-scope caller holds its grant before settling.
const scaleHold = 20 * time.Millisecond

// scaleHotScope is the one scope of BenchmarkHotScope.
var scaleHotScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "scale-hot"}

// scaleHotLimits returns the hot scope's limits: 200 grants/s, every other
// field at its default except Burst, which is burst (zero: the default).
func scaleHotLimits(burst time.Duration) capacity.Limits {
	return capacity.Limits{RequestsPerMinute: 12000, Burst: burst}
}

// scaleManyLimits returns each scope's budget in BenchmarkManyScopes: 100
// calls/s and 4 in flight, every other field at its default except Burst,
// which is burst (zero: the default).
func scaleManyLimits(burst time.Duration) capacity.Limits {
	return capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 4, Burst: burst}
}

// scaleReportObs is what a hot-scope call's answer reports when its callers
// report (scaleEnvReportHold), with the call's mark: the requests of a
// pool ten times the configured limit, most of it left, as a key shared
// with other teams reports. A report of a larger pool only lowers the
// level, and this one never does: it costs the store what a report costs
// without changing what is granted.
var scaleReportObs = func() capacity.Observation {
	var o capacity.Observation
	o.Dims[capacity.Requests] = capacity.DimensionObservation{HasLimit: true, Limit: 120_000, HasRemaining: true, Remaining: 100_000}
	return o
}()

// scaleOne is one request holding one in-flight slot.
var scaleOne = capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}

// scaleSettleTPM is the hot scope's tokens per minute when its calls
// reserve tokens (TOLLGATE_SCALE_SETTLE): 1M tokens/s, five times what 200
// grants/s of 1,000 tokens reserve, so the request rate still binds.
const scaleSettleTPM = 60_000_000

// The settle shapes of BenchmarkHotScope (TOLLGATE_SCALE_SETTLE).
const (
	scaleSettleRefund = "refund"
	scaleSettleDebt   = "debt"
)

// scaleSettleCharges are what a hot-scope call reserves and settles with,
// by settle shape: refund, a pessimistic reservation of 1,000 tokens of
// which a quarter is used, as a call reserving its max_tokens does; debt, a
// reservation of 250 tokens and 300 used, as a call whose reservation was
// learned from what settles does when it uses more than most.
var scaleSettleCharges = map[string][2]capacity.Charges{
	scaleSettleRefund: {
		{capacity.Requests: 1, capacity.InFlight: 1, capacity.Tokens: 1000},
		{capacity.Requests: 1, capacity.InFlight: 1, capacity.Tokens: 250},
	},
	scaleSettleDebt: {
		{capacity.Requests: 1, capacity.InFlight: 1, capacity.Tokens: 250},
		{capacity.Requests: 1, capacity.InFlight: 1, capacity.Tokens: 300},
	},
}

// scaleManyScope returns scope i of BenchmarkManyScopes: 50 credentials of
// 20 limit groups each.
func scaleManyScope(i int) capacity.Scope {
	return capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m" + strconv.Itoa(i%20), Credential: "c" + strconv.Itoa(i/20)}
}

// scaleReport is what one child process measured inside the window
// [start, end) and reports to the parent as JSON.
type scaleReport struct {
	Proc int
	// CPUNS is the CPU time (user and system) the process used over the
	// window.
	CPUNS int64
	// LateNS is how long after the window's start the process was ready to
	// run its callers (0 if it was ready before): a process that starts late
	// on a machine short of CPU brings its callers late to the first second.
	LateNS int64
	// Grants are the local times (unix nanoseconds) of the grants.
	Grants []int64
	// CASCommits and CASConflicts count the write scripts that applied and
	// that found another version (TOLLGATE_SCALE_STORE=cas or records).
	CASCommits, CASConflicts int64
	// Reloads counts the copies read whole (TOLLGATE_SCALE_STORE=records).
	Reloads int64
	// Admitted and Denied count grants and denials (ManyScopes).
	Admitted, Denied int64
	// ReserveNS are the durations of every Reserve call started in the
	// window: time inside Store.Reserve.
	ReserveNS []int64
	// SteadyNS are those of the calls started after the window's first
	// second (the arrival of every caller at once), LaterNS those started
	// from its third second on, once the callers have arrived (on this
	// machine 10,000 callers take more than a second to).
	SteadyNS, LaterNS []int64
	// Reserves and Settles count the calls started in the window; Reasons
	// counts the denials by reason ("capacity+booked" for a denial that
	// books or holds a ticket on a bucket).
	Reserves, Settles int64
	Reasons           map[string]int64
	// Necessary counts each admitted call's booking reserve and, if it was
	// booked, its claiming reserve (the reserves a call cannot avoid); Extra
	// counts every other reserve: wake-ups, early tickets, retries.
	Necessary, Extra int64
	// WaitNS is the sum over callers of the time spent inside capacity.Wait.
	WaitNS int64
	// Commands and Scripts are the commands the client sent (scripts:
	// EVALSHA and EVAL).
	Commands, Scripts int64
	// Claims are the grants of the calls that held a ticket, due in the
	// window.
	Claims []scaleClaim
	Errors []string
}

// scaleClaim is the grant of a call that held a ticket: when the ticket
// came due on this machine's clock (unix ns; the answer's time plus
// RetryAt.Sub(Now)), how long after that the grant came back, and how long
// of that the claim's Reserve took.
type scaleClaim struct {
	DueNS, LateNS, ReserveNS int64
}

// scaleHook counts the commands a client sends.
type scaleHook struct{ all, scripts atomic.Int64 }

func (h *scaleHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scaleHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *scaleHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}
func (h *scaleHook) count(cmd redis.Cmder) {
	h.all.Add(1)
	switch cmd.Name() {
	case "fcall", "fcall_ro", "evalsha", "eval":
		h.scripts.Add(1)
	}
}

// scaleCaller is one caller's counters; scaleCaller.store wraps the shared
// store to time and classify each Reserve.
type scaleCaller struct {
	start, end time.Time
	rep        scaleReport
	// The current call: reserves made, whether it was booked, and when its
	// ticket comes due (zero: it holds none).
	n      int64
	booked bool
	due    time.Time
}

// scaleTimed is a capacity.Store (and, through the embedded store, a
// capacity.Notifier) that records each Reserve in its caller.
type scaleTimed struct {
	scaleStore
	c *scaleCaller
}

// scaleStore is what a hot-scope caller needs of a store.
type scaleStore interface {
	capacity.Store
	capacity.Notifier
	capacity.TicketNotifier
}

func (s scaleTimed) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	t0 := time.Now()
	res, err := s.scaleStore.Reserve(ctx, req)
	t1 := time.Now()
	d := t1.Sub(t0)
	c := s.c
	switch {
	case err != nil:
	case res.HoldsTicket():
		c.due = t1.Add(res.RetryAt.Sub(res.Now))
	case res.Granted && !c.due.IsZero():
		if !c.due.Before(c.start) && c.due.Before(c.end) {
			c.rep.Claims = append(c.rep.Claims, scaleClaim{DueNS: c.due.UnixNano(), LateNS: t1.Sub(c.due).Nanoseconds(), ReserveNS: d.Nanoseconds()})
		}
	}
	if t0.Before(c.start) || !t0.Before(c.end) {
		return res, err
	}
	c.n++
	c.booked = c.booked || res.Booked
	c.rep.Reserves++
	c.rep.ReserveNS = append(c.rep.ReserveNS, d.Nanoseconds())
	if t0.Sub(c.start) >= time.Second {
		c.rep.SteadyNS = append(c.rep.SteadyNS, d.Nanoseconds())
	}
	if t0.Sub(c.start) >= 2*time.Second {
		c.rep.LaterNS = append(c.rep.LaterNS, d.Nanoseconds())
	}
	if err == nil && !res.Granted {
		reason := res.Reason.String()
		if res.Booked && res.Reason == capacity.DenyCapacity && res.Binding != capacity.InFlight {
			reason += "+booked"
		}
		if res.Reason == capacity.DenyCapacity && res.Binding == capacity.InFlight {
			reason += "/in_flight"
		}
		c.rep.Reasons[reason]++
	}
	return res, err
}

// endCall accounts the reserves of the call just ended: its first reserve
// and, if it was booked and admitted, its claim are necessary.
func (c *scaleCaller) endCall(admitted bool) {
	need := min(c.n, 1)
	if admitted && c.booked && c.n >= 2 {
		need++
	}
	c.rep.Necessary += need
	c.rep.Extra += c.n - need
	c.n, c.booked, c.due = 0, false, time.Time{}
}

// waited adds the part of [t0, t1] inside the window to the caller's wait.
func (c *scaleCaller) waited(t0, t1 time.Time) {
	if t1.After(c.end) {
		t1 = c.end
	}
	if t1.After(t0) {
		c.rep.WaitNS += t1.Sub(t0).Nanoseconds()
	}
}

func (c *scaleCaller) fail(err error) {
	if len(c.rep.Errors) < 5 {
		c.rep.Errors = append(c.rep.Errors, err.Error())
	}
}

// TestScaleChild is the child process of the scale benchmarks; without
// TOLLGATE_SCALE_ROLE it is skipped.
func TestScaleChild(t *testing.T) {
	role := os.Getenv(scaleEnvRole)
	if role == "" {
		t.Skip("a child of BenchmarkHotScope and BenchmarkManyScopes")
	}
	num := func(k string) int64 {
		v, err := strconv.ParseInt(os.Getenv(k), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v
	}
	proc, callers := int(num(scaleEnvProc)), int(num(scaleEnvProcCallers))
	start, end := time.Unix(0, num(scaleEnvStart)), time.Unix(0, num(scaleEnvEnd))
	if path := os.Getenv(scaleEnvCPUProfile); path != "" && proc == 0 {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
		defer func() {
			f, err := os.Create(path + ".mem")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
		}()
	}

	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(scaleEnvAddr), PoolSize: 64})
	defer rdb.Close()
	hook := &scaleHook{}
	rdb.AddHook(hook)
	opts := redisstore.Options{Prefix: os.Getenv(scaleEnvPrefix), Engine: scaleEngine(t)}
	s, err := redisstore.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}

	var burst time.Duration
	if v := os.Getenv(scaleEnvBurst); v != "" {
		if burst, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s: %v", scaleEnvBurst, err)
		}
	}
	var st scaleStore = s
	var cas *casProto
	if os.Getenv(scaleEnvStore) == "cas" {
		cas = newCASProto(rdb, os.Getenv(scaleEnvPrefix))
		st = cas
	}
	var work func(ctx context.Context, c *scaleCaller, i int)
	switch role {
	case "hot":
		lim, charges := scaleHotLimits(burst), [2]capacity.Charges{scaleOne, scaleOne}
		if v := os.Getenv(scaleEnvSettle); v != "" {
			c, ok := scaleSettleCharges[v]
			if !ok {
				t.Fatalf("%s: unknown settle shape %q", scaleEnvSettle, v)
			}
			lim.TokensPerMinute, charges = scaleSettleTPM, c
		}
		tenants := 0
		if v := os.Getenv(scaleEnvTenants); v != "" {
			tenants = int(num(scaleEnvTenants))
		}
		hold, report := scaleHold, false
		if v := os.Getenv(scaleEnvReportHold); v != "" {
			var err error
			if hold, err = time.ParseDuration(v); err != nil {
				t.Fatalf("%s: %v", scaleEnvReportHold, err)
			}
			report = true
		}
		work = func(ctx context.Context, c *scaleCaller, i int) {
			key := ""
			if tenants > 0 {
				key = "tenant-" + strconv.Itoa(i%tenants)
			}
			scaleHotCaller(ctx, st, lim, charges, key, hold, report, c, proc, i)
		}
	case "many":
		scopes := int(num(scaleEnvProcScopes))
		work = func(ctx context.Context, c *scaleCaller, i int) {
			scaleManyCaller(ctx, st, scaleManyLimits(burst), c, proc, i, callers, scopes)
		}
	default:
		t.Fatalf("role %q", role)
	}

	late := max(-time.Until(start), 0)
	time.Sleep(time.Until(start))
	cmds0, scripts0, cpu0 := hook.all.Load(), hook.scripts.Load(), redisstore.ProcessCPU()
	var cmds1, scripts1, cpu1 atomic.Int64
	atEnd := time.AfterFunc(time.Until(end), func() {
		cmds1.Store(hook.all.Load())
		scripts1.Store(hook.scripts.Load())
		cpu1.Store(redisstore.ProcessCPU())
	})
	defer atEnd.Stop()
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	cs := make([]*scaleCaller, callers)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = &scaleCaller{start: start, end: end, rep: scaleReport{Reasons: map[string]int64{}}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(ctx, cs[i], i)
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(end.Add(10 * time.Millisecond))) // the end counts are taken

	rep := scaleReport{Proc: proc, Reasons: map[string]int64{}, Commands: cmds1.Load() - cmds0, Scripts: scripts1.Load() - scripts0,
		CPUNS: cpu1.Load() - cpu0, LateNS: late.Nanoseconds()}
	if cas != nil {
		rep.CASCommits, rep.CASConflicts = cas.Commits.Load(), cas.Conflicts.Load()
	}
	if opts.Engine == redisstore.EngineRecords {
		rep.CASCommits, rep.CASConflicts, rep.Reloads = s.Stats().Writes, s.Stats().Conflicts, s.Stats().Reloads
	}
	for _, c := range cs {
		r := c.rep
		rep.Grants = append(rep.Grants, r.Grants...)
		rep.ReserveNS = append(rep.ReserveNS, r.ReserveNS...)
		rep.SteadyNS = append(rep.SteadyNS, r.SteadyNS...)
		rep.LaterNS = append(rep.LaterNS, r.LaterNS...)
		rep.Claims = append(rep.Claims, r.Claims...)
		rep.Admitted += r.Admitted
		rep.Denied += r.Denied
		rep.Reserves += r.Reserves
		rep.Settles += r.Settles
		rep.Necessary += r.Necessary
		rep.Extra += r.Extra
		rep.WaitNS += r.WaitNS
		for k, v := range r.Reasons {
			rep.Reasons[k] += v
		}
		rep.Errors = append(rep.Errors, r.Errors...)
	}
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(scaleEnvOut), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// scaleHotCaller loops until ctx ends: wait for a grant of charges[0] on
// the hot scope (booking a ticket) as fairness key key, hold it for hold,
// settle with charges[1] and, if report, observe the answer's headers
// (scaleReportObs).
func scaleHotCaller(ctx context.Context, s scaleStore, lim capacity.Limits, charges [2]capacity.Charges, key string,
	hold time.Duration, report bool, c *scaleCaller, proc, caller int) {
	st := scaleTimed{scaleStore: s, c: c}
	for i := 0; ; i++ {
		req := capacity.Request{
			Scope: scaleHotScope, Limits: lim, Charges: charges[0],
			Call: fmt.Sprintf("p%d-c%d-%d", proc, caller, i), Attempt: 1, Class: capacity.Standard, Book: true,
			Fairness: capacity.Fairness{Key: key},
		}
		t0 := time.Now()
		res, err := capacity.Wait(ctx, st, req, capacity.WaitOptions{})
		t1 := time.Now()
		c.waited(t0, t1)
		granted := err == nil && res.Granted
		c.endCall(granted && t1.Before(c.end))
		if !granted {
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("wait: %v (%+v)", err, res))
			}
			return
		}
		if t1.Before(c.end) {
			c.rep.Grants = append(c.rep.Grants, t1.UnixNano())
		}
		time.Sleep(hold)
		ts := time.Now()
		if err := s.Settle(context.Background(), res.Lease, charges[1]); err != nil {
			c.fail(fmt.Errorf("settle: %w", err))
		}
		if report {
			o := scaleReportObs
			o.Mark = res.Lease.Mark
			if err := s.Observe(context.Background(), scaleHotScope, o); err != nil {
				c.fail(fmt.Errorf("observe: %w", err))
			}
		}
		if ts.Before(c.end) {
			c.rep.Settles++
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// scaleManyCaller loops until ctx ends over its share of the scopes
// (caller, caller + callers, ...; every process covers every scope),
// reserving without booking and settling at once; a denied scope is
// skipped.
func scaleManyCaller(ctx context.Context, s scaleStore, lim capacity.Limits, c *scaleCaller, proc, caller, callers, scopes int) {
	st := scaleTimed{scaleStore: s, c: c}
	var mine []capacity.Scope
	for j := (caller + proc) % callers; j < scopes; j += callers {
		mine = append(mine, scaleManyScope(j))
	}
	if len(mine) == 0 {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		req := capacity.Request{
			Scope: mine[i%len(mine)], Limits: lim, Charges: scaleOne,
			Call: fmt.Sprintf("p%d-c%d-%d", proc, caller, i), Attempt: 1, Class: capacity.Standard,
		}
		res, err := st.Reserve(ctx, req)
		c.n, c.booked = 0, false
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("reserve: %w", err))
			}
			return
		case !res.Granted:
			if time.Now().Before(c.end) {
				c.rep.Denied++
			}
			continue
		}
		ts := time.Now()
		if err := s.Settle(context.Background(), res.Lease, res.Lease.Charges); err != nil {
			c.fail(fmt.Errorf("settle: %w", err))
		}
		if ts.Before(c.end) {
			c.rep.Admitted++
			c.rep.Settles++
		}
	}
}
