package testsuite_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// BenchmarkFakeProvider measures the requests per second the fake provider
// serves on loopback with limits off, through a raw keep-alive net/http
// client, so it is known never to be the bottleneck of a benchmark. Run it
// without -race:
//
//	go test -run '^$' -bench FakeProvider -benchtime 5s ./testsuite/
func BenchmarkFakeProvider(b *testing.B) {
	cases := []struct {
		name, path, header, value, body string
		noRecord                        bool
	}{
		{"openai", "/v1/chat/completions", "Authorization", "Bearer " + testsuite.DefaultKey,
			`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Classify this support ticket: my invoice is wrong."}],"max_completion_tokens":64}`, false},
		{"anthropic", "/v1/messages", "X-Api-Key", testsuite.DefaultKey,
			`{"model":"claude-sonnet-4-5","max_tokens":64,"system":"You are terse.","messages":[{"role":"user","content":[{"type":"text","text":"Classify this support ticket: my invoice is wrong."}]}]}`, false},
		{"openai-norecord", "/v1/chat/completions", "Authorization", "Bearer " + testsuite.DefaultKey,
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Classify this support ticket: my invoice is wrong."}],"max_completion_tokens":64}`, true},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			fp, err := testsuite.New(testsuite.Options{Output: testsuite.FixedOutput(16), NoRecord: bc.noRecord})
			if err != nil {
				b.Fatal(err)
			}
			defer fp.Close()
			transport := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			url, body := fp.URL()+bc.path, []byte(bc.body)

			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(bc.header, bc.value)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
