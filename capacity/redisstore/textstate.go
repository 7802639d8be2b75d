package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/redisscan"
)

// MaxTextStateFor is the longest KeepTextState accepts.
const MaxTextStateFor = 30 * 24 * time.Hour

// ErrInvalidTextStateFor is KeepTextState's error for a duration that is
// not positive or exceeds MaxTextStateFor.
var ErrInvalidTextStateFor = errors.New("redisstore: KeepTextState wants a duration above 0 and at most 30 days")

// KeepTextState makes every scope under the store's prefix keep its state
// in the text form that scripts before 6.0 read, beside the packed one, for
// d from now (Redis TIME, or Options.Clock): each credential that has an
// epoch gets a text_until mark, and each scope of it writes its text again
// at its next save, then on every save until the mark. Workers of 5.x then
// share those scopes' budget instead of failing on them ("unknown scope
// state format"): run it before rolling back to 5.x more than a day after the
// last 5.x worker stopped, or before a deploy from 5.x to rule out the
// refusals the package documentation describes. Each 6.0 save costs about
// what a 5.x save did while the mark lasts.
//
// It returns the number of credentials marked. A credential first used
// after it returns is not marked. Redis unreachable is
// capacity.ErrStoreUnavailable.
func (s *Store) KeepTextState(ctx context.Context, d time.Duration) (int, error) {
	if d <= 0 || d > MaxTextStateFor {
		return 0, fmt.Errorf("%w: %v", ErrInvalidTextStateFor, d)
	}
	now := time.Time{}
	if s.opts.Clock != nil {
		now = s.opts.Clock.Now()
	} else {
		t, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return 0, fmt.Errorf("%w: reading the time: %v", capacity.ErrStoreUnavailable, err)
		}
		now = t
	}
	var tags []string
	err := redisscan.Keys(ctx, s.rdb, "{"+s.opts.Prefix+":*}:epoch", 0, func(key string) {
		tags = append(tags, strings.TrimSuffix(key, ":epoch"))
	})
	if err != nil {
		return 0, fmt.Errorf("%w: listing credentials: %v", capacity.ErrStoreUnavailable, err)
	}
	until := strconv.FormatInt(now.Add(d).UnixMicro(), 10)
	for _, tag := range tags {
		if err := s.rdb.Set(ctx, tag+textUntilSuffix, until, d).Err(); err != nil {
			return 0, fmt.Errorf("%w: marking %s: %v", capacity.ErrStoreUnavailable, tag, err)
		}
	}
	return len(tags), nil
}
