package interceptor

import (
	"context"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/headers"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// failed settles a failed call, updates the shared state of its scope
// (cooldown, quota block, credential block, breaker, failure count) and
// returns the error the activity returns.
func (g *gatedCall) failed(ctx context.Context, lease capacity.Lease, report Report, callErr error) error {
	bg := context.WithoutCancel(ctx)
	now := g.opts.Clock.Now()
	store := g.opts.Store
	if report.NotSent {
		if err := store.Release(bg, lease); err != nil {
			g.logger(ctx).Warn("tollgate: release failed", "scope", g.scope.Key(), "error", err)
		}
		return g.countFailure(ctx, callErr, tgerrors.Verdict{Class: tgerrors.Unknown})
	}

	v := g.opts.Classifier.ClassifyContext(ctx, g.call.Provider, callErr, now)
	// The block the answer calls for is set while the call still holds its
	// reservation: settling it below gives capacity back and wakes waiting
	// calls, which must not be admitted in between to meet the same answer.
	// A scope's cooldown is the exception: it is set after the settle and
	// the report, because its cut of the rate (decision 0006) works on the
	// level they leave. A pool member's block, cooldown included, comes
	// first, so the pool does not pick the member again in between.
	rerouted := false
	var cooldown capacity.Block
	if g.pool != nil {
		if b, ok := g.memberBlock(v, now); ok {
			g.block(bg, b) // the pool moves on to another member
			rerouted = true
		}
	} else if b, ok := g.scopeBlock(v, now); ok {
		if b.Reason == capacity.Cooldown {
			cooldown = b
		} else {
			g.block(bg, b)
		}
	}
	if v.Class == tgerrors.Overloaded {
		g.tripBreaker(bg, now)
	}
	outcome := accounting.Unknown // sent, answer lost: keep the whole reservation
	if v.Status != 0 {
		outcome = accounting.Rejected
	}
	final := g.profile.Settle(g.demand, lease.Charges, outcome, report.Usage)
	if err := store.Settle(bg, lease, final); err != nil {
		g.logger(ctx).Warn("tollgate: settle failed; the lease expires by itself", "scope", g.scope.Key(), "error", err)
		g.a.root.tel.settleFailed(ctx, g, "error")
	}
	g.a.root.tel.used(ctx, g, final)
	if report.HasUsage {
		g.a.root.ledger.record(bg, g, lease, report.Usage)
	}
	obs := v.Observation
	if obs.Empty() && report.Header != nil {
		obs = headers.Parse(g.call.Provider, report.Header, now)
	}
	g.observe(bg, lease, obs)
	if !cooldown.Until.IsZero() {
		g.block(bg, cooldown)
	}
	g.a.root.tel.failed(ctx, g, v)
	if rerouted {
		return g.reroute(g.pool.chosen.name + " " + v.Class.String() + codeSuffix(cleanCode(v.Code)))
	}
	conv := tgerrors.Converter{Jitter: g.jitterFunc()}

	switch v.Class {
	case tgerrors.Canceled:
		return conv.ActivityError(v, g.scope.Key())
	case tgerrors.RateLimited:
		// Every worker on the scope pauses until the provider's time (the
		// cooldown set above).
		return g.checkDeadline(conv.ActivityError(v, g.scope.Key()))
	case tgerrors.QuotaExhausted, tgerrors.BadCredential, tgerrors.NoAccess, tgerrors.ContextTooLong, tgerrors.BadRequest:
		return conv.ActivityError(v, g.scope.Key())
	case tgerrors.Overloaded:
		return g.countFailure(ctx, conv.ActivityError(v, g.scope.Key()), v)
	case tgerrors.Unknown:
		if isApplicationError(callErr) {
			// The activity's own error: keep it as it is.
			return g.countFailure(ctx, callErr, v)
		}
	}
	return g.countFailure(ctx, conv.ActivityError(v, g.scope.Key()), v)
}

// scopeBlock is the block a failure puts on the call's scope (a call not
// in a pool; memberBlock is a pool member's): a 429 cools the scope until
// the provider's time, a spent quota blocks it until the reset, a refused
// key is out on every scope of its credential. False for other failures.
func (g *gatedCall) scopeBlock(v tgerrors.Verdict, now time.Time) (capacity.Block, bool) {
	switch v.Class {
	case tgerrors.RateLimited:
		return cooldownBlock(v, now), true
	case tgerrors.QuotaExhausted:
		return g.quotaBlock(v, now), true
	case tgerrors.BadCredential:
		return g.credentialBlock(v, now, true), true
	}
	return capacity.Block{}, false
}

// cooldownBlock is the cooldown a 429 calls for: until the provider's
// retry time, or a second from now where it states none.
func cooldownBlock(v tgerrors.Verdict, now time.Time) capacity.Block {
	wait := v.RetryAfter
	if wait <= 0 {
		wait = time.Second
	}
	return capacity.Block{Reason: capacity.Cooldown, Until: now.Add(wait), Detail: v.Code}
}

// quotaBlock is the block a spent quota calls for, on the scope: until
// the provider's reset time, or QuotaBlockUnknown from now where it states
// none (or one already past); its detail is the quota's id, else the code.
func (g *gatedCall) quotaBlock(v tgerrors.Verdict, now time.Time) capacity.Block {
	until := v.ResetAt
	if until.IsZero() || !until.After(now) {
		until = now.Add(g.opts.QuotaBlockUnknown)
	}
	detail := v.QuotaID
	if detail == "" {
		detail = v.Code
	}
	return capacity.Block{Reason: capacity.QuotaExhausted, Until: until, Detail: detail}
}

// credentialBlock takes a refused key (or, credential false, access to the
// scope's model) out for CredentialBlock, half-open if HalfOpen.
func (g *gatedCall) credentialBlock(v tgerrors.Verdict, now time.Time, credential bool) capacity.Block {
	return capacity.Block{Reason: capacity.CredentialDisabled, Until: now.Add(g.opts.CredentialBlock),
		Credential: credential, HalfOpen: g.opts.HalfOpen, Detail: v.Code}
}

func (g *gatedCall) block(ctx context.Context, b capacity.Block) {
	if err := g.opts.Store.Block(ctx, g.scope, b); err != nil {
		g.logger(ctx).Warn("tollgate: block failed", "scope", g.scope.Key(), "reason", b.Reason.String(), "error", err)
	}
}

// tripBreaker counts an overload on the scope and opens the breaker (a
// half-open block) at BreakerThreshold overloads, each within BreakerWindow
// of the one before (the count is forgotten after a quiet BreakerWindow).
func (g *gatedCall) tripBreaker(ctx context.Context, now time.Time) {
	n, err := g.opts.Store.AddFailure(ctx, g.scope, "overload", g.opts.BreakerWindow)
	if err != nil {
		g.logger(ctx).Warn("tollgate: breaker count failed", "scope", g.scope.Key(), "error", err)
		return
	}
	if n >= g.opts.BreakerThreshold {
		g.block(ctx, capacity.Block{Reason: capacity.Overloaded, Until: now.Add(g.opts.BreakerCooldown), HalfOpen: g.opts.HalfOpen})
	}
}

// countFailure counts a real failure of the call in the store and, once the
// call has had MaxFailures, makes the error non-retryable: the call's retry
// policy has unlimited attempts, so tollgate is what bounds real failures.
func (g *gatedCall) countFailure(ctx context.Context, err error, v tgerrors.Verdict) error {
	horizon := defaultFailureCountHorizon
	if !g.deadline.IsZero() {
		horizon = max(g.deadline.Sub(g.opts.Clock.Now()), time.Minute)
	}
	n, cerr := g.opts.Store.AddFailure(context.WithoutCancel(ctx), g.scope, g.id, horizon)
	if cerr != nil {
		g.logger(ctx).Warn("tollgate: failure count failed", "scope", g.scope.Key(), "error", cerr)
		return g.checkDeadline(err)
	}
	if n < g.opts.MaxFailures {
		return g.checkDeadline(err)
	}
	typ := tgerrors.TypeOf(v.Class)
	msg := err.Error()
	if ae, ok := err.(*temporal.ApplicationError); ok {
		typ, msg = ae.Type(), ae.Message()
	}
	if typ == "" {
		typ = tgerrors.TypeUnknown
	}
	return temporal.NewApplicationErrorWithOptions(
		msg+" (failed "+strconv.Itoa(n)+" times; giving up)", typ,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{tgerrors.DetailsFor(v, g.scope.Key())}})
}

// checkDeadline turns a retryable error whose next attempt would start past
// the schedule-to-close deadline into DeadlineUnmeetable.
func (g *gatedCall) checkDeadline(err error) error {
	ae, ok := err.(*temporal.ApplicationError)
	if !ok || ae.NonRetryable() || g.deadline.IsZero() {
		return err
	}
	if d := ae.NextRetryDelay(); d > 0 && g.opts.Clock.Now().Add(d).After(g.dispatchBy) {
		return deadlineUnmeetable(ae.Message()+": the retry lands past the call's schedule-to-close deadline", g.scope)
	}
	return err
}

// codeSuffix is " (code)", or "" for no code.
func codeSuffix(code string) string {
	if code == "" {
		return ""
	}
	return " (" + code + ")"
}
