package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeAttrs feeds arbitrary bytes to the decoder of stored attrs: it
// never panics, and what it decodes encodes and decodes to itself.
func FuzzDecodeAttrs(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"a":9007199254740993,"b":2.5,"c":[1,"x",null,{"d":1e300}]}`,
		`{"a":1.0}`, `{"a":-0}`, `{"a":1e400}`, `[1]`, `"x"`, `{"a":}`, `{"\u0000":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAttrs(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(a)
		require.NoError(t, err)
		again, err := decodeAttrs(enc)
		require.NoError(t, err)
		require.Equal(t, a, again)
	})
}

var fuzzSeq atomic.Int64

// FuzzFactRoundTrip stores one arbitrary fact: the store either refuses it
// with commitlayer.ErrInvalid (and stores nothing) or returns it exactly as it would
// come back through JSON with commitlayer.Attrs semantics, its time to the
// microsecond. It never panics and never fails with another kind of error.
func FuzzFactRoundTrip(f *testing.F) {
	testDB := testStore(f)
	f.Add("payments", "refund_created", "order:o1", "re_1", `{"amount":2500,"currency":"usd"}`, "ticket:t9", int64(1767225600), int64(123456789))
	f.Add("p", "t", "a:b", "x", `{"n":9007199254740993,"f":0.1,"l":[1,2.5,"s",null,true]}`, "", int64(0), int64(0))
	f.Add("p", "t", "a:b", "x", `{"s":"\u0000"}`, "", int64(-62135596800), int64(0))
	f.Add("p", "t", "a:b", "x", `{}`, "b:c", int64(9223372036), int64(999999999))
	f.Add("p", "t", "a:b", "x", `{"big":1e300,"neg":-1e-300}`, "b:c", int64(-210866803200), int64(1))
	f.Add("p", "t", "a:b", "x", `{}`, "", int64(9_300_000_000_000), int64(0))    // year ~296 000: past Postgres's range
	f.Add("p", "t", "a:b", "x", `{}`, "", int64(10_000_000_000_000), int64(0))   // microseconds overflow int64
	f.Add("p", "t", "a:b", "x", `{}`, "", int64(-10_000_000_000_000), int64(-1)) // far before 4713 BC
	f.Add("p", "t", "a:b", "x", `{}`, "", int64(-9_223_372_036_854_775_808), int64(0))
	f.Add("p.q-r", "t\x00", "a:b\x00", "x", `{"k":"v"}`, "b:\x00", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, source, typ, subject, externalID, attrsJSON, link string, sec, nsec int64) {
		ctx := context.Background()
		tenantID := fuzzTenant(t)
		var attrs commitlayer.Attrs
		if err := json.Unmarshal([]byte(attrsJSON), &attrs); err != nil {
			return
		}
		// Make the key unique per run so earlier inputs are not duplicates.
		externalID = fmt.Sprintf("%d-%s", fuzzSeq.Add(1), externalID)
		fact := commitlayer.Fact{Source: source, Type: typ, Subject: commitlayer.Subject(subject),
			ExternalID: externalID, OccurredAt: time.Unix(sec, nsec%1e9), Attrs: attrs}
		if link != "" {
			fact.Links = []commitlayer.Subject{commitlayer.Subject(link)}
		}
		res, err := testDB.InsertFacts(ctx, tenantID, []commitlayer.Fact{fact})
		if err != nil {
			require.ErrorIs(t, err, commitlayer.ErrInvalid)
			_, err := testDB.FactsByExternalID(ctx, tenantID, source, externalID)
			require.Error(t, err)
			return
		}
		require.Equal(t, 1, res.Inserted)

		got, err := testDB.FactsByExternalID(ctx, tenantID, source, externalID)
		require.NoError(t, err)
		enc, err := json.Marshal(attrs)
		require.NoError(t, err)
		var want commitlayer.Attrs
		require.NoError(t, json.Unmarshal(enc, &want))
		if want == nil {
			want = commitlayer.Attrs{}
		}
		require.Equal(t, want, got.Attrs)
		require.Equal(t, fact.OccurredAt.Truncate(time.Microsecond).UTC(), got.OccurredAt)
		require.Equal(t, fact.Subject, got.Subject)
		require.Equal(t, fact.Links, got.Links)
		require.Equal(t, fact.Type, got.Type)
	})
}

var fuzzTenantID atomic.Value

// fuzzTenant returns one tenant for the whole fuzz process.
func fuzzTenant(t *testing.T) string {
	testDB := testStore(t)
	if id, ok := fuzzTenantID.Load().(string); ok {
		return id
	}
	tn, _, err := testDB.CreateTenant(context.Background(), "fuzz")
	require.NoError(t, err)
	fuzzTenantID.Store(tn.ID)
	return tn.ID
}
