package testsuite_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// An answer's remaining is the bucket when the request was admitted
// (HeadersAtAdmission) or when it is answered, after what was admitted and
// refilled meanwhile (HeadersAtAnswer, the default).
func TestHeadersAt(t *testing.T) {
	const spent = 1000 // admitted while the call runs
	tests := []struct {
		at      testsuite.HeadersTime
		counted int64 // of what happened while the call ran: spent less the refill
	}{
		{testsuite.HeadersAtAnswer, spent - 500}, // 30,000 a minute: 500 in the call's second
		{testsuite.HeadersAtAdmission, 0},
	}
	for _, tt := range tests {
		t.Run(tt.at.String(), func(t *testing.T) {
			fp, clock := start(t, testsuite.Limits{TokensPerMinute: 30000}, testsuite.Limits{}, func(o *testsuite.Options) {
				o.HeadersAt = tt.at
				o.Latency = func(testsuite.Call, int64) time.Duration { return time.Second }
			})
			type answer struct {
				remaining string
				err       error
			}
			done := make(chan answer, 1)
			go func() {
				_, resp, err := chat(t, openaiClient(fp), "hi", 5)
				a := answer{err: err}
				if resp != nil {
					a.remaining = resp.Header.Get("x-ratelimit-remaining-tokens")
				}
				done <- a
			}()
			require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
			_, err := fp.Spend(scopeOf(gpt), testsuite.Demand{InputTokens: spent - 10, MaxTokens: 10})
			require.NoError(t, err)
			clock.Advance(time.Second)
			a := <-done
			require.NoError(t, a.err)
			admitted := fp.Entries()[0].Remaining[testsuite.Tokens]
			assert.Equal(t, strconv.FormatInt(admitted-tt.counted, 10), a.remaining)
		})
	}
}

func TestHeadersTimeText(t *testing.T) {
	for _, name := range []string{"answer", "admission"} {
		var h testsuite.HeadersTime
		require.NoError(t, h.UnmarshalText([]byte(name)))
		b, err := h.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, name, string(b))
	}
	var h testsuite.HeadersTime
	assert.ErrorContains(t, h.UnmarshalText([]byte("later")), `unknown HeadersTime "later"`)
	_, err := testsuite.HeadersTime(9).MarshalText()
	assert.Error(t, err)
}
