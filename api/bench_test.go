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

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
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
// clients=1 posts one batch at a time; clients=4 keeps four in flight. It
// also reports the CPU spent per batch by this process (handler and client)
// and by the database's server processes, which do not depend on what else
// the machine runs.
func BenchmarkPostFacts(b *testing.B) {
	for _, clients := range []int{1, 4} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchPostFacts(b, clients) })
	}
}

func benchPostFacts(b *testing.B, clients int) {
	const batch = 1000
	d := db(b)
	srv := New(Config{Store: d, Actions: service.NewActions(d, service.NewContracts(d, 0), &fakeVerifier{}, nil, nil), TemporalHealth: func(context.Context) error { return nil }, AdminKey: adminKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	_, key, err := d.CreateTenant(context.Background(), "bench-"+b.Name())
	require.NoError(b, err)
	client := ts.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = clients

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
	post := func(body []byte) error {
		req, err := http.NewRequest("POST", ts.URL+"/v1/facts", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var got struct{ Inserted int }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &got) != nil || got.Inserted != batch {
			return fmt.Errorf("status %d: %s", resp.StatusCode, out)
		}
		return nil
	}

	b.SetBytes(int64(len(bodies[0])))
	cpu0 := cpuTimes(d)
	b.ResetTimer()
	start := time.Now()
	work := make(chan []byte)
	errs := make(chan error, clients)
	for range clients {
		go func() {
			var first error
			for body := range work {
				if err := post(body); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, body := range bodies {
		work <- body
	}
	close(work)
	for range clients {
		require.NoError(b, <-errs)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "facts/s")
	if cpu1 := cpuTimes(d); cpu0.ok && cpu1.ok {
		b.ReportMetric(float64((cpu1.self-cpu0.self).Microseconds())/1000/float64(b.N), "api-cpu-ms/batch")
		b.ReportMetric(float64((cpu1.db-cpu0.db).Microseconds())/1000/float64(b.N), "db-cpu-ms/batch")
	}
}

type cpuSample struct {
	self, db time.Duration
	ok       bool
}

// cpuTimes reads the CPU time of this process and of the PostgreSQL
// server processes connected to the test database (from /proc; ok is false
// where that cannot be read).
func cpuTimes(d *postgres.DB) cpuSample {
	rows, err := d.Pool().Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return cpuSample{}
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return cpuSample{}
	}
	self, db, ok := testenv.CPU(pids)
	return cpuSample{self: self, db: db, ok: ok}
}

// BenchmarkDecodeFacts is the API's own share of a batch of 1 000: decoding
// and validating, without the store. path=decodeFacts is what postFacts
// runs; path=encoding-json decodes the same body into []commitlayer.Fact
// with encoding/json, which checks neither names given twice, invalid
// UTF-8, nor any rule of a fact: the baseline, measured in the same run.
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
	for _, path := range []struct {
		name   string
		decode func(io.Reader) ([]commitlayer.Fact, error)
	}{
		{"decodeFacts", func(r io.Reader) ([]commitlayer.Fact, error) { return decodeFacts(r, futureBound{}) }},
		{"encoding-json", func(r io.Reader) ([]commitlayer.Fact, error) {
			var in struct{ Facts []commitlayer.Fact }
			err := json.NewDecoder(r).Decode(&in)
			return in.Facts, err
		}},
	} {
		b.Run("path="+path.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				facts, err := path.decode(bytes.NewReader(body))
				if err != nil || len(facts) != batch {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "facts/s")
		})
	}
}
