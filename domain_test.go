package commitlayer_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestWorse(t *testing.T) {
	p, f, u := commitlayer.StatusPass, commitlayer.StatusFail, commitlayer.StatusUnknown
	for _, c := range []struct{ a, b, want commitlayer.Status }{
		{p, p, p}, {p, u, u}, {u, p, u}, {p, f, f}, {f, p, f}, {u, f, f}, {f, u, f}, {u, u, u}, {f, f, f},
	} {
		require.Equal(t, c.want, commitlayer.Worse(c.a, c.b), "%s %s", c.a, c.b)
	}
	require.True(t, p.Valid())
	require.False(t, commitlayer.Status("pass").Valid())
}

func TestParseSubject(t *testing.T) {
	for _, s := range []string{"order:o_1001", "ticket:t-9", "account:acc.5", "x:a:b", "product:ÄCME"} {
		got, err := commitlayer.ParseSubject(s)
		require.NoError(t, err, s)
		require.Equal(t, commitlayer.Subject(s), got)
	}
	sub, _ := commitlayer.ParseSubject("order:o_1001")
	require.Equal(t, "order", sub.Type())
	require.Equal(t, "o_1001", sub.ID())
	for _, s := range []string{"", "order", "order:", ":o_1", "Order:o_1", "or der:o", "order:o 1", "order:o\t1",
		"order:" + strings.Repeat("x", 300)} {
		_, err := commitlayer.ParseSubject(s)
		require.Error(t, err, "%q", s)
	}
}

func TestFactValidate(t *testing.T) {
	ok := commitlayer.Fact{Source: "payments", Type: "refund_created", Subject: "order:o_1", ExternalID: "re_1",
		OccurredAt: time.Now(), Links: []commitlayer.Subject{"ticket:t_1"}}
	require.NoError(t, ok.Validate())
	for field, mut := range map[string]func(*commitlayer.Fact){
		"source":      func(f *commitlayer.Fact) { f.Source = "" },
		"source ":     func(f *commitlayer.Fact) { f.Source = "pay ments" },
		"type":        func(f *commitlayer.Fact) { f.Type = "" },
		"external_id": func(f *commitlayer.Fact) { f.ExternalID = "" },
		"occurred_at": func(f *commitlayer.Fact) { f.OccurredAt = time.Time{} },
		"subject":     func(f *commitlayer.Fact) { f.Subject = "o_1" },
		"links[0]":    func(f *commitlayer.Fact) { f.Links = []commitlayer.Subject{"nope"} },
	} {
		f := ok
		mut(&f)
		err := f.Validate()
		var fe *commitlayer.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", field, err)
		require.Equal(t, strings.TrimSpace(field), fe.Field)
	}
}

func TestActionValidate(t *testing.T) {
	ok := commitlayer.Action{ID: "act_1", Contract: "refund", Agent: "a", Subject: "order:o_1", RequestedAt: time.Now()}
	require.NoError(t, ok.Validate())
	for field, mut := range map[string]func(*commitlayer.Action){
		"contract":     func(a *commitlayer.Action) { a.Contract = "" },
		"agent":        func(a *commitlayer.Action) { a.Agent = "" },
		"requested_at": func(a *commitlayer.Action) { a.RequestedAt = time.Time{} },
		"id":           func(a *commitlayer.Action) { a.ID = "a b" },
		"subject":      func(a *commitlayer.Action) { a.Subject = "" },
	} {
		a := ok
		mut(&a)
		var fe *commitlayer.FieldError
		require.True(t, errors.As(a.Validate(), &fe), field)
		require.Equal(t, field, fe.Field)
	}
}

func TestAttrsKeepIntegersExact(t *testing.T) {
	var a commitlayer.Attrs
	require.NoError(t, json.Unmarshal([]byte(`{"amount": 9007199254740993, "rate": 0.5, "whole": 2500.0,
		"nested": {"n": [1, 2.5, "x", true, null]}}`), &a))
	require.Equal(t, int64(9007199254740993), a["amount"])
	require.Equal(t, 0.5, a["rate"])
	require.Equal(t, int64(2500), a["whole"])
	require.Equal(t, []any{int64(1), 2.5, "x", true, nil}, a["nested"].(map[string]any)["n"])
	require.NoError(t, json.Unmarshal([]byte(`null`), &a))
	require.Nil(t, a)
	for _, bad := range []string{`[1]`, `{"a":}`, `"x"`, `{"a": 1e999}`} {
		require.Error(t, json.Unmarshal([]byte(bad), &a), bad)
	}
}

func TestNormalizeValue(t *testing.T) {
	n, err := commitlayer.NormalizeValue(map[string]any{"i": 3, "u": uint32(4), "f": float32(1.5), "s": []string{"a"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"i": int64(3), "u": int64(4), "f": 1.5, "s": []any{"a"}}, n)
	_, err = commitlayer.NormalizeValue(uint64(math.MaxUint64))
	require.Error(t, err)
	_, err = commitlayer.NormalizeValue(struct{}{})
	require.Error(t, err)
}

func TestVerdictSameAnswerAndSummary(t *testing.T) {
	v := commitlayer.Verdict{Status: commitlayer.StatusFail, Lenses: commitlayer.Lenses{Outcome: "FAIL", Policy: "PASS"},
		Findings: []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "refund", Lens: commitlayer.LensOutcome}},
		Version:  1, EvaluatedAt: time.Now()}
	w := v
	w.Version, w.EvaluatedAt = 2, time.Now().Add(time.Hour)
	require.True(t, v.SameAnswer(w), "times and version do not change the answer")
	w.Provisional = true
	require.False(t, v.SameAnswer(w))
	w = v
	w.Findings = []commitlayer.Finding{{Code: commitlayer.CodeDuplicateEffect, Check: "refund"}}
	require.False(t, v.SameAnswer(w))
	w = v
	w.UnavailableSources = []string{"payments"}
	require.False(t, v.SameAnswer(w))
	require.Equal(t, "FAIL outcome=FAIL policy=PASS: missing_effect refund", v.Summary())
	require.Equal(t, commitlayer.StatusFail, v.Lenses.Get(commitlayer.LensOutcome))
	require.Equal(t, commitlayer.StatusPass, v.Lenses.Get(commitlayer.LensPolicy))
}

func TestValidName(t *testing.T) {
	require.True(t, commitlayer.ValidName("payments"))
	require.True(t, commitlayer.ValidName("ledger.v2-eu_1"))
	require.False(t, commitlayer.ValidName(""))
	require.False(t, commitlayer.ValidName("a b"))
	require.False(t, commitlayer.ValidName(strings.Repeat("a", 129)))
}

func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{"order:o_1", "", ":", "a:b:c", "Ä:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sub, err := commitlayer.ParseSubject(s)
		if err != nil {
			return
		}
		if sub.Type() == "" || sub.ID() == "" || string(sub) != sub.Type()+":"+sub.ID() {
			t.Fatalf("%q parsed to type %q id %q", s, sub.Type(), sub.ID())
		}
	})
}

func FuzzAttrs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1.5,"b":[1,{"c":null}]}`, `null`, `{"a":9223372036854775808}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a commitlayer.Attrs
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			return
		}
		// Whatever decodes re-encodes and decodes to the same value.
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("re-encode %q: %v", s, err)
		}
		var again commitlayer.Attrs
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("decode %s again: %v", b, err)
		}
	})
}
