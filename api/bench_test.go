package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newServer serves e over a real listener until the test ends.
func newServer(t testing.TB, e *env) string {
	t.Helper()
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// BenchmarkPostFacts posts batches of 1 000 new facts through the real
// handler, over a real listener, into the real store, and reports facts/s.
func BenchmarkPostFacts(b *testing.B) {
	const batch = 1000
	d := db(b)
	srv := New(Config{Store: d, Verifier: &fakeVerifier{}, AdminKey: adminKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	_, key, err := d.CreateTenant(context.Background(), "bench-"+b.Name())
	require.NoError(b, err)
	client := ts.Client()

	// Bodies are built before the clock runs; each fact is new.
	bodies := make([][]byte, b.N)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i := range bodies {
		var buf bytes.Buffer
		buf.WriteString(`{"facts":[`)
		for j := range batch {
			if j > 0 {
				buf.WriteByte(',')
			}
			n := i*batch + j
			fmt.Fprintf(&buf, `{"source":"payments","type":"refund_created","subject":"order:o_%d","external_id":"payments-%d",`+
				`"occurred_at":%q,"attrs":{"refund_id":"re_%d","amount":%d,"currency":"USD","reason":"requested","status":"succeeded"},`+
				`"links":["ticket:t_%d"]}`, n%5000, n, at.Add(time.Duration(n)*time.Millisecond).Format(time.RFC3339Nano), n, 100+n%9000, n%5000)
		}
		buf.WriteString(`]}`)
		bodies[i] = buf.Bytes()
	}
	b.SetBytes(int64(len(bodies[0])))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		req, err := http.NewRequest("POST", ts.URL+"/v1/facts", bytes.NewReader(bodies[i]))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s", body)
		var got struct{ Inserted int }
		require.NoError(b, json.Unmarshal(body, &got))
		require.Equal(b, batch, got.Inserted)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "facts/s")
}

// BenchmarkDecodeFacts is the API's own share of a batch of 1 000: decoding
// and validating, without the store.
func BenchmarkDecodeFacts(b *testing.B) {
	const batch = 1000
	var buf bytes.Buffer
	buf.WriteString(`{"facts":[`)
	for n := range batch {
		if n > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"source":"payments","type":"refund_created","subject":"order:o_%d","external_id":"payments-%d",`+
			`"occurred_at":"2026-11-29T10:00:00.%03dZ","attrs":{"refund_id":"re_%d","amount":%d,"currency":"USD","reason":"requested","status":"succeeded"},`+
			`"links":["ticket:t_%d"]}`, n, n, n, n, 100+n, n)
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		facts, err := decodeFacts(bytes.NewReader(body))
		if err != nil || len(facts) != batch {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "facts/s")
}
