package redisstore

import (
	"fmt"
	"strconv"

	"github.com/tollgate-dev/tollgate/capacity"
)

// The wire layouts: what Go sends the scripts, declared once. Each layout
// is generated into lua/constants.lua (LAYOUTS), where readLayout reads an
// operation's fields by name (lua/ops.lua); Go writes them through a
// layoutWriter, which checks each field's name and width against the
// declaration, so no position is numbered by hand on either side.

// wireField is one field of a layout: its name, how many values it spans
// (a per-dimension field spans one per dimension) and whether its values
// are text (kindString) or numbers (kindNumber).
type wireField struct {
	name  string
	width int
	kind  string
}

// wireLayout is the fields of one message, in the order they are sent.
type wireLayout []wireField

// size is the number of values a message of l holds.
func (l wireLayout) size() int {
	n := 0
	for _, f := range l {
		n += f.width
	}
	return n
}

func num(name string) wireField  { return wireField{name, 1, kindNumber} }
func text(name string) wireField { return wireField{name, 1, kindString} }

// perDim is a field with a number per dimension, in capacity.Dimension order.
func perDim(name string) wireField { return wireField{name, capacity.NumDimensions, kindNumber} }

// perBucket is a field with a number per per-minute bucket.
func perBucket(name string) wireField { return wireField{name, int(capacity.Tokens) + 1, kindNumber} }

// reserveLayout is a reserve operation after its code and call. The limits
// signature comes last: a batch's reserves share the first one's (batch.go),
// and scripts before 4.0 read the first 15 fields and the signature.
var reserveLayout = wireLayout{
	num("day_boundary"), num("next_boundary"), num("attempt"), num("class"), perDim("charges"),
	num("ttl"), num("deadline"), num("book"), num("since"),
	num("rank"), num("floor"), num("weight"), // the class rule (Request.EffectiveRule) and flow weight
	text("key"), num("share"), num("tokens_per_day"), num("fair_start"), // its fairness
	text("limits"),
}

// settleLayout is a settle operation after its code and call: the final
// charges minus the reserved ones (delta), then what the lease was granted
// with. Scripts before 4.0 read the first 10 fields.
var settleLayout = wireLayout{
	num("day_boundary"), num("next_boundary"), num("attempt"), perDim("delta"),
	num("class"), text("key"), num("weight"), perBucket("reserved"), num("granted_at"),
}

// observeLayout is an observe operation after its code and call (”):
// what the provider reported of each bucket, a field per bucket named
// field.bucket (has_limit.requests, ...), then the observed call's mark.
var observeLayout = func() wireLayout {
	l := wireLayout{num("day_boundary"), num("next_boundary")}
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		for _, f := range []string{"has_limit", "limit", "has_remaining", "remaining"} {
			l = append(l, num(f+"."+d.String()))
		}
	}
	return append(l, num("mark_valid"), perBucket("mark"), perBucket("excluded"), perBucket("inflight"),
		num("mark_seq")) // Mark.Seq (6.2)
}()

// releaseLayout is a release operation after its code and call (scripts
// 5.2 and later): the lease id, or ” for the call's ticket.
var releaseLayout = wireLayout{num("day_boundary"), num("next_boundary"), text("id")}

// limitsLayout is the limits signature (limits.go), its fields separated
// by '|'.
var limitsLayout = wireLayout{
	text("format"), perDim("limit"), num("burst_ns"), num("burst"), num("token_burst"), num("margin"),
	text("zone"), num("offset"), num("zone_offset"), num("standard_floor"), num("bulk_floor"), num("aging_ns"),
}

// layoutWriter writes a message of a layout, field by field.
type layoutWriter struct {
	layout wireLayout
	next   int
	values []any
}

func newLayoutWriter(l wireLayout) *layoutWriter {
	return &layoutWriter{layout: l, values: make([]any, 0, l.size())}
}

// put writes field name's values: it must be the layout's next field, with
// as many values as it spans (a programming error otherwise, which every
// test that sends the message finds).
func (w *layoutWriter) put(name string, values ...any) *layoutWriter {
	if w.next >= len(w.layout) || w.layout[w.next].name != name || w.layout[w.next].width != len(values) {
		panic(fmt.Sprintf("redisstore: field %q with %d values written where the layout has %v", name, len(values), w.expected()))
	}
	w.next++
	w.values = append(w.values, values...)
	return w
}

func (w *layoutWriter) expected() any {
	if w.next >= len(w.layout) {
		return "no more fields"
	}
	return w.layout[w.next]
}

// done returns the message; every field must have been written.
func (w *layoutWriter) done() []any {
	if w.next != len(w.layout) {
		panic(fmt.Sprintf("redisstore: message ends where the layout has %v", w.expected()))
	}
	return w.values
}

// wireText writes a value of a text message (the limits signature): a
// number as Go formats it exactly ('g', shortest), text as it is.
func wireText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	panic(fmt.Sprintf("redisstore: no wire text for %T", v))
}
