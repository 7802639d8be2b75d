package headers

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// resetForm is one case of testdata/reset-forms.json: a value as a header or
// message states it, the unit it states waits in ("s" or "ms"), and the
// wait ParseReset reads from fixtureTime.
type resetForm struct {
	Value    string   `json:"value"`
	Unit     string   `json:"unit"`
	WaitS    *float64 `json:"wait_s"`
	AtLeastS *float64 `json:"at_least_s"`
	Absent   bool     `json:"absent"`
	Note     string   `json:"note"`
}

func loadResetForms(tb testing.TB) []resetForm {
	tb.Helper()
	var forms []resetForm
	testenv.LoadFixtures(tb, "reset-forms.json", &forms, true)
	require.NotEmpty(tb, forms)
	return forms
}

func formUnit(tb testing.TB, u string) time.Duration {
	switch u {
	case "s":
		return time.Second
	case "ms":
		return time.Millisecond
	}
	tb.Fatalf("unit %q", u)
	return 0
}

func TestParseResetForms(t *testing.T) {
	for _, f := range loadResetForms(t) {
		t.Run(f.Note, func(t *testing.T) {
			got, ok := ParseReset(f.Value, formUnit(t, f.Unit), fixtureTime)
			switch {
			case f.Absent:
				require.False(t, ok, "ParseReset(%q) = %v", f.Value, got)
				require.Zero(t, got)
			case f.AtLeastS != nil:
				require.True(t, ok, f.Value)
				require.GreaterOrEqual(t, got, seconds(*f.AtLeastS))
			default:
				require.True(t, ok, f.Value)
				require.InDelta(t, float64(seconds(*f.WaitS)), float64(got), float64(time.Microsecond), "ParseReset(%q) = %v", f.Value, got)
			}
		})
	}
}

// TestResetHeadersTakeEveryForm checks that every header tollgate reads a
// wait or reset from reads each form: both families' reset headers, for
// OpenAI, Anthropic and a provider tollgate does not know (gateways with
// OpenAI's names), and retry-after and retry-after-ms.
func TestResetHeadersTakeEveryForm(t *testing.T) {
	date := fixtureTime.Format(http.TimeFormat)
	for _, f := range loadResetForms(t) {
		if f.WaitS == nil {
			continue
		}
		want := float64(seconds(*f.WaitS))
		t.Run(f.Note, func(t *testing.T) {
			retry := "retry-after"
			if f.Unit == "ms" {
				retry = "retry-after-ms"
			}
			got, ok := RetryAfter(toHeader(map[string]string{"date": date, retry: f.Value}), fixtureTime.Add(time.Hour))
			require.True(t, ok, "%s: %q", retry, f.Value)
			require.InDelta(t, want, float64(got), float64(time.Microsecond), "%s: %q", retry, f.Value)
			if f.Unit != "s" {
				return
			}
			for _, c := range []struct {
				provider capacity.Provider
				header   string
				dim      capacity.Dimension
			}{
				{capacity.OpenAI, "x-ratelimit-reset-tokens", capacity.Tokens},
				{"gateway", "x-ratelimit-reset-requests", capacity.Requests},
				{capacity.Anthropic, "anthropic-ratelimit-output-tokens-reset", capacity.OutputTokens},
				{"gateway", "anthropic-ratelimit-input-tokens-reset", capacity.InputTokens},
			} {
				obs := Parse(c.provider, toHeader(map[string]string{"date": date, c.header: f.Value}), fixtureTime.Add(time.Hour))
				d := obs.Dims[c.dim]
				require.True(t, d.HasReset, "%s %s: %q", c.provider, c.header, f.Value)
				require.InDelta(t, want, float64(d.ResetIn), float64(time.Microsecond), "%s %s: %q", c.provider, c.header, f.Value)
			}
		})
	}
}

// FuzzParseReset checks ParseReset's contract on any input: no panic, a
// wait only when positive, a unit-less number below the epoch read as a
// wait in its unit, and a duration with units as ParseDuration reads it.
func FuzzParseReset(f *testing.F) {
	for _, form := range loadResetForms(f) {
		f.Add(form.Value, form.Unit == "ms", int64(0))
	}
	for _, fc := range loadHeaderFixtures(f) {
		for _, v := range fc.Headers {
			f.Add(v, false, int64(0))
		}
	}
	f.Fuzz(func(t *testing.T, v string, millis bool, skew int64) {
		unit := time.Second
		if millis {
			unit = time.Millisecond
		}
		ref := fixtureTime.Add(time.Duration(skew) * time.Second)
		got, ok := ParseReset(v, unit, ref)
		if ok != (got > 0) {
			t.Fatalf("ParseReset(%q) = %v, %v", v, got, ok)
		}
		if n, isNumber := parseNumber(v); isNumber && n*float64(unit) < float64(epochFrom) {
			if want := n * float64(unit); ok && math.Abs(float64(got)-want) > 1 {
				t.Fatalf("ParseReset(%q, %v) = %v, want %v", v, unit, got, time.Duration(want))
			}
		}
		if d, isDuration := ParseDuration(v); isDuration && d > 0 && d != got {
			if _, isNumber := parseNumber(v); !isNumber {
				t.Fatalf("ParseReset(%q) = %v; ParseDuration = %v", v, got, d)
			}
		}
	})
}
