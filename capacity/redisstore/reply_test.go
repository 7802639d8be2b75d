package redisstore

import (
	"errors"
	"regexp"
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
		{"grant cut short", []any{"g1"}},
		{"grant too long", []any{"g100"}},
		{"grant with a bad flag", []any{"g20"}},
		{"grant without the batch's grant history", []any{"g10"}},
		{"denial with a nil", []any{"d", int64(1), nil, int64(0), int64(0)}},
		{"too large with a number capacity", []any{"x", int64(3), int64(600), int64(500)}},
		{"too large with a bad number", []any{"x", int64(3), int64(600), "five hundred"}},
		{"stale without attempt", []any{"s"}},
		{"stored lease with a nested array", []any{"G", int64(0), int64(0), []any{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reply{op: "test", v: tc.v}
			if tc.name != "grant without the batch's grant history" {
				r.granted = make([]float64, capacity.NumDimensions)
			}
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
	req.TTL = time.Minute + 1500*time.Nanosecond // whole microseconds, as the script adds it
	res, room, err := parseReserve(&reply{v: []any{"g11"}, granted: mark[:]}, h, req)
	require.NoError(t, err)
	require.True(t, room)
	require.Equal(t, capacity.Reservation{
		Granted: true, Probe: true, Now: now,
		Lease: capacity.Lease{
			ID: "c#2", Call: "c", Attempt: 2, Scope: keysScope, Charges: oneCharge(), Class: capacity.Bulk,
			GrantedAt: now, Expires: now.Add(time.Minute + time.Microsecond),
			Mark: capacity.Mark{Valid: true, Granted: [capacity.NumDimensions]float64{10, 0, 0, 0, 10, 0, 10}},
		},
	}, res)

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

// TestScriptsRender: every constant in the scripts is known.
func TestScriptsRender(t *testing.T) {
	left := regexp.MustCompile(`\$[A-Z_]+`)
	for _, name := range []string{"common.lua", "ops.lua", "release.lua", "renew.lua", "block.lua", "unblock.lua", "snapshot.lua", "blockcred.lua", "failure.lua"} {
		require.Empty(t, left.FindAllString(render(mustRead("lua/"+name)), -1), name)
	}
}

// TestUnroll: a marked loop becomes one do ... end block per value, with
// the variable written in; anything else is left as it is.
func TestUnroll(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			name: "marked",
			in:   "x = 0\n  for d = 1, 2 do -- unroll\n    x = x + S[10 + d] -- d\n    y = dd\n  end\nz = 1",
			want: "x = 0\n  do\n    x = x + S[10 + 1] -- 1\n    y = dd\n  end\n  do\n    x = x + S[10 + 2] -- 2\n    y = dd\n  end\nz = 1",
		},
		{
			name: "not marked",
			in:   "for d = 1, 2 do\n  x = d\nend",
			want: "for d = 1, 2 do\n  x = d\nend",
		},
		{
			name: "unclosed",
			in:   "  for d = 1, 2 do -- unroll\n    x = d\nend",
			want: "  for d = 1, 2 do -- unroll\n    x = d\nend",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, unroll(tc.in))
		})
	}
}

// TestScopeSource: the variables of common and of the script stay at the
// top of the chunk, their functions and code go inside one function, and
// a script without the marker is all code.
func TestScopeSource(t *testing.T) {
	common := "local S\n-- @functions\nlocal function f() return S end\n"
	require.Equal(t,
		"local S\nlocal X\nreturn (function()\n-- @functions\nlocal function f() return S end\n\n-- @functions\nreturn X\nend)()\n",
		scopeSource(common, "local X\n-- @functions\nreturn X"))
	require.Equal(t,
		"local S\nreturn (function()\n-- @functions\nlocal function f() return S end\n\nreturn f()\nend)()\n",
		scopeSource(common, "return f()"))
}

// FuzzParseReserve: whatever a reserve's result holds (a grant's string of
// any bytes, or an array of any shape), parsing returns a reservation or an
// error wrapping ErrBadReply, never panics, and a grant it accepts has an
// expiry and the request's lease.
func FuzzParseReserve(f *testing.F) {
	f.Add("g10", int64(0))
	f.Add("g", int64(1))
	f.Add("d", int64(2))
	f.Add("x", int64(3))
	f.Add("G", int64(4))
	f.Add("s", int64(5))
	req := capacity.Request{Scope: keysScope, Call: "c", Attempt: 1, Charges: oneCharge()}
	h := header{now: time.UnixMicro(1_800_000_000_000_000)}
	f.Fuzz(func(t *testing.T, kind string, n int64) {
		// The result as a string alone, and as the head of an array of
		// integers (the shape of every result but a fresh grant).
		for _, v := range [][]any{{kind}, {kind, n, n, n, n, n, n, n, n, n, n, n}} {
			res, _, err := parseReserve(&reply{op: "fuzz", v: v, granted: make([]float64, capacity.NumDimensions)}, h, req)
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
