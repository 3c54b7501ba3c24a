package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

func TestFacts(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("facts")
	_, other := e.tenant("facts-other")

	batch := map[string]any{"facts": []any{
		fact(1, "account:acc_1"), fact(2, "account:acc_2"),
		map[string]any{"source": "tickets", "type": "note_added", "subject": "ticket:t_9", "external_id": "tickets-1",
			"occurred_at": "2026-11-29T10:00:01.5+01:00", "attrs": map[string]any{"amount": 2500.0, "body": "done"},
			"links": []string{"order:o_1"}, "seq": 77},
	}}
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"inserted":3,"duplicates":0}`, string(res.Body))
	// Stored with the notice to the verifications watching the subjects
	// (the reconcilers deliver it), and the batch's digest: its kinds, and
	// a link.
	notices := e.notices(tenantID(t, e, key))
	require.Len(t, notices, 1)
	require.Equal(t, []commitlayer.Subject{"account:acc_1", "account:acc_2", "order:o_1", "ticket:t_9"}, notices[0].Subjects)
	require.NotNil(t, notices[0].Digest)
	require.True(t, notices[0].Digest.Linked)
	require.Len(t, notices[0].Digest.Kinds, 2)
	require.Equal(t, commitlayer.FactType{Source: "tickets", Type: "note_added"}, notices[0].Digest.Kinds[1].FactType)

	// Stored as given, attrs normalized (2500.0 is the integer 2500), time in UTC.
	got, err := e.db.FactsOfKinds(context.Background(), tenantID(t, e, key), []commitlayer.FactType{{Source: "tickets", Type: "note_added"}}, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(2500), got[0].Attrs["amount"])
	require.Equal(t, time.Date(2026, 11, 29, 9, 0, 1, 500_000_000, time.UTC), got[0].OccurredAt.UTC())
	require.Equal(t, []commitlayer.Subject{"order:o_1"}, got[0].Links)

	// Posting again: all duplicates, nothing new to notify.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: batch})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"inserted":0,"duplicates":3}`, string(res.Body))
	require.Len(t, e.notices(tenantID(t, e, key)), 1)

	// Another tenant's facts are its own: the same external ids insert.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: other, Body: batch})
	require.JSONEq(t, `{"inserted":3,"duplicates":0}`, string(res.Body))

	res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(3, "account:acc_3")}}})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"inserted":1,"duplicates":0}`, string(res.Body))

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var srcs struct {
		Sources []struct {
			Source       string     `json:"source"`
			EverReported bool       `json:"ever_reported"`
			FactCount    int64      `json:"fact_count"`
			LastFactAt   *time.Time `json:"last_fact_at"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &srcs))
	require.Len(t, srcs.Sources, 2)
	require.Equal(t, "ledger", srcs.Sources[0].Source)
	require.True(t, srcs.Sources[0].EverReported)
	require.EqualValues(t, 3, srcs.Sources[0].FactCount)
	require.NotNil(t, srcs.Sources[0].LastFactAt)
	require.Equal(t, "tickets", srcs.Sources[1].Source)
}

// tenantID resolves a key through the store.
func tenantID(t testing.TB, e *env, key string) string {
	t.Helper()
	tn, err := e.db.TenantByAPIKey(context.Background(), key)
	require.NoError(t, err)
	return tn.ID
}

func TestFactsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("facts-bad")
	good := func(i int) map[string]any { return fact(i, "account:acc_1") }
	with := func(k string, v any) map[string]any {
		f := good(9)
		if v == nil {
			delete(f, k)
		} else {
			f[k] = v
		}
		return f
	}
	batch := func(bad map[string]any) map[string]any {
		return map[string]any{"facts": []any{good(1), good(2), good(3), bad}}
	}
	for _, tc := range []struct {
		name     string
		body     any
		want     int
		code     string
		contains string
	}{
		{"empty body", "", http.StatusBadRequest, codeInvalidJSON, ""},
		{"malformed", `{"facts": [`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"syntax", `{"facts": [}`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"trailing data", `{"facts": []} {}`, http.StatusBadRequest, codeInvalidJSON, ""},
		{"array body", `[]`, http.StatusBadRequest, codeInvalidRequest, ""},
		{"string body", `"facts"`, http.StatusBadRequest, codeInvalidRequest, ""},
		{"facts missing", `{}`, http.StatusBadRequest, codeInvalidRequest, "facts"},
		{"facts null", `{"facts": null}`, http.StatusBadRequest, codeInvalidRequest, "facts"},
		{"facts empty", `{"facts": []}`, http.StatusBadRequest, codeInvalidRequest, "at least one"},
		{"facts wrong type", `{"facts": "many"}`, http.StatusBadRequest, codeInvalidRequest, "facts: expected an array, got a string"},
		{"facts twice", `{"facts": [], "facts": []}`, http.StatusBadRequest, codeInvalidJSON, "twice"},
		{"fact not object", `{"facts": [1]}`, http.StatusBadRequest, codeInvalidRequest, "facts[0]"},
		{"unknown top field", `{"facts": [], "extra": 1}`, http.StatusBadRequest, codeInvalidRequest, "extra"},
		{"unknown fact field", batch(with("colour", "blue")), http.StatusBadRequest, codeInvalidRequest, `facts[3]: unknown field \"colour\"`},
		{"source wrong type", batch(with("source", 5)), http.StatusBadRequest, codeInvalidRequest, "facts[3].source: expected a string"},
		{"attrs wrong type", batch(with("attrs", []int{1})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"links wrong type", batch(with("links", "order:o_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].links: expected an array"},
		{"subject not type:id", batch(with("subject", "acc_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].subject"},
		{"subject bad type", batch(with("subject", "Account:acc_1")), http.StatusBadRequest, codeInvalidRequest, "facts[3].subject"},
		{"link not type:id", batch(with("links", []string{"nope"})), http.StatusBadRequest, codeInvalidRequest, "facts[3].links[0]"},
		{"source missing", batch(with("source", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].source"},
		{"source bad", batch(with("source", "led ger")), http.StatusBadRequest, codeInvalidRequest, "facts[3].source"},
		{"type missing", batch(with("type", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].type"},
		{"external_id missing", batch(with("external_id", "")), http.StatusBadRequest, codeInvalidRequest, "facts[3].external_id"},
		{"occurred_at missing", batch(with("occurred_at", nil)), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"occurred_at not rfc3339", batch(with("occurred_at", "29/11/2026")), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"occurred_at number", batch(with("occurred_at", 1732870000)), http.StatusBadRequest, codeInvalidRequest, "facts[3].occurred_at"},
		{"NUL in type", batch(with("type", "pay\u0000out")), http.StatusBadRequest, codeInvalidRequest, "facts[3].type"},
		{"NUL in attrs", batch(with("attrs", map[string]any{"note": "a\u0000b"})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"NUL in attr key", batch(with("attrs", map[string]any{"a\u0000": 1})), http.StatusBadRequest, codeInvalidRequest, "facts[3].attrs"},
		{"number out of range", `{"facts":[{"source":"ledger","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","attrs":{"n":1e999}}]}`,
			http.StatusBadRequest, codeInvalidRequest, "facts[0].attrs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t), "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
		})
	}
	// Over 8 MiB: 413, and nothing stored.
	var big strings.Builder
	big.WriteString(`{"facts":[`)
	pad := strings.Repeat("x", 1000)
	for i := 0; big.Len() <= MaxFactsBody; i++ {
		if i > 0 {
			big.WriteString(",")
		}
		fmt.Fprintf(&big, `{"source":"ledger","type":"t","subject":"a:b","external_id":"big-%d","occurred_at":"2026-11-29T10:00:00Z","attrs":{"pad":%q}}`, i, pad)
	}
	big.WriteString("]}")
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: big.String()})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
	require.Equal(t, codeTooLarge, res.ErrCode(t))

	// No batch landed partly: the tenant has no facts at all.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: key})
	require.JSONEq(t, `{"sources":[],"span_rejections":[]}`, string(res.Body))
	require.Empty(t, e.notices(tenantID(t, e, key)))
}
