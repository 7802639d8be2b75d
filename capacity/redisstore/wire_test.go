package redisstore

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestSignatureText: the limits signature written through limitsLayout is
// the text scripts before 5.0 compare and parse (a rolling deploy keeps
// one installed limit, not two that alternate).
func TestSignatureText(t *testing.T) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	for _, l := range []capacity.Limits{
		{},
		{RequestsPerMinute: 500, TokensPerMinute: 30_000_000, Burst: 1500 * time.Millisecond, SafetyMargin: 0.9},
		{InputTokensPerMinute: 400_000, OutputTokensPerMinute: 80_000, RequestsPerDay: 10_000, TokensPerDay: 1 << 40,
			MaxInFlight: 8, TokenBurst: 9000, StandardFloor: 0.1, BulkFloor: 0.25, AgingAfter: 90 * time.Second,
			DayReset: capacity.DayBoundary{Location: zone, Offset: 7 * time.Hour}},
	} {
		name, off := "", 0
		if loc := l.DayReset.Location; loc != nil {
			name = loc.String()
			_, off = time.Unix(0, 0).In(loc).Zone()
		}
		before := fmt.Sprintf("3|%d|%d|%d|%d|%d|%d|%d|%d|%s|%d|%s|%s|%d|%d|%s|%s|%d",
			l.RequestsPerMinute, l.InputTokensPerMinute, l.OutputTokensPerMinute, l.TokensPerMinute,
			l.RequestsPerDay, l.TokensPerDay, l.MaxInFlight, int64(l.Burst),
			strconv.FormatFloat(l.Burst.Seconds(), 'g', -1, 64), l.TokenBurst,
			strconv.FormatFloat(l.SafetyMargin, 'g', -1, 64), url.QueryEscape(name), int64(l.DayReset.Offset), off,
			strconv.FormatFloat(l.StandardFloor, 'g', -1, 64), strconv.FormatFloat(l.BulkFloor, 'g', -1, 64), int64(l.AgingAfter))
		require.Equal(t, before, signature(l))
	}
}

// TestLayoutWriter: a message is written field by field in its layout's
// order and widths; anything else is a programming error that panics.
func TestLayoutWriter(t *testing.T) {
	l := wireLayout{num("a"), perBucket("b"), text("c")}
	require.Equal(t, 6, l.size())
	got := newLayoutWriter(l).put("a", 1).put("b", 1, 2, 3, 4).put("c", "x").done()
	require.Equal(t, []any{1, 1, 2, 3, 4, "x"}, got)
	for name, write := range map[string]func(){
		"out of order":   func() { newLayoutWriter(l).put("b", 1, 2, 3, 4) },
		"wrong width":    func() { newLayoutWriter(l).put("a", 1).put("b", 1) },
		"past the end":   func() { newLayoutWriter(l).put("a", 1).put("b", 1, 2, 3, 4).put("c", "x").put("d", 1) },
		"ended too soon": func() { newLayoutWriter(l).put("a", 1).done() },
	} {
		require.Panics(t, write, name)
	}
}
