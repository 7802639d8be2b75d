package capacity

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// fill sets every field of the value v points to, exported or not, to a
// value that differs from its zero and from the other fields', so that a
// field a record's fields method leaves out shows in a round trip.
func fill(v reflect.Value, n *int64) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1_800_000_000+*n, *n).UTC()))
			return
		}
		for i := range v.NumField() {
			f := v.Field(i)
			fill(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), n)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), n)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*time.Location]() {
			v.Set(reflect.ValueOf(time.UTC))
			return
		}
		panic("fill: a pointer to " + v.Type().Elem().String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(*n % 100)
	case reflect.Uint32:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	default:
		panic("fill: a " + v.Kind().String())
	}
}

// TestRecordsKeepEveryField fills every field of each kind of record and
// requires it back from the record's encoding: a field added to a record
// type and not to its fields method fails it.
func TestRecordsKeepEveryField(t *testing.T) {
	sc := Scope{Provider: OpenAI, LimitGroup: "gpt-4o", Credential: "fill"}
	var r scopeRecords
	var n int64
	fill(reflect.ValueOf(&r.blob).Elem(), &n)
	le, tk, f, lapsed, fl, id, k, live, rec := &Lease{}, &Ticket{}, &failureCount{}, new(int64), &flowState{}, &flowID{}, &keyState{}, &[numBuckets]float64{}, &recentRecord{}
	for _, p := range []any{le, tk, f, lapsed, fl, id, k, live, rec} {
		fill(reflect.ValueOf(p).Elem(), &n)
	}
	le.Scope = sc // kept as the scope the records are of
	r.leases = map[string]*Lease{le.Call: le}
	r.tickets = map[string]*Ticket{tk.Call: tk}
	r.failures = map[string]*failureCount{"call": f}
	r.lapsed = map[string]*int64{"lease": lapsed}
	r.flows = map[flowID]*flowState{*id: fl}
	r.flowOrder = map[int]*flowID{3: id}
	r.keys = map[string]*keyState{"key": k}
	r.live = map[liveNode]*[numBuckets]float64{{2, 7}: live}
	r.recent = map[int64]*recentRecord{9: rec}

	got, err := parseRecords(sc, r.named())
	require.NoError(t, err)
	require.Equal(t, r, got)
}

// TestRecordsRefuseBadInput gives the decoder records cut short, of
// another format, with bytes past their fields or with unknown names.
func TestRecordsRefuseBadInput(t *testing.T) {
	sc := Scope{Provider: OpenAI, LimitGroup: "gpt-4o", Credential: "bad"}
	empty := newMemScope(sc, 0).records()
	good := empty.named()
	le := encodeRecord((&Lease{ID: "c#1", Call: "c"}).fields)
	for name, in := range map[string]Records{
		"no blob":              {},
		"blob of format 2":     {Blob: append([]byte{2}, good.Blob[1:]...)},
		"blob cut short":       {Blob: good.Blob[:len(good.Blob)-1]},
		"blob running on":      {Blob: append(good.Blob, 0)},
		"record without name":  {Blob: good.Blob, Fields: map[string][]byte{"": le}},
		"unknown kind":         {Blob: good.Blob, Fields: map[string][]byte{"zc": le}},
		"lease cut short":      {Blob: good.Blob, Fields: map[string][]byte{"lc": le[:len(le)-2]}},
		"lease of a flow kind": {Blob: good.Blob, Fields: map[string][]byte{"wc": le}},
		"place not a number":   {Blob: good.Blob, Fields: map[string][]byte{"o": encodeRecord((&flowID{}).fields)}},
	} {
		_, err := parseRecords(sc, in)
		require.ErrorIs(t, err, ErrBadRecord, name)
	}
	_, err := parseRecords(sc, good)
	require.NoError(t, err)
}

// FuzzParseRecords decodes a blob and one record from arbitrary bytes: it
// never panics, and what decodes encodes to records that decode to the
// same encoding.
// Seeded from testdata/fuzz/FuzzParseRecords and a scope's records.
func FuzzParseRecords(f *testing.F) {
	sc := Scope{Provider: OpenAI, LimitGroup: "gpt-4o", Credential: "fuzz"}
	m := newMemScope(sc, 0)
	m.limits.RequestsPerMinute = 60
	m.leases.put("c", Lease{ID: "c#1", Call: "c", Scope: sc, GrantedAt: time.Unix(1_800_000_000, 5).UTC(), Mark: Mark{Valid: true, Seq: 1}})
	m.tickets.put(Ticket{Call: "d", At: time.Unix(1_800_000_001, 0).UTC(), Key: "tenant"})
	recs := m.records()
	named := recs.named()
	for name, value := range named.Fields {
		f.Add(named.Blob, name, value)
	}
	f.Fuzz(func(t *testing.T, blob []byte, name string, value []byte) {
		r, err := parseRecords(sc, Records{Blob: blob, Fields: map[string][]byte{name: value}})
		if err != nil {
			return
		}
		again, err := parseRecords(sc, r.named())
		require.NoError(t, err)
		require.Equal(t, r.named(), again.named()) // encodings: a NaN is not equal to itself
	})
}
