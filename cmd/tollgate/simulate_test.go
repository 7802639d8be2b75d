package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// loadWorkload reads a workload of testdata.
func loadWorkload(t *testing.T, name string) []simCall {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	calls, err := readWorkload(f, name)
	require.NoError(t, err)
	return calls
}

// mixedConfig is testdata/mixed-config.json as simulate reads it.
func mixedConfig(t *testing.T) simConfig {
	t.Helper()
	f := defaultSimFlags()
	require.NoError(t, loadSimConfig(filepath.Join("testdata", "mixed-config.json"), &f))
	c, err := f.simConfig()
	require.NoError(t, err)
	return c
}

// group returns the stats named name of gs.
func group(t *testing.T, gs []simStats, name string) simStats {
	t.Helper()
	for _, g := range gs {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %q in %+v", name, gs)
	return simStats{}
}

// The testdata workloads through the simulator: the figures the limits
// imply, fairness by weight, classes first, caps and deadlines refused.
func TestSimulateWorkloads(t *testing.T) {
	steady := simConfig{Provider: capacity.OpenAI, Workload: loadWorkload(t, "steady.jsonl"), Latency: 2 * time.Second,
		Limits: capacity.Limits{RequestsPerMinute: 1000, TokensPerMinute: 60000, Burst: 5 * time.Second, SafetyMargin: 1}}
	mixed := mixedConfig(t)
	mixed.Workload = loadWorkload(t, "mixed.json")
	recorded := simConfig{Provider: capacity.OpenAI, Workload: loadWorkload(t, "recorded.jsonl"), Latency: 2 * time.Second,
		Limits: capacity.Limits{RequestsPerMinute: 500, TokensPerMinute: 200000}}

	for _, tc := range []struct {
		name  string
		cfg   simConfig
		check func(t *testing.T, r simReport)
	}{
		{"steady: tokens bind", steady, func(t *testing.T, r simReport) {
			// 300 × (1000 + 500) tokens at 1000 a second, less the 5 s
			// bucket, plus the last call's 2 s.
			assert.InDelta(t, 447, time.Duration(r.Makespan).Seconds(), 0.5)
			assert.Equal(t, "tokens", r.Binding)
			assert.InDelta(t, 1, r.Utilization, 0.01)
			assert.Equal(t, 300, r.Total.Completed)
			assert.Zero(t, r.RateLimited)
			assert.Equal(t, map[string]int64{"requests": 1000, "tokens": 60000}, r.Limits)
			assert.Equal(t, int64(450000), r.Total.Tokens)
		}},
		{"mixed: classes, weights, caps, deadline", mixed, func(t *testing.T, r simReport) {
			assert.Equal(t, 136, r.Total.Calls)
			assert.Equal(t, 133, r.Total.Completed)
			assert.Equal(t, map[string]int{"key_quota": 2, "deadline": 1}, r.Total.Refused)
			assert.Zero(t, r.RateLimited)
			acme, beta := group(t, r.Keys, "acme"), group(t, r.Keys, "beta")
			assert.Less(t, time.Duration(acme.WaitP50), time.Duration(beta.WaitP50)*2/3, "acme weighs 3, beta 1: acme's calls go sooner")
			assert.Equal(t, map[string]int{"key_quota": 2}, group(t, r.Keys, "gamma").Refused, "3000 tokens a day: three calls of 1000")
			assert.Equal(t, map[string]int{"deadline": 1}, beta.Refused)
			web := group(t, r.Classes, "interactive")
			assert.Equal(t, 10, web.Completed)
			assert.LessOrEqual(t, time.Duration(web.WaitMax), time.Second, "interactive goes before the bulk backlog")
			assert.Equal(t, []string{"standard", "interactive", "bulk"}, []string{r.Classes[0].Name, r.Classes[1].Name, r.Classes[2].Name})
			assert.InDelta(t, 1, r.Total.TokenShare, 1e-9)
		}},
		{"recorded: an hour with a spike", recorded, func(t *testing.T, r simReport) {
			assert.Equal(t, 720, r.Total.Calls)
			assert.Equal(t, 720, r.Total.Completed)
			assert.Zero(t, r.RateLimited)
			ms := time.Duration(r.Makespan)
			assert.True(t, ms > 59*time.Minute && ms < 61*time.Minute, "the hour of arrivals, plus the last call: %v", ms)
			std, web := group(t, r.Classes, "standard"), group(t, r.Classes, "interactive")
			assert.Greater(t, time.Duration(std.WaitP95), time.Minute, "the spike queues standard calls")
			assert.Less(t, time.Duration(web.WaitP95), 5*time.Second, "interactive calls pass the spike's queue")
			assert.Len(t, r.Keys, 4)
			assert.Less(t, r.ProviderMinFraction["tokens"], 1.0)
			assert.Greater(t, r.ProviderMinFraction["tokens"], 0.05, "without -headers the gate keeps to its burst: the provider never runs low")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runSimulation(tc.cfg)
			require.NoError(t, err)
			tc.check(t, r)
			again, err := runSimulation(tc.cfg)
			require.NoError(t, err)
			assert.Equal(t, r, again, "deterministic")
		})
	}
}

// The simulated provider: a bucket enforced per second draws 429s (and the
// gate still completes every call); with -headers the gate follows the
// provider's remaining and uses its whole-minute bucket without a 429.
func TestSimulateProvider(t *testing.T) {
	base := simConfig{Provider: capacity.OpenAI, Calls: 500, Input: 1000, MaxTokens: 500, Output: 250, Latency: 2 * time.Second,
		Limits: capacity.Limits{RequestsPerMinute: 500, TokensPerMinute: 150000}}

	perSecond := base
	perSecond.ProviderWindow = time.Second
	r, err := runSimulation(perSecond)
	require.NoError(t, err)
	assert.Positive(t, r.RateLimited, "the gate's 5 s burst overflows a provider that enforces per second")
	assert.Equal(t, 500, r.Total.Completed)

	headers := base
	headers.Headers = true
	r, err = runSimulation(headers)
	require.NoError(t, err)
	assert.Zero(t, r.RateLimited)
	// 750,000 tokens at 2,500 a second, less the provider's full minute
	// (150,000), plus the last call's 2 s.
	t.Logf("with headers: makespan %v, the provider's bucket used %.2f%%, its lowest tokens %.3f", time.Duration(r.Makespan), 100*r.ProviderUtilization, r.ProviderMinFraction["tokens"])
	assert.InEpsilon(t, 242, time.Duration(r.Makespan).Seconds(), 0.02)
	assert.Less(t, r.ProviderMinFraction["tokens"], 0.05, "the provider's bucket is used to the bottom")
	assert.Greater(t, r.ProviderUtilization, 0.97)
	assert.LessOrEqual(t, r.ProviderUtilization, 1.0)
}

// simulate -json prints one object with the documented fields; the flags
// given override the -config file.
func TestSimulateJSON(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		tokens float64
		calls  float64
	}{
		{"config", []string{"-config", "testdata/mixed-config.json"}, 60000, 136},
		{"a flag over the config", []string{"-config", "testdata/mixed-config.json", "-tpm", "120000"}, 120000, 136},
		{"the config after the flag", []string{"--tpm", "120000", "--config", "testdata/mixed-config.json"}, 120000, 136},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"simulate", "-workload", "testdata/mixed.json", "-json"}, tt.args...)
			require.Equal(t, exitOK, run(context.Background(), args, &out, &errOut), errOut.String())
			var m map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &m))
			for _, f := range []string{"provider", "limits", "burst_s", "safety_margin", "makespan_s", "calls_per_second", "denials", "binding", "utilization",
				"provider_utilization", "provider_429s", "provider_min_remaining", "provider_min_fraction", "total", "classes", "keys"} {
				assert.Contains(t, m, f)
			}
			assert.Equal(t, "openai", m["provider"])
			assert.Equal(t, tt.tokens, m["limits"].(map[string]any)["tokens"])
			assert.Equal(t, 1.0, m["safety_margin"], "from the config")
			assert.Equal(t, 2.0, m["burst_s"], "from the config")
			total := m["total"].(map[string]any)
			assert.Equal(t, tt.calls, total["calls"])
			assert.Equal(t, map[string]any{"deadline": 1.0, "key_quota": 2.0}, total["refused"])
			assert.IsType(t, 0.0, total["wait_p95_s"])
			classes := m["classes"].([]any)
			require.Len(t, classes, 3)
			assert.Equal(t, "standard", classes[0].(map[string]any)["name"])
			assert.Len(t, m["keys"], 4)
		})
	}
	var a, b bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"simulate", "-workload", "testdata/mixed.json", "-config", "testdata/mixed-config.json", "-json"}, &a, io.Discard))
	require.Equal(t, exitOK, run(context.Background(), []string{"simulate", "-workload", "testdata/mixed.json", "-config", "testdata/mixed-config.json", "-tpm", "120000", "-json"}, &b, io.Discard))
	var ra, rb struct {
		Makespan float64 `json:"makespan_s"`
	}
	require.NoError(t, json.Unmarshal(a.Bytes(), &ra))
	require.NoError(t, json.Unmarshal(b.Bytes(), &rb))
	assert.Less(t, rb.Makespan, ra.Makespan*0.6, "twice the tokens per minute")
}

// The text report: the summary lines, then a table per class and key.
func TestSimulateText(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"simulate", "-workload", "testdata/mixed.json", "-config", "testdata/mixed-config.json"}, &out, &errOut), errOut.String())
	text := out.String()
	t.Log("\n" + text)
	for _, w := range []string{"136 calls (openai accounting) against requests=600 tokens=60000 burst=2s margin=1.00\n", "makespan ", "admission wait p50 ",
		"binding        tokens (utilization ", "provider       0 rate-limit errors (429); least remaining: requests ", "refused        1 deadline, 2 key_quota\n",
		"GROUP", "class interactive", "key acme", "key gamma          5      3     2 key_quota"} {
		assert.Contains(t, text, w)
	}
}

// -plot writes a well-formed, self-contained SVG (or an HTML page holding
// it and the summary) of the provider's remaining over time.
func TestSimulatePlot(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		file   string
		panels []string
	}{
		{"remaining.svg", []string{"provider remaining tokens", "provider remaining requests", "calls"}},
		{"remaining.html", []string{"provider remaining tokens", "provider remaining requests", "calls"}},
		{"anthropic.svg", []string{"provider remaining tokens", "calls"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			args := []string{"simulate", "-workload", "testdata/recorded.jsonl", "-rpm", "500", "-tpm", "200000", "-plot", path}
			if strings.HasPrefix(tt.file, "anthropic") {
				args = []string{"simulate", "-workload", "testdata/recorded.jsonl", "-provider", "anthropic", "-itpm", "80000", "-otpm", "16000", "-plot", path}
			}
			var out, errOut bytes.Buffer
			require.Equal(t, exitOK, run(context.Background(), args, &out, &errOut), errOut.String())
			assert.Contains(t, out.String(), "plot           "+path)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			doc := string(raw)
			if strings.HasSuffix(tt.file, ".html") {
				assert.True(t, strings.HasPrefix(doc, "<!DOCTYPE html>"))
				assert.Contains(t, doc, "720 calls (openai accounting)", "the summary")
				assert.Contains(t, doc, "</html>")
				doc = doc[strings.Index(doc, "<svg") : strings.Index(doc, "</svg>")+len("</svg>")]
			}
			for _, ref := range []string{"http://", "https://", "<script", "href="} {
				if ref == "http://" {
					doc2 := strings.ReplaceAll(doc, `xmlns="http://www.w3.org/2000/svg"`, "")
					assert.NotContains(t, doc2, ref, "self-contained")
					continue
				}
				assert.NotContains(t, doc, ref, "self-contained")
			}
			svg := parseSVG(t, doc)
			assert.Equal(t, tt.panels, svg.titles)
			assert.GreaterOrEqual(t, len(svg.lines), len(tt.panels)+1)
			for name, pts := range svg.lines {
				assert.Greater(t, pts, 50, "line %s has points", name)
				assert.LessOrEqual(t, pts, 2*plotColumns+2, "line %s: at most two points per column", name)
			}
		})
	}
}

// svgDoc is what parseSVG found: the panels' titles and each line's
// number of points, by its title.
type svgDoc struct {
	titles []string
	lines  map[string]int
}

// parseSVG decodes doc as XML (failing t if it is not well-formed) and
// collects the panel titles and polylines.
func parseSVG(t *testing.T, doc string) svgDoc {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	out := svgDoc{lines: map[string]int{}}
	var stack []xml.StartElement
	var points string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
				assert.Equal(t, "http://www.w3.org/2000/svg", el.Name.Space)
			}
			stack = append(stack, el)
			if el.Name.Local == "polyline" {
				for _, a := range el.Attr {
					if a.Name.Local == "points" {
						points = a.Value
					}
				}
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) < 2 {
				continue
			}
			top, parent := stack[len(stack)-1], stack[len(stack)-2]
			switch {
			case top.Name.Local == "text" && parent.Name.Local == "g" && hasAttr(top, "font-weight", "bold"):
				out.titles = append(out.titles, string(el))
			case top.Name.Local == "title" && parent.Name.Local == "polyline":
				out.lines[string(el)] = len(strings.Fields(points))
			}
		}
	}
	assert.Equal(t, "svg", root)
	return out
}

func hasAttr(el xml.StartElement, name, value string) bool {
	for _, a := range el.Attr {
		if a.Name.Local == name && a.Value == value {
			return true
		}
	}
	return false
}

// Workload files: JSON arrays or lines, arrivals as seconds, durations or
// times; every mistake named with where it is.
func TestReadWorkload(t *testing.T) {
	for _, tt := range []struct {
		name  string
		input string
		want  []simCall
		err   string
	}{
		{name: "json lines, seconds", input: "{\"at\": 0.5, \"input_tokens\": 10, \"max_tokens\": 20, \"output_tokens\": 5}\n\n{\"at\": 2, \"input_tokens\": 1, \"class\": \"bulk\", \"fairness_key\": \"acme\", \"latency\": 1.5, \"deadline\": \"30s\"}\n",
			want: []simCall{{At: 500 * time.Millisecond, Input: 10, MaxTokens: 20, Output: 5}, {At: 2 * time.Second, Input: 1, Class: "bulk", Key: "acme", Latency: 1500 * time.Millisecond, Deadline: 30 * time.Second}}},
		{name: "json array, durations", input: ` [{"at": "1m30s", "input_tokens": 7}, {"at": "0s", "output_tokens": 3}]`,
			want: []simCall{{At: 90 * time.Second, Input: 7}, {Output: 3}}},
		{name: "recorded times", input: "{\"at\": \"2026-03-02T09:00:10Z\", \"input_tokens\": 1}\n{\"at\": \"2026-03-02T09:00:00.250Z\", \"input_tokens\": 2}\n",
			want: []simCall{{At: 9750 * time.Millisecond, Input: 1}, {Input: 2}}},
		{name: "empty", input: " \n", err: "test: no calls"},
		{name: "empty array", input: "[]", err: "test: no calls"},
		{name: "no arrival", input: `{"input_tokens": 1}`, err: `test:1: no "at"`},
		{name: "unknown field", input: "{\"at\": 0}\n{\"at\": 1, \"prompt_tokens\": 5}", err: `test:2: json: unknown field "prompt_tokens"`},
		{name: "unknown field in an array", input: `[{"at": 0, "tokens": 5}]`, err: `test: json: unknown field "tokens"`},
		{name: "bad arrival", input: `{"at": "soon"}`, err: `test:1: at: "soon" is neither`},
		{name: "negative arrival", input: `{"at": -1}`, err: "test:1: at: -1 seconds"},
		{name: "mixed arrivals", input: "{\"at\": 0}\n{\"at\": \"2026-03-02T09:00:10Z\"}", err: "mixes times and offsets"},
		{name: "negative tokens", input: "{\"at\": 0}\n{\"at\": 0, \"output_tokens\": -5}", err: "test:2: negative tokens"},
		{name: "bad fairness key", input: `{"at": 0, "fairness_key": "sk-abc def"}`, err: "test:1: fairness_key"},
		{name: "bad latency", input: `{"at": 0, "latency": "fast"}`, err: `"fast" is not a non-negative duration`},
		{name: "not json", input: "at,input\n0,5\n", err: "test:1: invalid character"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls, err := readWorkload(strings.NewReader(tt.input), "test")
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, calls)
		})
	}
}

// -class and -key take name:field=value,...; a later -class of a name
// replaces the earlier.
func TestClassAndKeyFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		classes classFlag
		keys    keyFlag
		err     string
	}{
		{name: "classes", args: []string{"-class", "premium:rank=3,weight=2", "-class", "batch:rank=0,floor=0.3,aging=2m"},
			classes: classFlag{{Name: "premium", Rank: 3, Weight: 2}, {Name: "batch", Rank: 0, Floor: 0.3, AgingAfter: 2 * time.Minute}}},
		{name: "a class redefined", args: []string{"-class", "premium:rank=3", "-class", "premium:rank=2,weight=4"},
			classes: classFlag{{Name: "premium", Rank: 2, Weight: 4}}},
		{name: "keys", args: []string{"-key", "acme:weight=3,share=0.5,tpd=2000000", "--key", "beta:weight=1"},
			keys: keyFlag{"acme": {Weight: 3, Share: 0.5, TokensPerDay: 2000000}, "beta": {Weight: 1}}},
		{name: "no rank", args: []string{"-class", "premium:weight=2"}, err: "rank= is required"},
		{name: "no name", args: []string{"-class", ":rank=1"}, err: "want name:field=value"},
		{name: "unknown class field", args: []string{"-class", "premium:rank=1,color=red"}, err: `unknown field "color"`},
		{name: "bad number", args: []string{"-key", "acme:weight=heavy"}, err: "weight: strconv.ParseFloat"},
		{name: "no value", args: []string{"-key", "acme:weight"}, err: `"weight": want field=value`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := defaultSimFlags()
			fs := newFlagSet("simulate", "", io.Discard, false)
			f.register(fs)
			err := fs.Parse(tt.args)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.classes, f.classes)
			assert.Equal(t, tt.keys, f.keys)
		})
	}
}

func TestSimulateRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"limits": {"rpm": 60}, "colour": "blue"}`), 0o600))
	undefined := filepath.Join(dir, "undefined.jsonl")
	require.NoError(t, os.WriteFile(undefined, []byte(`{"at": 0, "class": "premium"}`), 0o600))
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"an argument", []string{"workload.json"}, exitUsage, "unexpected argument"},
		{"no workload file", []string{"-workload", filepath.Join(dir, "none.jsonl")}, exitFailure, "no such file"},
		{"unknown config field", []string{"-config", bad}, exitFailure, `bad.json: json: unknown field "colour"`},
		{"undefined class", []string{"-workload", undefined, "-rpm", "60"}, exitFailure, `call 1: class "premium" is not defined (classes: [standard interactive bulk])`},
		{"bad classes", []string{"-class", "a:rank=99", "-rpm", "60"}, exitFailure, "invalid class definitions"},
		{"bad key caps", []string{"-key", "acme:share=2", "-rpm", "60"}, exitFailure, `fairness key "acme"`},
		{"too large", []string{"-tpm", "6000", "-input", "10000"}, exitFailure, "exceeds the largest the limit admits"},
		{"bad plot path", []string{"-rpm", "600", "-calls", "5", "-plot", filepath.Join(dir, "no", "such", "dir.svg")}, exitFailure, "writing the plot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tt.code, run(context.Background(), append([]string{"simulate"}, tt.args...), &out, &errOut))
			assert.Contains(t, errOut.String(), tt.stderr)
		})
	}
}
