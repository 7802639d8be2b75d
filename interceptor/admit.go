package interceptor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// storeRetryDelay is how soon a call retries when the store cannot be
// reached (fail closed: nothing is dispatched blind).
const storeRetryDelay = 5 * time.Second

// admit reserves the call's charges: at once, after a local wait, or not at
// all (the returned error is what the activity returns).
func (g *gatedCall) admit(ctx context.Context) (capacity.Reservation, error) {
	if g.pool != nil {
		res, granted, err := g.choose(ctx)
		switch {
		case granted:
			return res, nil
		case err != nil && isApplicationError(err):
			return res, err // no member can take the call
		case err != nil:
			return g.outcome(ctx, res, err, false)
		}
	}
	req := g.request()
	maxWait := g.localWaitBudget(ctx)
	var (
		res     capacity.Reservation
		err     error
		stopped atomic.Bool
	)
	if maxWait <= 0 {
		res, err = g.opts.Store.Reserve(ctx, req)
	} else {
		waitCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-workerStop(ctx):
				stopped.Store(true)
				cancel()
			case <-waitCtx.Done():
			}
		}()
		wo := capacity.WaitOptions{MaxWait: maxWait, Clock: g.opts.Clock}
		var left atomic.Pointer[capacity.Reservation] // the denial that sent a pool call on
		if g.pool != nil {
			// A pool call does not wait out a block its key met after it
			// was chosen: another key may have room now.
			wo.OnDenied = func(r capacity.Reservation) {
				if _, ok := g.pool.leaves(r); ok {
					left.Store(&r)
					cancel()
				}
			}
		}
		stopBeat := g.heartbeatDuring(ctx, false)
		res, err = capacity.Wait(waitCtx, g.opts.Store, req, wo)
		// Not waiting for a heartbeat under way: while the Temporal server
		// cannot be reached one takes up to the client's RPC timeout, and a
		// lease just granted is renewed only once its call starts.
		stopBeat(false)
		cancel()
		if b := left.Load(); b != nil && ctx.Err() == nil && !stopped.Load() {
			why, _ := g.pool.leaves(*b)
			return *b, g.reroute(why)
		}
	}
	return g.outcome(ctx, res, err, stopped.Load())
}

// outcome turns the store's answer into admission: the reservation, or the
// error the activity returns. stopped says the worker is stopping.
func (g *gatedCall) outcome(ctx context.Context, res capacity.Reservation, err error, stopped bool) (capacity.Reservation, error) {
	switch {
	case err == nil && res.Granted:
		return res, nil
	case err == nil:
		return res, g.denied(res)
	case stopped && ctx.Err() == nil:
		// The worker is stopping: free the slot, come back on another worker.
		return res, capacityWait(g.delay(time.Second, false), g.scope, "worker stopping", "")
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	var tooLarge *capacity.DemandTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return res, tgerrors.ExceedsLimitError(g.scope.Key(), tooLarge.Dimension.String(), int64(tooLarge.Capacity), tooLarge.Charge)
	case errors.Is(err, capacity.ErrInvalidRequest), errors.Is(err, capacity.ErrInvalidLimits), errors.Is(err, capacity.ErrInvalidScope):
		return res, misconfigured(err.Error())
	default:
		// The store failed (unreachable, stale attempt): wait and retry.
		g.logger(ctx).Warn("tollgate: store unavailable; retrying later", "scope", g.scope.Key(), "error", err)
		return res, capacityWait(g.delay(storeRetryDelay, false), g.scope, "store unavailable", "")
	}
}

// workerStop returns the worker's stop channel, or nil (never ready) where
// the activity runs without one.
func workerStop(ctx context.Context) (ch <-chan struct{}) {
	defer func() {
		if recover() != nil {
			ch = nil
		}
	}()
	return activity.GetWorkerStopChannel(ctx)
}

// localWaitBudget is how long this attempt may wait in-process: never for
// local activities, at most MaxLocalWait, and leaving MinCallTime of the
// attempt for the call itself.
func (g *gatedCall) localWaitBudget(ctx context.Context) time.Duration {
	if g.info.IsLocalActivity || g.opts.MaxLocalWait < 0 {
		return 0
	}
	budget := g.opts.MaxLocalWait
	now := g.opts.Clock.Now()
	if !g.info.Deadline.IsZero() {
		budget = min(budget, g.info.Deadline.Sub(now)-g.opts.MinCallTime)
	}
	if g.info.HeartbeatTimeout > 0 && !g.canHeartbeat(ctx) {
		// Heartbeating now would erase the previous attempt's details.
		budget = min(budget, g.info.HeartbeatTimeout/2)
	}
	return budget
}

// denied turns a denial into the activity's error.
func (g *gatedCall) denied(res capacity.Reservation) error {
	wait := res.RetryAt.Sub(res.Now)
	now := g.opts.Clock.Now()
	conv := tgerrors.Converter{Jitter: g.jitterFunc()}
	dim := ""
	switch res.Reason {
	case capacity.DenyCapacity, capacity.DenyDailyQuota, capacity.DenyKeyCap, capacity.DenyKeyQuota:
		dim = res.Binding.String()
	}
	if g.pool != nil {
		if why, ok := g.pool.leaves(res); ok {
			return g.reroute(why)
		}
	}
	switch res.Reason {
	case capacity.DenyDeadline:
		return deadlineUnmeetable(fmt.Sprintf("%s has no room for this call before its deadline (binding: %s, room in %v)",
			g.scope.Key(), res.Binding, wait.Round(time.Millisecond)), g.scope)
	case capacity.DenyDailyQuota:
		v := tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Reason: tgerrors.ReasonDailyQuota, Provider: g.call.Provider,
			Dimension: res.Binding, HasDimension: true, ResetAt: now.Add(wait)}
		return conv.ActivityError(v, g.scope.Key())
	case capacity.DenyKeyQuota:
		// The call's fairness key spent its tokens for the day on this
		// scope: only its own calls fail; the scope is not blocked.
		v := tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Reason: tgerrors.ReasonKeyQuota, Provider: g.call.Provider,
			Dimension: res.Binding, HasDimension: true, ResetAt: now.Add(wait)}
		return conv.ActivityError(v, g.scope.Key())
	case capacity.DenyBlocked:
		switch res.Block.Reason {
		case capacity.QuotaExhausted:
			v := tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Provider: g.call.Provider, ResetAt: now.Add(wait), Code: res.Block.Detail}
			return conv.ActivityError(v, g.scope.Key())
		case capacity.CredentialDisabled:
			if res.Block.Probing {
				// A probe is testing the credential: wait for its verdict.
				return g.delayedRetry(wait, false, "credential probe in flight", "")
			}
			v := tgerrors.Verdict{Class: tgerrors.BadCredential, Provider: g.call.Provider, Code: res.Block.Detail}
			return conv.ActivityError(v, g.scope.Key())
		}
		return g.delayedRetry(wait, false, res.Block.Reason.String(), "")
	}
	if res.Binding == capacity.InFlight {
		// A slot frees at the next settle, usually long before the lease
		// expiry the store reports as the latest moment: come back soon.
		wait = min(wait, inFlightRetry)
	}
	if res.Booked && wait > max(g.opts.MaxLocalWait, time.Second) {
		// The store moves tickets with the budget (earlier on a refund,
		// later when a limit falls): a call away in Temporal comes back
		// halfway to read its ticket's time again, so a ticket brought
		// forward is not left idle while its call sleeps.
		wait /= 2
	}
	return g.delayedRetry(wait, res.Booked, res.Reason.String(), dim)
}

// inFlightRetry bounds the delay of a call that waits for an in-flight slot.
const inFlightRetry = time.Second

// delayedRetry returns a CapacityWait whose NextRetryDelay is wait plus
// jitter, or DeadlineUnmeetable if that lands past the call's deadline.
func (g *gatedCall) delayedRetry(wait time.Duration, booked bool, why, dim string) error {
	d := g.delay(wait, booked)
	if !g.dispatchBy.IsZero() && g.opts.Clock.Now().Add(d).After(g.dispatchBy) {
		return deadlineUnmeetable(fmt.Sprintf("%s: retry in %v (%s) lands past the call's schedule-to-close deadline",
			g.scope.Key(), d.Round(time.Millisecond), why), g.scope)
	}
	return capacityWait(d, g.scope, why, dim)
}

// delay is wait plus jitter, never below DefaultMinRetryDelay (Temporal reads
// a zero NextRetryDelay as "not set"). A booked ticket needs only a little
// jitter to arrive after its time; an unbooked retry spreads wider so denied
// calls do not come back together.
func (g *gatedCall) delay(wait time.Duration, booked bool) time.Duration {
	wait = max(wait, 0)
	spread := min(wait/5, 2*time.Second)
	if booked {
		spread = min(wait/20, 250*time.Millisecond)
	}
	spread = max(spread, 10*time.Millisecond)
	d := wait + time.Duration(g.opts.Rand()*float64(spread))
	return max(d, DefaultMinRetryDelay)
}

func (g *gatedCall) jitterFunc() func(time.Duration) time.Duration {
	return func(n time.Duration) time.Duration { return time.Duration(g.opts.Rand() * float64(n)) }
}
