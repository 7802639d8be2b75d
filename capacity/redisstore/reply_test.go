package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestBadReplies: a reply of the wrong shape is an ErrBadReply, never a
// panic.
func TestBadReplies(t *testing.T) {
	req := capacity.Request{Scope: keysScope, Call: "c", Attempt: 1, Charges: oneCharge()}
	h := header{now: time.Unix(1, 0)}
	for _, tc := range []struct {
		name string
		v    []any
	}{
		{"empty", []any{}},
		{"unknown kind", []any{"z"}},
		{"kind not a string", []any{int64(1)}},
		{"grant cut short", []any{"G", int64(1)}},
		{"grant without a lease", []any{"G", int64(1), int64(0)}},
		{"grant with a lease of no attempt", []any{"G", int64(1), int64(0), "expires=5"}},
		{"grant with a lease of bad numbers", []any{"G", int64(1), int64(0), "attempt=1 expires=five"}},
		{"denial with a nil", []any{"d", int64(1), nil, int64(0), int64(0)}},
		{"too large with a number capacity", []any{"x", int64(3), int64(600), int64(500)}},
		{"too large with a bad number", []any{"x", int64(3), int64(600), "five hundred"}},
		{"stale without attempt", []any{"s"}},
		{"stored lease with a nested array", []any{"G", int64(0), int64(0), []any{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reply{op: "test", v: tc.v}
			require.NotPanics(t, func() {
				_, _, err := parseReserve(r, h, req)
				require.ErrorIs(t, err, ErrBadReply)
			})
		})
	}
	for _, v := range []any{nil, "OK", int64(3), map[any]any{}} {
		_, err := newReply("test", v)
		require.ErrorIs(t, err, ErrBadReply)
	}
	// A batch header that is not one.
	r := &reply{op: "test", v: []any{"B", "now", "epoch", int64(0), int64(0)}}
	r.header()
	require.ErrorIs(t, r.err, ErrBadReply)
}

func TestParseReserve(t *testing.T) {
	req := capacity.Request{Scope: keysScope, Call: "c", Attempt: 2, Class: capacity.Bulk, Charges: oneCharge()}
	now := time.UnixMicro(1_800_000_000_000_000).UTC()
	h := header{now: now}
	mark := [capacity.NumDimensions]float64{10, 0, 0, 0, 10, 0, 10}
	line := "attempt=2 class=2 granted_at=1800000000000000 expires=1800000060000001 " +
		"charge.requests=1 charge.requests_per_day=1 charge.in_flight=1 mark.requests=10 mark.requests_per_day=10 mark.in_flight=10 unknown.field=3"
	res, room, err := parseReserve(&reply{v: []any{"G", int64(1), int64(1), line}}, h, req)
	require.NoError(t, err)
	require.True(t, room)
	require.Equal(t, capacity.Reservation{
		Granted: true, Probe: true, Now: now,
		Lease: capacity.Lease{
			ID: "c#2", Call: "c", Attempt: 2, Scope: keysScope, Charges: oneCharge(), Class: capacity.Bulk,
			GrantedAt: now, Expires: now.Add(time.Minute + time.Microsecond),
			Mark: capacity.Mark{Valid: true, Granted: mark},
		},
	}, res)
	for _, bad := range []string{"attempt=x expires=1", "attempt", "expires=1800000060000001", "attempt=1"} {
		_, _, err := parseReserve(&reply{v: []any{"G", int64(1), int64(0), bad}}, h, req)
		require.ErrorIs(t, err, ErrBadReply, bad)
	}

	res, _, err = parseReserve(&reply{v: []any{"d", int64(2), int64(0), now.Add(time.Second).UnixMicro(), int64(0),
		int64(capacity.Cooldown), now.Add(time.Second).UnixMicro(), int64(1), "429", int64(5_000_000), int64(1)}}, h, req)
	require.NoError(t, err)
	require.Equal(t, capacity.Reservation{
		Reason: capacity.DenyBlocked, RetryAt: now.Add(time.Second), Now: now,
		Block: capacity.Block{Reason: capacity.Cooldown, Until: now.Add(time.Second), Credential: true, Detail: "429", HalfOpen: 5 * time.Second, Probing: true},
	}, res)

	_, _, err = parseReserve(&reply{v: []any{"x", int64(3), int64(600), "500.5"}}, h, req)
	var tooLarge *capacity.DemandTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, capacity.DemandTooLargeError{Dimension: capacity.Tokens, Charge: 600, Capacity: 500.5}, *tooLarge)
}

func TestSignatureRoundTrip(t *testing.T) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	for _, l := range []capacity.Limits{
		{},
		{RequestsPerMinute: 500, TokensPerMinute: 30000, Burst: 1500 * time.Millisecond, TokenBurst: 9000, SafetyMargin: 0.9},
		{RequestsPerDay: 1000, DayReset: capacity.DayBoundary{Location: pacific, Offset: time.Hour}},
		{TokensPerDay: 7, DayReset: capacity.DayBoundary{Location: time.FixedZone("odd|zone name", -3*3600)}},
		{RequestsPerMinute: 600, StandardFloor: 0.1, BulkFloor: 0.35, AgingAfter: 1500 * time.Millisecond},
	} {
		got, err := parseSignature(signature(l))
		require.NoError(t, err)
		require.Equal(t, signature(l), signature(got))
		require.Equal(t, [3]any{l.StandardFloor, l.BulkFloor, l.AgingAfter}, [3]any{got.StandardFloor, got.BulkFloor, got.AgingAfter})
		require.Equal(t, l.DayReset.Next(time.Now()), got.DayReset.Next(time.Now()))
	}
	_, err = parseSignature("2|x")
	require.ErrorIs(t, err, ErrBadReply)
}

// FuzzParseReserve: whatever a reserve's result holds (an array of any
// shape, a lease line of any bytes), parsing returns a reservation or an
// error wrapping ErrBadReply, never panics, and a grant it accepts has an
// expiry and the request's call.
func FuzzParseReserve(f *testing.F) {
	f.Add("G", int64(1), "attempt=1 class=0 granted_at=1 expires=2 charge.requests=1")
	f.Add("G", int64(0), "attempt=1 expires")
	f.Add("d", int64(2), "")
	f.Add("x", int64(3), "")
	f.Add("G", int64(4), "")
	f.Add("s", int64(5), "")
	req := capacity.Request{Scope: keysScope, Call: "c", Attempt: 1, Charges: oneCharge()}
	h := header{now: time.UnixMicro(1_800_000_000_000_000)}
	f.Fuzz(func(t *testing.T, kind string, n int64, line string) {
		// The result alone, as the head of an array of integers, and as a
		// grant's shape with a lease line.
		for _, v := range [][]any{{kind}, {kind, n, n, n, n, n, n, n, n, n, n, n}, {kind, n, n, line}} {
			res, _, err := parseReserve(&reply{op: "fuzz", v: v}, h, req)
			if err != nil {
				var tooLarge *capacity.DemandTooLargeError
				if !errors.Is(err, ErrBadReply) && !errors.Is(err, capacity.ErrStaleAttempt) && !errors.As(err, &tooLarge) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				continue
			}
			if res.Granted && (res.Lease.Expires.IsZero() || res.Lease.Call != req.Call && res.Lease.Call != "") {
				t.Fatalf("grant without an expiry or with another call: %+v", res)
			}
		}
	})
}
