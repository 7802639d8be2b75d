package storetest

import (
	"errors"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// cases is the whole contract, in the order Run runs it.
var cases = concat(bucketCases, leaseCases, ticketCases, observeCases, followCases, blockCases, halfOpenCases, inputCases, hardeningCases)

// Cases returns the whole contract, in the order Run runs it, for a store
// that runs all but some of it (say which, and why, where you leave a case
// out).
func Cases() []Case { return concat(cases) }

func concat(groups ...[]Case) []Case {
	var all []Case
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

var bucketCases = []Case{
	{"StartsAtBurstLevel", func(h *harness) {
		l := rpm(60) // 1/s, burst 5 s: capacity 5
		for range 5 {
			h.grant(h.req(l, one()))
		}
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyCapacity, res.Reason)
		assert.Equal(h.t, capacity.Requests, res.Binding)
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now))
		assert.False(h.t, res.Booked)
	}},
	{"RefillsContinuously", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		h.deny(h.req(l, one()))
		h.clock.Advance(500 * time.Millisecond)
		h.deny(h.req(l, one()))
		h.clock.Advance(500 * time.Millisecond)
		h.grant(h.req(l, one()))
		h.clock.Advance(time.Hour) // refills only up to the burst
		for range 5 {
			h.grant(h.req(l, one()))
		}
		h.deny(h.req(l, one()))
	}},
	{"AllOrNothing", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // 50 req, 500 tok
		h.grant(h.req(l, tokens(300, 100)))
		before := h.snap(testScope)
		res := h.deny(h.req(l, tokens(100, 100)))
		assert.Equal(h.t, capacity.Tokens, res.Binding)
		assert.Equal(h.t, 1*time.Second, res.RetryAt.Sub(res.Now)) // 100 tokens at 100/s
		after := h.snap(testScope)
		assert.Equal(h.t, before.Level, after.Level, "a denial charges nothing")
	}},
	{"SafetyMarginScalesLimits", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 120, SafetyMargin: 0.5, Burst: 5 * time.Second} // 1/s, capacity 5
		for range 5 {
			h.grant(h.req(l, one()))
		}
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now))
	}},
	{"DemandLargerThanTheLimitIsRefused", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // capacity 500
		_, err := h.store.Reserve(h.ctx, h.req(l, tokens(4000, 2001)))
		var tooLarge *capacity.DemandTooLargeError
		require.ErrorAs(h.t, err, &tooLarge)
		assert.True(h.t, errors.Is(err, capacity.ErrDemandTooLarge))
		assert.Equal(h.t, capacity.Tokens, tooLarge.Dimension)
		assert.Equal(h.t, int64(6001), tooLarge.Charge)
		assert.Equal(h.t, 6000.0, tooLarge.Capacity, "the largest call the limit admits")
		l.TokenBurst = 7000
		h.clock.Advance(70 * time.Second) // a raised capacity fills by refill, not at once
		h.grant(h.req(l, tokens(4000, 2001)))
	}},
	{"DemandLargerThanTheBucketWaitsForAFullBucket", func(h *harness) {
		// 30,000 TPM at the default margin and burst: the bucket holds 2,375
		// tokens; a 1,900-token prompt with max_tokens 512 is within the
		// limit, so the provider serves it: it waits for a full bucket.
		l := capacity.Limits{TokensPerMinute: 30000}
		capTokens := l.Budgets()[capacity.Tokens].Capacity
		require.Equal(h.t, 2375.0, capTokens)
		h.grant(h.req(l, tokens(1000, 0)))
		res := h.deny(h.req(l, tokens(1900, 512)))
		assert.Equal(h.t, capacity.Tokens, res.Binding)
		h.clock.Set(res.RetryAt)
		h.grant(h.req(l, tokens(1900, 512)))
		assert.Less(h.t, h.level(capacity.Tokens), 0.0, "the bucket runs into debt")
	}},
	{"UnlimitedDimensionsNeverBind", func(h *harness) {
		for range 100 {
			h.grant(h.req(capacity.Limits{}, tokens(1e6, 1e6)))
		}
	}},
	{"ConcurrentReservesNeverOvergrant", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 600, SafetyMargin: 1, Burst: 5 * time.Second} // capacity 50
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					r := capacity.Request{Scope: testScope, Limits: l, Call: "g" + itoa(g) + "-" + itoa(i), Attempt: 1, Charges: one()}
					res, err := h.store.Reserve(h.ctx, r)
					if !assert.NoError(h.t, err) {
						return
					}
					if res.Granted {
						mu.Lock()
						granted++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		assert.Equal(h.t, 50, granted)
	}},
	{"DailyQuotaResetsAtBoundary", func(h *harness) {
		pacific, err := time.LoadLocation("America/Los_Angeles")
		if err != nil {
			pacific = time.FixedZone("PDT", -7*3600)
		}
		l := capacity.Limits{RequestsPerDay: 3, SafetyMargin: 1, DayReset: capacity.DayBoundary{Location: pacific}}
		for range 3 {
			h.grant(h.req(l, one()))
		}
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyDailyQuota, res.Reason)
		assert.Equal(h.t, capacity.RequestsPerDay, res.Binding)
		want := l.DayReset.Next(Epoch)
		assert.True(h.t, res.RetryAt.Equal(want), "reset at %v, want %v", res.RetryAt, want)
		assert.Equal(h.t, 19*time.Hour, want.Sub(Epoch)) // 12:00Z is 05:00 PDT; midnight PDT is 07:00Z
		h.clock.Set(want)
		h.grant(h.req(l, one()))
	}},
}
