package systems_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// realNow is the fixed real time the test enterprises are placed against.
var realNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newEnterprise builds a default enterprise in a temp dir, served over HTTP.
func newEnterprise(t testing.TB, opts ...func(*sandbox.Options)) *sandbox.Enterprise {
	t.Helper()
	o := sandbox.Options{Now: func() time.Time { return realNow }}
	for _, f := range opts {
		f(&o)
	}
	e, err := sandbox.New(context.Background(), t.TempDir(), o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

// resp is an HTTP answer.
type resp struct {
	status   int
	body     []byte
	replayed bool
}

// json decodes the body as an object.
func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(r.body)))
	d.UseNumber()
	require.NoError(t, d.Decode(&m), "body %s", r.body)
	return m
}

// errCode is the error code of an error answer.
func (r resp) errCode(t testing.TB) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "not an error body: %s", r.body)
	require.NotEmpty(t, e["message"])
	return e["code"].(string)
}

// call sends one request to the enterprise over HTTP; key is the
// Idempotency-Key ("" for none).
func call(t testing.TB, e *sandbox.Enterprise, method, path, body, key string) resp {
	t.Helper()
	req, err := http.NewRequest(method, e.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"), "%s %s: %s", method, path, b)
	return resp{status: res.StatusCode, body: b, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
}

// feed reads a system's whole event log over HTTP.
func feed(t testing.TB, e *sandbox.Enterprise, system string) []systems.Event {
	t.Helper()
	r := call(t, e, "GET", "/"+system+"/events?after=0&limit=5000", "", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var f systems.Feed
	require.NoError(t, json.Unmarshal(r.body, &f))
	require.False(t, f.More)
	return f.Events
}

// eventsAfter returns the events of system appended after the first n.
func eventsAfter(t testing.TB, e *sandbox.Enterprise, system string, n int) []systems.Event {
	t.Helper()
	all := feed(t, e, system)
	require.GreaterOrEqual(t, len(all), n)
	return all[n:]
}

func types(evs []systems.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// attrs decodes an event's attrs keeping integers exact.
func attrs(t testing.TB, ev systems.Event) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(ev.Attrs)))
	d.UseNumber()
	require.NoError(t, d.Decode(&m))
	return m
}

func links(t testing.TB, ev systems.Event) []string {
	t.Helper()
	var l []string
	require.NoError(t, json.Unmarshal(ev.Links, &l))
	return l
}

// counts is the number of events in each system.
func counts(t testing.TB, e *sandbox.Enterprise) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, s := range sandbox.Systems {
		m[s] = len(feed(t, e, s))
	}
	return m
}
