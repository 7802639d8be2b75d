package interceptor

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/tollgate-dev/tollgate/capacity"
)

type callStateKey struct{}

// callState is what the gate remembers of one attempt while it runs: the
// heartbeat details the activity itself recorded, so the gate's own
// heartbeats resend them instead of erasing them.
type callState struct {
	mu       sync.Mutex
	details  []any
	recorded bool
}

func (s *callState) setDetails(d []any) {
	s.mu.Lock()
	s.details, s.recorded = d, true
	s.mu.Unlock()
}

func (s *callState) lastDetails() ([]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.details, s.recorded
}

// heartbeatOutbound captures the activity's own heartbeat details.
type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (h *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
		st.setDetails(details)
	}
	h.Next.RecordHeartbeat(ctx, details...)
}

// canHeartbeat reports whether the gate may heartbeat for the activity: it
// must need heartbeats, not be local, and not risk erasing the details a
// previous attempt recorded before this attempt records its own.
func (g *gatedCall) canHeartbeat(ctx context.Context) bool {
	if g.info.IsLocalActivity || g.info.HeartbeatTimeout <= 0 {
		return false
	}
	if _, recorded := g.state.lastDetails(); recorded {
		return true
	}
	return !activity.HasHeartbeatDetails(ctx)
}

func (g *gatedCall) heartbeat(ctx context.Context) {
	details, _ := g.state.lastDetails()
	g.a.outbound.RecordHeartbeat(ctx, details...)
}

// keepalive renews a lease and heartbeats while a call runs.
type keepalive struct {
	mu       sync.Mutex
	lease    capacity.Lease
	quit     chan struct{}
	done     chan struct{}
	stopBeat func(wait bool)
}

// startKeepalive renews the lease every third of its TTL and, where the
// activity needs heartbeats, heartbeats every third of its timeout on a
// goroutine of its own (heartbeatDuring): a heartbeat waits on the
// Temporal server, as long as the client's RPC timeout (10 s by default)
// while the server cannot be reached, and the lease of a call at the
// provider must not lapse meanwhile (the store would give its slot away).
func (g *gatedCall) startKeepalive(ctx context.Context, lease capacity.Lease) *keepalive {
	k := &keepalive{lease: lease, quit: make(chan struct{}), done: make(chan struct{})}
	k.stopBeat = g.heartbeatDuring(ctx, false)
	renewEvery := g.opts.LeaseTTL / 3
	go func() {
		defer close(k.done)
		for {
			t := g.opts.Clock.NewTimer(renewEvery)
			select {
			case <-k.quit:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			k.mu.Lock()
			cur := k.lease
			k.mu.Unlock()
			renewed, err := g.opts.Store.Renew(context.WithoutCancel(ctx), cur, g.opts.LeaseTTL)
			if err != nil {
				g.logger(ctx).Warn("tollgate: lease renewal failed", "scope", g.scope.Key(), "error", err)
				g.a.root.tel.leaseLost(ctx, g)
				continue
			}
			k.mu.Lock()
			k.lease = renewed
			k.mu.Unlock()
		}
	}()
	return k
}

// stop ends the keepalive and returns the latest lease. It does not wait
// for a heartbeat under way: the caller heartbeats from then on
// (heartbeatDuring).
func (k *keepalive) stop() capacity.Lease {
	k.stopBeat(false)
	close(k.quit)
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// heartbeatDuring heartbeats every third of the heartbeat timeout (first
// at once, if now) until stop is called, for waits in which the activity
// cannot heartbeat itself. stop(true) waits for a heartbeat under way to
// return; stop(false) does not, for a caller whose lease must not wait on
// the Temporal server (the heartbeat then ends on its own, with no other
// after it).
func (g *gatedCall) heartbeatDuring(ctx context.Context, now bool) (stop func(wait bool)) {
	if !g.canHeartbeat(ctx) {
		return func(bool) {}
	}
	if now {
		g.heartbeat(ctx)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	every := max(g.info.HeartbeatTimeout/3, 10*time.Millisecond)
	go func() {
		defer close(done)
		for {
			t := g.opts.Clock.NewTimer(every)
			select {
			case <-quit:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
				g.heartbeat(ctx)
			}
		}
	}()
	var once sync.Once
	return func(wait bool) {
		once.Do(func() { close(quit) })
		if wait {
			<-done
		}
	}
}
