package secrets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixture is one case of testdata/keys.json.
type fixture struct {
	S    string `json:"s"`
	Note string `json:"note"`
}

// fixtures are the cases of testdata/keys.json: names that look like keys,
// near misses that do not, and messages with their masked form.
type fixtures struct {
	Keys    []fixture `json:"keys"`
	NotKeys []fixture `json:"not_keys"`
	Mask    []struct {
		In   string `json:"in"`
		Want string `json:"want"`
	} `json:"mask"`
}

func loadFixtures(tb testing.TB) fixtures {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "keys.json"))
	require.NoError(tb, err)
	var fx fixtures
	require.NoError(tb, json.Unmarshal(data, &fx))
	require.NotEmpty(tb, fx.Keys)
	require.NotEmpty(tb, fx.NotKeys)
	return fx
}

func TestLooksLikeKey(t *testing.T) {
	fx := loadFixtures(t)
	for _, tt := range fx.Keys {
		t.Run("key/"+tt.Note, func(t *testing.T) {
			require.True(t, LooksLikeKey(tt.S), "%q", tt.S)
			require.NotEqual(t, tt.S, Mask(tt.S))
		})
	}
	for _, tt := range fx.NotKeys {
		t.Run("not/"+tt.Note, func(t *testing.T) {
			require.False(t, LooksLikeKey(tt.S), "%q", tt.S)
			require.Equal(t, tt.S, Mask(tt.S))
			require.Empty(t, Find(tt.S))
		})
	}
}

func TestMask(t *testing.T) {
	for _, tt := range loadFixtures(t).Mask {
		t.Run(tt.In, func(t *testing.T) {
			got := Mask(tt.In)
			require.Equal(t, tt.Want, got)
			require.Equal(t, got, Mask(got), "masking is idempotent")
		})
	}
}

// TestMaskHidesEveryKey masks each key of the fixtures in a sentence: the
// key does not survive, nothing around it changes, and the result holds no
// key.
func TestMaskHidesEveryKey(t *testing.T) {
	for _, tt := range loadFixtures(t).Keys {
		t.Run(tt.Note, func(t *testing.T) {
			in := "before " + tt.S + ", after."
			got := Mask(in)
			require.NotContains(t, got, tt.S)
			require.True(t, strings.HasPrefix(got, "before "), got)
			require.True(t, strings.HasSuffix(got, ", after."), got)
			require.Contains(t, got, masked)
			require.Empty(t, Find(got), got)
		})
	}
}

func TestFind(t *testing.T) {
	const key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123"
	const hex = "3f9a1c7e5b2d4f608a1b3c5d7e9f0a2b"
	tests := []struct {
		name string
		in   string
		want []Span
	}{
		{"none", "Rate limit reached for gpt-4o-mini in us-east-1.", nil},
		{"whole", key, []Span{{0, len(key)}}},
		{"two", key + " and " + hex + ".", []Span{{0, len(key)}, {len(key) + 5, len(key) + 5 + len(hex)}}},
		{"bearer label included", "Bearer abc.def", []Span{{0, 14}}},
		{"prefix inside a word", "desk-abcdefgh", nil},
		{"random token around a prefix", "x" + key, []Span{{0, len(key) + 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Find(tt.in))
		})
	}
}

// FuzzMask: masking never panics, leaves no key behind (so it is
// idempotent), leaves a string without a key as it is, and hides a key of
// the fixtures put anywhere in the text.
func FuzzMask(f *testing.F) {
	fx := loadFixtures(f)
	var keys []string
	for _, k := range fx.Keys {
		keys = append(keys, k.S)
	}
	for i, k := range fx.Keys {
		f.Add(k.S, uint8(i))
	}
	for i, k := range fx.NotKeys {
		f.Add(k.S, uint8(i))
	}
	for i, m := range fx.Mask {
		f.Add(m.In, uint8(i))
	}
	f.Fuzz(func(t *testing.T, s string, k uint8) {
		out := Mask(s)
		if spans := Find(out); len(spans) > 0 {
			t.Fatalf("%q masked to %q, which still holds %q", s, out, out[spans[0].Start:spans[0].End])
		}
		if Mask(out) != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, Mask(out))
		}
		if !LooksLikeKey(s) && out != s {
			t.Fatalf("%q holds no key but masked to %q", s, out)
		}
		key := keys[int(k)%len(keys)]
		if strings.Contains(s, key) {
			return
		}
		if out := Mask(s + " " + key + " " + s); strings.Contains(out, key) {
			t.Fatalf("key %q survived: %q", key, out)
		}
	})
}

func BenchmarkMask(b *testing.B) {
	msgs := []string{
		"Rate limit reached for gpt-4o-mini in organization org-xxxxxxxx on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.",
		"Incorrect API key provided: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123. You can find your API key at https://platform.openai.com.",
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			Mask(m)
		}
	}
}
