package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// signatureOf returns l's signature, cached per store: the canonical text
// the reserve script compares to tell a changed limit, and parses when it
// changed.
func (s *Store) signatureOf(l capacity.Limits) string {
	if v, ok := s.limitCache.Load(l); ok {
		return v.(string)
	}
	sig := signature(l)
	s.sigCache.LoadOrStore(sig, l)
	s.limitCache.Store(l, sig)
	return sig
}

// signature encodes l as text, fields separated by '|': version, the seven
// limits in Dimension order, Burst in nanoseconds and in seconds (as Go
// computes it, so the script's capacity is Limits.Budgets' to the bit),
// TokenBurst, SafetyMargin, the day boundary's location by name, its offset,
// the location's offset at the unix epoch (to rebuild a fixed zone that no
// zone database knows), StandardFloor, BulkFloor and AgingAfter in
// nanoseconds.
func signature(l capacity.Limits) string {
	name, off := "", 0
	if loc := l.DayReset.Location; loc != nil {
		name = loc.String()
		_, off = time.Unix(0, 0).In(loc).Zone()
	}
	limits := make([]any, capacity.NumDimensions)
	for d := range limits {
		limits[d] = l.Limit(capacity.Dimension(d))
	}
	fields := newLayoutWriter(limitsLayout).
		put("format", "3").put("limit", limits...).
		put("burst_ns", int64(l.Burst)).put("burst", l.Burst.Seconds()).put("token_burst", l.TokenBurst).
		put("margin", l.SafetyMargin).put("zone", url.QueryEscape(name)).put("offset", int64(l.DayReset.Offset)).
		put("zone_offset", off).put("standard_floor", l.StandardFloor).put("bulk_floor", l.BulkFloor).
		put("aging_ns", int64(l.AgingAfter)).
		done()
	text := make([]string, len(fields))
	for i, v := range fields {
		text[i] = wireText(v)
	}
	return strings.Join(text, "|")
}

// limitsOf returns the Limits a signature stands for: from this store's cache,
// else decoded (another worker's limits).
func (s *Store) limitsOf(sig string) (capacity.Limits, error) {
	if sig == "" {
		return capacity.Limits{}, nil
	}
	if v, ok := s.sigCache.Load(sig); ok {
		return v.(capacity.Limits), nil
	}
	return parseSignature(sig)
}

func parseSignature(sig string) (capacity.Limits, error) {
	bad := func(err error) (capacity.Limits, error) {
		return capacity.Limits{}, fmt.Errorf("%w: limits signature %q: %v", ErrBadReply, sig, err)
	}
	f := strings.Split(sig, "|")
	if len(f) != 18 || f[0] != "3" {
		return bad(errors.New("wrong shape"))
	}
	var n [8]int64
	for i := range n {
		v, err := strconv.ParseInt(f[1+i], 10, 64)
		if err != nil {
			return bad(err)
		}
		n[i] = v
	}
	tokenBurst, err := strconv.ParseInt(f[10], 10, 64)
	if err != nil {
		return bad(err)
	}
	margin, err := strconv.ParseFloat(f[11], 64)
	if err != nil {
		return bad(err)
	}
	name, err := url.QueryUnescape(f[12])
	if err != nil {
		return bad(err)
	}
	offset, err := strconv.ParseInt(f[13], 10, 64)
	if err != nil {
		return bad(err)
	}
	zone, err := strconv.Atoi(f[14])
	if err != nil {
		return bad(err)
	}
	var floors [2]float64
	for i := range floors {
		if floors[i], err = strconv.ParseFloat(f[15+i], 64); err != nil {
			return bad(err)
		}
	}
	aging, err := strconv.ParseInt(f[17], 10, 64)
	if err != nil {
		return bad(err)
	}
	l := capacity.Limits{
		RequestsPerMinute: n[0], InputTokensPerMinute: n[1], OutputTokensPerMinute: n[2], TokensPerMinute: n[3],
		RequestsPerDay: n[4], TokensPerDay: n[5], MaxInFlight: n[6], Burst: time.Duration(n[7]), TokenBurst: tokenBurst,
		SafetyMargin:  margin,
		DayReset:      capacity.DayBoundary{Offset: time.Duration(offset)},
		StandardFloor: floors[0], BulkFloor: floors[1], AgingAfter: time.Duration(aging),
	}
	if name != "" {
		loc, err := time.LoadLocation(name)
		if err != nil {
			loc = time.FixedZone(name, zone)
		}
		l.DayReset.Location = loc
	}
	return l, nil
}
