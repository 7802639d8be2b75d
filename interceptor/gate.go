package interceptor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/headers"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// gatedKey marks a context whose call is already gated, so a plugin set on
// both client and worker gates each call once.
type gatedKey struct{}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root     *workerInterceptor
	outbound interceptor.ActivityOutboundInterceptor
}

func (a *activityInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	a.outbound = outbound
	h := &heartbeatOutbound{}
	h.Next = outbound
	return a.Next.Init(h)
}

// ExecuteActivity gates model calls and lets every other activity through.
func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if ctx.Value(gatedKey{}) != nil {
		return a.Next.ExecuteActivity(ctx, in)
	}
	info := activity.GetInfo(ctx)
	call, ok, err := a.root.opts.Resolve(ctx, info, in.Args)
	if err != nil {
		return nil, misconfigured("resolving the model call: " + err.Error())
	}
	if !ok {
		if why, model := ungatedModelCall(ctx, in.Args); model {
			a.root.ungated.report(ctx, a.logger(ctx), a.root.tel, info, why)
		}
		return a.Next.ExecuteActivity(ctx, in)
	}
	class, err := a.root.opts.resolveClass(ctx, call)
	if err != nil {
		return nil, err
	}
	call.Class, call.ClassName = class.c, class.name
	if call.FairnessKey, err = resolveFairnessKey(ctx, call.FairnessKey); err != nil {
		return nil, err
	}
	g, aerr := a.newGatedCall(ctx, info, call)
	if aerr != nil {
		return nil, aerr
	}
	out, err := g.run(ctx, in)
	if tgerrors.IsDeadlineUnmeetable(err) {
		a.root.tel.deadlineMissed(ctx, g)
	}
	return out, err
}

// gatedCall is one attempt of one model call going through the gate.
type gatedCall struct {
	a        *activityInbound
	opts     *Options
	info     activity.Info
	call     Call
	scope    capacity.Scope
	limits   capacity.Limits
	profile  accounting.Profile
	kind     string          // the kind of call learned as; "" learns nothing
	demand   capacity.Demand // call.Demand with what was learned applied: what is charged
	charges  capacity.Charges
	id       string
	deadline time.Time // schedule-to-close deadline; zero if none
	// dispatchBy is the last moment the call may be sent: the deadline less
	// MinCallTime, the deadline the store is given; zero if none.
	dispatchBy time.Time
	state      *callState
	// followsReports says the scope runs on the limits its provider
	// reports (reportedLimits).
	followsReports bool
	// pool is the key pool the call named (Options.Pools); nil if none.
	// Until choose picks a member, scope is the pool's own and limits
	// are zero.
	pool *poolCall
}

func (a *activityInbound) newGatedCall(ctx context.Context, info activity.Info, call Call) (*gatedCall, error) {
	o := &a.root.opts
	if err := checkActivityOptions(info, o.MinMaximumAttempts); err != nil {
		return nil, err
	}
	scope := o.LimitGroups.ScopeFor(call.Provider, call.Model, call.Credential, call.Region)
	if err := scope.Validate(); err != nil {
		return nil, misconfigured(err.Error())
	}
	profile, ok := o.profile(call.Provider)
	if !ok {
		return nil, misconfigured("no accounting profile for provider " + string(call.Provider))
	}
	g := &gatedCall{
		a: a, opts: o, info: info, call: call, scope: scope, profile: profile,
		id: callID(info), state: &callState{},
	}
	if _, ok := o.Pools[call.Credential]; ok {
		pool, err := newPoolCall(o, call, call.Credential, scope, profile)
		if err != nil {
			return nil, err
		}
		g.pool = pool
	} else {
		limits, follows, err := o.scopeLimits(scope, profile, o.Clock.Now())
		if err != nil {
			return nil, misconfigured(err.Error())
		}
		g.limits, g.followsReports = limits, follows
	}
	if err := call.Demand.Validate(); err != nil {
		// Refused before a profile combines the fields, which could hide
		// a negative one.
		return nil, misconfigured(err.Error())
	}
	g.kind = a.root.learn.kindOf(ctx, g)
	g.demand = a.root.learn.demand(ctx, g)
	g.charges = profile.Charges(g.demand)
	if info.ScheduleToCloseTimeout > 0 && !info.ScheduledTime.IsZero() {
		g.deadline = info.ScheduledTime.Add(info.ScheduleToCloseTimeout)
		g.dispatchBy = g.deadline.Add(-o.MinCallTime)
	}
	return g, nil
}

// checkActivityOptions refuses retry policies under which rate-limit waits
// would use up attempts: Temporal checks MaximumAttempts before it applies
// NextRetryDelay, so a model call needs unlimited attempts bounded by a
// schedule-to-close timeout (tollgate counts real failures itself).
func checkActivityOptions(info activity.Info, minAttempts int32) error {
	if info.IsLocalActivity {
		return nil
	}
	if rp := info.RetryPolicy; rp != nil && rp.MaximumAttempts > 0 && rp.MaximumAttempts < minAttempts {
		return misconfigured(fmt.Sprintf("model-call activities need RetryPolicy.MaximumAttempts 0 (unlimited) or at least %d, not %d: "+
			"every rate-limit wait costs an attempt; bound calls with ScheduleToCloseTimeout and let Options.MaxFailures count real failures",
			minAttempts, rp.MaximumAttempts))
	}
	if info.ScheduleToCloseTimeout <= 0 {
		return misconfigured("model-call activities need a ScheduleToCloseTimeout: with unlimited attempts it is what bounds the call")
	}
	return nil
}

// callID identifies the call across attempts without carrying workflow ids
// into store keys: a hash of namespace, workflow id, run id and activity id
// (or the activity run id of a standalone activity).
func callID(info activity.Info) string {
	h := sha256.New()
	for _, s := range []string{info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityRunID, info.ActivityID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "act-" + hex.EncodeToString(h.Sum(nil)[:12])
}

func (g *gatedCall) request() capacity.Request { return g.requestFor(g.scope, g.limits) }

// requestFor is the call's request on scope sc, of limits l.
func (g *gatedCall) requestFor(sc capacity.Scope, l capacity.Limits) capacity.Request {
	r := capacity.Request{
		Scope: sc, Limits: l, Call: g.id, Attempt: int(g.info.Attempt),
		Charges: g.charges, Class: g.call.Class, TTL: g.opts.LeaseTTL, Book: true,
		Since: g.info.ScheduledTime, // waiting since the first attempt was scheduled: Limits.AgingAfter
	}
	if g.opts.classes != nil {
		// A user-defined class: the store applies its rule as given,
		// aged here, on the worker's clock.
		rule, _ := g.opts.classes.Rule(g.call.Class, g.info.ScheduledTime, g.opts.Clock.Now())
		r.Rule = &rule
	}
	r.Fairness = g.opts.Fairness[g.call.FairnessKey]
	r.Fairness.Key = g.call.FairnessKey
	r.FairStart = g.opts.FairStart
	if r.Attempt < 1 {
		r.Attempt = 1
	}
	r.Deadline = g.dispatchBy
	return r
}

func (g *gatedCall) run(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	releaseSpend, err := g.a.root.ledger.admitSpend(ctx, g)
	if err != nil {
		return nil, err
	}
	defer releaseSpend()
	start := g.opts.Clock.Now()
	res, err := g.admit(ctx)
	waited := g.opts.Clock.Now().Sub(start)
	g.a.root.tel.admitted(ctx, g, res, err, waited)
	if err != nil {
		g.logger(ctx).Debug("tollgate: not admitted", "scope", g.scope.Key(), "class", g.call.ClassName, "fairness_key", g.call.FairnessKey,
			"attempt", g.info.Attempt, "reason", res.Reason.String(), "binding", res.Binding.String(), "waited", waited)
		return nil, err
	}
	g.logger(ctx).Debug("tollgate: admitted", "scope", g.scope.Key(), "class", g.call.ClassName, "fairness_key", g.call.FairnessKey,
		"attempt", g.info.Attempt, "waited", waited, "probe", res.Probe)
	lease := res.Lease
	now := g.opts.Clock.Now()
	if g.pastDeadline(now) {
		_ = g.opts.Store.Release(context.WithoutCancel(ctx), lease)
		return nil, deadlineUnmeetable("the call was admitted too close to its deadline to be sent (less than MinCallTime left)", g.scope)
	}

	rep := &reporter{}
	callCtx := context.WithValue(ctx, gatedKey{}, true)
	callCtx = context.WithValue(callCtx, reportKey{}, rep)
	callCtx = context.WithValue(callCtx, callStateKey{}, g.state)
	if g.pool != nil {
		callCtx = context.WithValue(callCtx, poolChoiceKey{}, poolChoice{pool: g.pool.name, member: g.pool.chosen.name})
	}
	ka := g.startKeepalive(ctx, lease)
	finished := false
	defer func() {
		if !finished {
			// The activity panicked: the call may have left; keep the whole
			// reservation and free the slot, then let the panic go on.
			l := ka.stop()
			_ = g.opts.Store.Settle(context.WithoutCancel(ctx), l, l.Charges)
		}
	}()
	result, callErr := g.a.Next.ExecuteActivity(callCtx, in)
	finished = true
	// The attempt goes on heartbeating until the store has heard how the
	// call ended: a slow store must not time out an attempt whose call is
	// over (Temporal would run the call again).
	stopBeat := g.heartbeatDuring(ctx, true)
	defer stopBeat(true)
	lease = ka.stop()

	report, reported := rep.get()
	if mr, ok := result.(ModelResult); ok && callErr == nil {
		report, reported = mr.TollgateReport(), true
	}
	if callErr == nil {
		g.afterSuccess(ctx, lease, report, reported, res.Probe)
		return result, nil
	}
	return nil, g.failed(ctx, lease, report, callErr)
}

// Progress of the store work after a provider's answer (afterSuccess): who
// reports its outcome is decided once, by compare-and-swap.
const (
	settlePending   int32 = iota
	settleReturned        // Settle returned in time: its caller reports
	settleAbandoned       // the budget ran out first: afterSuccess reports
)

// afterSuccess settles a call the provider answered, applies its rate-limit
// headers and lifts the block whose probe it was, waiting at most
// settleBudget: past it, it returns (the activity returns the answer) and
// leaves that work to finish on its own. A settle that lands late still
// frees the slot; the lease of one that never lands expires after LeaseTTL
// with the whole reservation spent.
func (g *gatedCall) afterSuccess(ctx context.Context, lease capacity.Lease, report Report, reported, probe bool) {
	budget := g.settleBudget(ctx)
	bg := context.WithoutCancel(ctx)
	var state atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.settleSuccess(bg, lease, report, reported, &state)
		if probe {
			g.liftProbe(bg)
		}
	}()
	t := g.opts.Clock.NewTimer(budget)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C():
	}
	if state.CompareAndSwap(settlePending, settleAbandoned) {
		g.logger(ctx).Warn("tollgate: settle timed out; returning the provider's answer (a late settle still lands, else the lease expires by itself)",
			"scope", g.scope.Key(), "timeout", budget)
		g.a.root.tel.settleFailed(ctx, g, "timeout")
		return
	}
	g.logger(ctx).Warn("tollgate: applying the provider's answer timed out after settling", "scope", g.scope.Key(), "timeout", budget)
}

// settleBudget is how long afterSuccess may take: SettleTimeout, at most
// half the time left of the attempt and, where the gate may not heartbeat,
// half the heartbeat timeout.
func (g *gatedCall) settleBudget(ctx context.Context) time.Duration {
	b := g.opts.SettleTimeout
	if !g.info.Deadline.IsZero() {
		b = min(b, g.info.Deadline.Sub(g.opts.Clock.Now())/2)
	}
	if g.info.HeartbeatTimeout > 0 && !g.canHeartbeat(ctx) {
		b = min(b, g.info.HeartbeatTimeout/2)
	}
	return max(b, 0)
}

// pastDeadline reports whether a call admitted at now may no longer be
// sent: its attempt is over, or less than MinCallTime is left before its
// schedule-to-close deadline (a booking that moved later may come due after
// the deadline the store was given).
func (g *gatedCall) pastDeadline(now time.Time) bool {
	if !g.info.Deadline.IsZero() && !now.Before(g.info.Deadline) {
		return true
	}
	return !g.dispatchBy.IsZero() && now.After(g.dispatchBy)
}

// settleSuccess settles the lease of an answered call, then observes the
// answer's headers and learns from its usage, if it moves state from
// settlePending to settleReturned.
// A settle that returns after afterSuccess gave up on it (settleAbandoned)
// reports nothing and skips the headers, stale by then.
func (g *gatedCall) settleSuccess(ctx context.Context, lease capacity.Lease, report Report, reported bool, state *atomic.Int32) {
	outcome := accounting.Completed
	if !reported || !report.HasUsage {
		outcome = accounting.Unknown // no usage: keep the whole reservation
	}
	if outcome == accounting.Completed {
		// The provider charged the call whatever the store says.
		defer g.a.root.ledger.record(ctx, g, lease, report.Usage)
	}
	final := g.profile.Settle(g.demand, lease.Charges, outcome, report.Usage)
	err := g.opts.Store.Settle(ctx, lease, final)
	if !state.CompareAndSwap(settlePending, settleReturned) {
		return
	}
	if err != nil {
		g.logger(ctx).Warn("tollgate: settle failed; the lease expires by itself", "scope", g.scope.Key(), "error", err)
		g.a.root.tel.settleFailed(ctx, g, "error")
	}
	g.a.root.tel.settled(ctx, g, lease.Charges, final)
	if reported && report.Header != nil {
		obs := headers.Parse(g.call.Provider, report.Header, g.opts.Clock.Now())
		g.observe(ctx, lease, obs)
	}
	if err == nil && outcome == accounting.Completed {
		g.a.root.learn.record(ctx, g, report.Usage)
	}
}

func (g *gatedCall) observe(ctx context.Context, lease capacity.Lease, obs capacity.Observation) {
	if obs.Empty() {
		return
	}
	now := g.opts.Clock.Now()
	g.a.root.tel.observed(ctx, g.scope, obs, now)
	obs.Mark = lease.Mark
	if err := g.opts.Store.Observe(ctx, g.scope, obs); err != nil {
		g.logger(ctx).Warn("tollgate: observe failed", "scope", g.scope.Key(), "error", err)
	}
	if rep, changed, ok := g.opts.reports.observed(g.scope, obs, now); ok && changed && g.followsReports {
		g.logger(ctx).Info("tollgate: scope runs on the limits its provider reports", "scope", g.scope.Key(), "limits", rep.String())
	}
}

// liftProbe ends the half-open block whose probe this call was.
func (g *gatedCall) liftProbe(ctx context.Context) {
	for _, cred := range []bool{false, true} {
		if err := g.opts.Store.Unblock(ctx, g.scope, cred); err != nil {
			g.logger(ctx).Warn("tollgate: unblock failed", "scope", g.scope.Key(), "error", err)
		}
	}
}

// learnScope is the scope the call learns on: its own, or its pool's,
// whichever member it goes on.
func (g *gatedCall) learnScope() capacity.Scope {
	if g.pool != nil {
		return g.pool.scope
	}
	return g.scope
}

func (g *gatedCall) logger(ctx context.Context) log.Logger { return optionsLogger(ctx, g.opts) }

func (a *activityInbound) logger(ctx context.Context) log.Logger {
	return optionsLogger(ctx, &a.root.opts)
}

// optionsLogger is o.Logger, else the activity's logger.
func optionsLogger(ctx context.Context, o *Options) log.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return activity.GetLogger(ctx)
}

// isApplicationError reports whether err is itself (not wrapping) an
// ApplicationError, which Temporal reads as it is.
func isApplicationError(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && error(ae) == err
}
