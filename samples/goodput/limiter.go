package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-dev/tollgate/activities"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// Client-side retry constants of the baselines, as their sources state them.
const (
	// backoffAttempts, backoffBase and backoffCap: the OpenAI cookbook's
	// "retry with exponential backoff" (tenacity: random exponential wait
	// from 1 s to 60 s, six attempts).
	backoffAttempts = 6
	backoffBase     = time.Second
	backoffCap      = time.Minute
	// cookbookAttempts and cookbookPause: the cookbook's parallel processor
	// (five attempts a request; a 15 s pause after a rate-limit error, used
	// here only when the provider states no retry-after).
	cookbookAttempts = 5
	cookbookPause    = 15 * time.Second
)

// clientLimiter runs one model call under a client-side rate limit and
// retries its 429s its own way; past its attempts it returns the error to
// Temporal's retry policy.
type clientLimiter interface {
	do(ctx context.Context, cost testsuite.Charges, send func(context.Context) error) error
}

// limitedActivities are the activities package's ungated activities behind
// a client-side limiter, registered under the same names (Chat, Messages).
type limitedActivities struct {
	openAI    *activities.OpenAI
	anthropic *activities.Anthropic
	limiter   clientLimiter
}

// Chat is activities.OpenAI.Chat under the limiter.
func (a *limitedActivities) Chat(ctx context.Context, req activities.OpenAIChatRequest) (activities.Result, error) {
	var res activities.Result
	err := a.limiter.do(ctx, estimate(testsuite.OpenAI, req.InputTokens, req.MaxTokens), func(ctx context.Context) error {
		var err error
		res, err = a.openAI.Chat(ctx, req)
		return err
	})
	return res, err
}

// Messages is activities.Anthropic.Messages under the limiter.
func (a *limitedActivities) Messages(ctx context.Context, req activities.AnthropicMessagesRequest) (activities.Result, error) {
	var res activities.Result
	err := a.limiter.do(ctx, estimate(testsuite.Anthropic, req.InputTokens, req.MaxTokens), func(ctx context.Context) error {
		var err error
		res, err = a.anthropic.Messages(ctx, req)
		return err
	})
	return res, err
}

// estimate is a call's cost as the cookbook counts it before sending: one
// request, and the tokens the provider charges up front — OpenAI's prompt
// plus max_tokens, Anthropic's input tokens (its output is metered as
// produced, so no client knows it beforehand).
func estimate(p testsuite.Provider, input, maxTokens int64) testsuite.Charges {
	var c testsuite.Charges
	c[testsuite.Requests] = 1
	if p == testsuite.Anthropic {
		c[testsuite.InputTokens] = input
		return c
	}
	c[testsuite.Tokens] = input + maxTokens
	return c
}

// requestsOnly paces requests at RPM (one at a time, no burst) and retries
// a 429 after a random exponential backoff.
type requestsOnly struct {
	rpm *rate.Limiter
}

// newRequestsOnly returns the requests-only limiter for limits l.
func newRequestsOnly(l testsuite.Limits) *requestsOnly {
	return &requestsOnly{rpm: rate.NewLimiter(rate.Limit(float64(l.RequestsPerMinute)/60), 1)}
}

func (r *requestsOnly) do(ctx context.Context, _ testsuite.Charges, send func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		if err := r.rpm.Wait(ctx); err != nil {
			return err
		}
		err := send(ctx)
		if err == nil || !tgerrors.IsRateLimited(err) || attempt+1 == backoffAttempts {
			return err
		}
		ceiling := math.Min(float64(backoffCap), float64(backoffBase)*math.Pow(2, float64(attempt)))
		if err := sleep(ctx, time.Duration(rand.Float64()*ceiling)); err != nil {
			return err
		}
	}
}

// cookbook is the OpenAI cookbook's parallel processor: a limiter per
// per-minute limit at 100 % (a bucket of a whole minute, refilling at the
// limit), each call waiting until every limiter has room for its estimate
// (Anthropic's output limiter stays idle: no estimate charges it); after a
// 429 every call pauses until the provider's retry-after.
type cookbook struct {
	limiters []dimensionLimiter
	mu       sync.Mutex
	until    time.Time // no call is sent before
}

type dimensionLimiter struct {
	dim testsuite.Dimension
	lim *rate.Limiter
}

// newCookbook returns the cookbook's limiters for limits l.
func newCookbook(l testsuite.Limits) *cookbook {
	c := &cookbook{}
	for _, d := range testsuite.Dimensions() {
		if n := l.Limit(d); n > 0 && !d.Daily() {
			c.limiters = append(c.limiters, dimensionLimiter{d, rate.NewLimiter(rate.Limit(float64(n)/60), int(n))})
		}
	}
	return c
}

func (c *cookbook) do(ctx context.Context, cost testsuite.Charges, send func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		if err := sleep(ctx, time.Until(c.pausedUntil())); err != nil {
			return err
		}
		if err := c.reserve(ctx, cost); err != nil {
			return err
		}
		err := send(ctx)
		if err == nil || !tgerrors.IsRateLimited(err) || attempt+1 == cookbookAttempts {
			return err
		}
		wait := cookbookPause
		if d, ok := tgerrors.DetailsOf(err); ok && d.RetryAfter > 0 {
			wait = d.RetryAfter
		}
		c.pause(time.Now().Add(wait))
	}
}

// reserve waits until every limiter has room for cost, taking it from all
// of them at once.
func (c *cookbook) reserve(ctx context.Context, cost testsuite.Charges) error {
	now := time.Now()
	var delay time.Duration
	var held []*rate.Reservation
	for _, l := range c.limiters {
		if cost[l.dim] <= 0 {
			continue
		}
		r := l.lim.ReserveN(now, int(cost[l.dim]))
		if !r.OK() {
			return fmt.Errorf("cookbook: a call of %d %s is larger than the limit", cost[l.dim], l.dim)
		}
		held = append(held, r)
		delay = max(delay, r.DelayFrom(now))
	}
	if err := sleep(ctx, delay); err != nil {
		for _, r := range held {
			r.Cancel()
		}
		return err
	}
	return nil
}

func (c *cookbook) pausedUntil() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.until
}

func (c *cookbook) pause(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until.After(c.until) {
		c.until = until
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
