package capacity

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrBadRecord is wrapped by the error of a record that does not decode:
// cut short, or written by a version with another layout.
var ErrBadRecord = errors.New("capacity: record does not decode")

// recordFormat is the first byte of every encoded record and blob: a
// reader refuses another.
const recordFormat = 1

// fieldCodec reads or writes a record's fields: each record lists its
// fields once (its fields method), in order, for both directions.
type fieldCodec interface {
	float(*float64)
	int(*int64)
	str(*string)
	flag(*bool)
	time(*time.Time)
	location(**time.Location)
	// count reads or writes the length of a list that follows: a reader
	// fails past most.
	count(n *int, most int)
}

// intField reads or writes an integer field of any integer type. It calls
// the codecs as what they are: a local given to an interface's method
// moves to the heap, one allocation a field.
func intField[T ~int | ~int8 | ~int32 | ~int64 | ~uint32](c fieldCodec, p *T) {
	switch c := c.(type) {
	case *encoder:
		x := int64(*p)
		c.int(&x)
	case *decoder:
		var x int64
		c.int(&x)
		*p = T(x)
	default:
		x := int64(*p)
		c.int(&x)
		*p = T(x)
	}
}

// countField is fieldCodec.count, calling the codecs as intField does.
func countField(c fieldCodec, n *int, most int) {
	switch c := c.(type) {
	case *encoder:
		x := *n
		c.count(&x, most)
	case *decoder:
		var x int
		c.count(&x, most)
		*n = x
	default:
		x := *n
		c.count(&x, most)
		*n = x
	}
}

func floats(c fieldCodec, s []float64) {
	for i := range s {
		c.float(&s[i])
	}
}

func ints(c fieldCodec, s []int64) {
	for i := range s {
		c.int(&s[i])
	}
}

// encoder writes fields to buf.
type encoder struct{ buf []byte }

// float writes a number whole (a byte 0 for zero, 1 and a varint for an
// integer of at most 2^53, 2 and its 8 bytes for any other): most of a
// scope's numbers are zero or whole.
func (e *encoder) float(p *float64) {
	switch x := *p; {
	case x == 0:
		e.buf = append(e.buf, floatZero)
	case x == math.Trunc(x) && math.Abs(x) <= 1<<53:
		e.buf = binary.AppendVarint(append(e.buf, floatInt), int64(x))
	default:
		e.buf = binary.LittleEndian.AppendUint64(append(e.buf, floatBits), math.Float64bits(x))
	}
}

// The kinds of an encoded number.
const (
	floatZero = 0
	floatInt  = 1
	floatBits = 2
)

func (e *encoder) int(p *int64) { e.buf = binary.AppendVarint(e.buf, *p) }
func (e *encoder) str(p *string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(*p)))
	e.buf = append(e.buf, *p...)
}
func (e *encoder) flag(p *bool) {
	b := byte(0)
	if *p {
		b = 1
	}
	e.buf = append(e.buf, b)
}

// time writes the zero time as 0, any other as 1, then its seconds and
// nanoseconds since the epoch (its location is not kept: a decoded time is
// UTC).
func (e *encoder) time(p *time.Time) {
	if p.IsZero() {
		e.buf = append(e.buf, 0)
		return
	}
	e.buf = append(e.buf, 1)
	e.buf = binary.AppendVarint(e.buf, p.Unix())
	e.buf = binary.AppendVarint(e.buf, int64(p.Nanosecond()))
}

// location writes a location by name: "" for nil (UTC).
func (e *encoder) location(p **time.Location) {
	name := ""
	if *p != nil {
		name = (*p).String()
	}
	e.str(&name)
}

func (e *encoder) count(n *int, _ int) { e.buf = binary.AppendUvarint(e.buf, uint64(*n)) }

// decoder reads fields from buf; the first failure is kept in err and
// every later field reads as zero.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadRecord, what)
	}
	d.buf = nil
}

func (d *decoder) float(p *float64) {
	*p = 0
	if len(d.buf) < 1 {
		d.fail("a number cut short")
		return
	}
	kind := d.buf[0]
	d.buf = d.buf[1:]
	switch kind {
	case floatZero:
	case floatInt:
		var x int64
		d.int(&x)
		*p = float64(x)
	case floatBits:
		if len(d.buf) < 8 {
			d.fail("a number cut short")
			return
		}
		*p = math.Float64frombits(binary.LittleEndian.Uint64(d.buf))
		d.buf = d.buf[8:]
	default:
		d.fail(fmt.Sprintf("a number of kind %d", kind))
	}
}

func (d *decoder) int(p *int64) {
	x, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail("an integer cut short")
		x = 0
	} else {
		d.buf = d.buf[n:]
	}
	*p = x
}

func (d *decoder) str(p *string) {
	l, n := binary.Uvarint(d.buf)
	if n <= 0 || uint64(len(d.buf)-n) < l {
		d.fail("a string cut short")
		*p = ""
		return
	}
	*p = string(d.buf[n : n+int(l)])
	d.buf = d.buf[n+int(l):]
}

func (d *decoder) flag(p *bool) {
	if len(d.buf) < 1 || d.buf[0] > 1 {
		d.fail("a flag cut short or neither 0 nor 1")
		*p = false
		return
	}
	*p = d.buf[0] == 1
	d.buf = d.buf[1:]
}

func (d *decoder) time(p *time.Time) {
	var set bool
	d.flag(&set)
	if !set {
		*p = time.Time{}
		return
	}
	var sec, nsec int64
	d.int(&sec)
	d.int(&nsec)
	if nsec < 0 || nsec >= 1e9 {
		d.fail("a time out of range")
	}
	if d.err != nil {
		*p = time.Time{}
		return
	}
	*p = time.Unix(sec, nsec).UTC()
}

// locations caches the locations decoded by name: decoding a scope's blob
// loads its day-reset location once.
var locations sync.Map // string -> *time.Location

// location reads a location by name. A name this machine's time zone
// database lacks fails the decoder.
func (d *decoder) location(p **time.Location) {
	var name string
	d.str(&name)
	switch {
	case name == "" || d.err != nil:
		*p = nil
	case name == "UTC":
		*p = time.UTC
	case name == "Local":
		*p = time.Local
	default:
		if loc, ok := locations.Load(name); ok {
			*p = loc.(*time.Location)
			return
		}
		loc, err := time.LoadLocation(name)
		if err != nil {
			d.fail(fmt.Sprintf("day reset location %q unknown here (%v)", name, err))
			*p = nil
			return
		}
		locations.Store(name, loc)
		*p = loc
	}
}

func (d *decoder) count(n *int, most int) {
	x, k := binary.Uvarint(d.buf)
	if k <= 0 || x > uint64(most) {
		d.fail(fmt.Sprintf("a count cut short or over %d", most))
		*n = 0
		return
	}
	d.buf = d.buf[k:]
	*n = int(x)
}

// encodeRecord returns v's fields, after the format byte.
func encodeRecord(fields func(fieldCodec)) []byte {
	return appendRecord(make([]byte, 0, 128), fields)
}

// appendRecord appends v's fields, after the format byte, to buf.
func appendRecord(buf []byte, fields func(fieldCodec)) []byte {
	e := &encoder{buf: append(buf, recordFormat)}
	fields(e)
	return e.buf
}

// record returns the fields of one record, after the format byte, in a
// slice of their size; e keeps its buffer for the next (one encoder
// encodes a write's records, one allocation each).
func (e *encoder) record(fields func(fieldCodec)) []byte {
	e.buf = append(e.buf[:0], recordFormat)
	fields(e)
	return bytes.Clone(e.buf)
}

// decodeRecord reads b into the fields it lists, and fails if b is not of
// this format, is cut short or runs on past them.
func decodeRecord(b []byte, fields func(fieldCodec)) error {
	return new(decoder).record(b, fields)
}

// record is decodeRecord with d, which it resets first: one decoder reads
// the records of a load.
func (d *decoder) record(b []byte, fields func(fieldCodec)) error {
	if len(b) == 0 || b[0] != recordFormat {
		return fmt.Errorf("%w: not of format %d", ErrBadRecord, recordFormat)
	}
	*d = decoder{buf: b[1:]}
	fields(d)
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%w: %d bytes past its fields", ErrBadRecord, len(d.buf))
	}
	return d.err
}
