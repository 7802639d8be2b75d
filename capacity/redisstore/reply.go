package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrBadReply is returned (wrapped) when a script's reply does not have the
// expected shape: a version mismatch or a key overwritten by something else.
// Nothing in a reply is trusted before it is checked.
var ErrBadReply = errors.New("redisstore: unexpected reply from Redis")

// reply reads a script's array reply in order, checking each element's type.
// The first mismatch is kept in err; later reads return zero values.
type reply struct {
	op  string
	v   []any
	i   int
	err error
}

func newReply(op string, v any) (*reply, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s: got %T, want an array", ErrBadReply, op, v)
	}
	return &reply{op: op, v: a}, nil
}

func (r *reply) fail(want string) {
	if r.err != nil {
		return
	}
	if r.i >= len(r.v) {
		r.err = fmt.Errorf("%w: %s: reply has %d elements, want %s at %d", ErrBadReply, r.op, len(r.v), want, r.i)
		return
	}
	r.err = fmt.Errorf("%w: %s: element %d is %T (%v), want %s", ErrBadReply, r.op, r.i, r.v[r.i], r.v[r.i], want)
}

func (r *reply) next(want string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	if r.i >= len(r.v) {
		r.fail(want)
		return nil, false
	}
	x := r.v[r.i]
	r.i++
	return x, true
}

// more reports whether elements remain.
func (r *reply) more() bool { return r.err == nil && r.i < len(r.v) }

func (r *reply) str() string {
	x, ok := r.next("a string")
	if !ok {
		return ""
	}
	s, ok := x.(string)
	if !ok {
		r.i--
		r.fail("a string")
	}
	return s
}

func (r *reply) int() int64 {
	x, ok := r.next("an integer")
	if !ok {
		return 0
	}
	n, ok := x.(int64)
	if !ok {
		r.i--
		r.fail("an integer")
	}
	return n
}

// float reads a number sent as a string (Redis truncates Lua numbers).
func (r *reply) float() float64 {
	x, ok := r.next("a number string")
	if !ok {
		return 0
	}
	s, ok := x.(string)
	if !ok {
		r.i--
		r.fail("a number string")
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		r.i--
		r.fail("a number string")
		return 0
	}
	return f
}

// time reads unix microseconds; 0 is the zero time.
func (r *reply) time() time.Time {
	us := r.int()
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

// sub reads a nested array.
func (r *reply) sub() *reply {
	x, ok := r.next("an array")
	if !ok {
		return &reply{op: r.op, err: r.err}
	}
	a, ok := x.([]any)
	if !ok {
		r.i--
		r.fail("an array")
		return &reply{op: r.op, err: r.err}
	}
	return &reply{op: r.op, v: a}
}

// result reads an operation's result: a nested array, or one element (a
// string) as a reply of its own.
func (r *reply) result() *reply {
	x, ok := r.next("a result")
	if !ok {
		return &reply{op: r.op, err: r.err}
	}
	if a, ok := x.([]any); ok {
		return &reply{op: r.op, v: a}
	}
	return &reply{op: r.op, v: []any{x}}
}

// check folds a nested reply's error into r.
func (r *reply) check(sub *reply) {
	if r.err == nil && sub.err != nil {
		r.err = sub.err
	}
}
