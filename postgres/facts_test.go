package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/stretchr/testify/require"
)

func TestInsertFactsIdempotent(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	f := mkFact("payments", "refund_created", "order:o1", "re_1", t0, commitlayer.Attrs{"amount": int64(2500)})

	res, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{f})
	require.NoError(t, err)
	require.Equal(t, commitlayer.InsertResult{Inserted: 1, Subjects: []commitlayer.Subject{"order:o1"}}, res)
	ns := notices(t, testDB, tn.ID)
	require.Len(t, ns, 1, "the notice is written with the facts")
	require.Equal(t, &contracts.Digest{Kinds: []contracts.KindSince{{FactType: commitlayer.FactType{Source: "payments", Type: "refund_created"}, Earliest: t0}}}, ns[0].Digest)

	// The same external id again, even with other content: a duplicate.
	g := f
	g.Attrs = commitlayer.Attrs{"amount": int64(9999)}
	res, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{g})
	require.NoError(t, err)
	require.Equal(t, commitlayer.InsertResult{Duplicates: 1}, res)

	// The same external id from another source is another fact.
	h := f
	h.Source = "ledger"
	res, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{h})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)

	got, err := testDB.FactsByExternalID(ctx, tn.ID, "payments", "re_1")
	require.NoError(t, err)
	require.Equal(t, int64(2500), got.Attrs["amount"], "the first one wins")
}

func TestInsertFactsDuplicateWithinBatch(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	batch := []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "re_1", t0, commitlayer.Attrs{"n": int64(1)}),
		mkFact("payments", "refund_created", "order:o2", "re_2", t0, nil),
		mkFact("payments", "refund_created", "order:o9", "re_1", t0, commitlayer.Attrs{"n": int64(2)}),
		mkFact("payments", "refund_created", "order:o1", "re_1", t0, commitlayer.Attrs{"n": int64(3)}),
	}
	res, err := testDB.InsertFacts(ctx, tn.ID, batch)
	require.NoError(t, err)
	require.Equal(t, 2, res.Inserted)
	require.Equal(t, 2, res.Duplicates)
	require.Equal(t, []commitlayer.Subject{"order:o1", "order:o2"}, res.Subjects)
	got, err := testDB.FactsByExternalID(ctx, tn.ID, "payments", "re_1")
	require.NoError(t, err)
	require.Equal(t, commitlayer.Subject("order:o1"), got.Subject)
	require.Equal(t, int64(1), got.Attrs["n"])

	// Empty batches are fine and change nothing.
	res, err = testDB.InsertFacts(ctx, tn.ID, nil)
	require.NoError(t, err)
	require.Equal(t, commitlayer.InsertResult{}, res)
}

// TestInsertFactsBadBatchLandsNothing puts one bad fact among good ones and
// checks that nothing of the batch is stored, coverage included.
func TestInsertFactsBadBatchLandsNothing(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	good := func(id string) commitlayer.Fact {
		return mkFact("payments", "refund_created", "order:o1", id, t0, commitlayer.Attrs{"amount": int64(1)})
	}
	cases := []struct {
		name      string
		bad       func() commitlayer.Fact
		fieldErr  bool // caught by Fact.Validate before the database
		checkedBy string
	}{
		{"missing source", func() commitlayer.Fact { f := good("x"); f.Source = ""; return f }, true, ""},
		{"source with spaces", func() commitlayer.Fact { f := good("x"); f.Source = "pay ments"; return f }, true, ""},
		{"missing type", func() commitlayer.Fact { f := good("x"); f.Type = ""; return f }, true, ""},
		{"missing external id", func() commitlayer.Fact { f := good("x"); f.ExternalID = ""; return f }, true, ""},
		{"external id too long", func() commitlayer.Fact { return good(strings.Repeat("x", 513)) }, true, ""},
		{"zero time", func() commitlayer.Fact { f := good("x"); f.OccurredAt = time.Time{}; return f }, true, ""},
		{"subject not type:id", func() commitlayer.Fact { f := good("x"); f.Subject = "o1"; return f }, true, ""},
		{"subject upper-case type", func() commitlayer.Fact { f := good("x"); f.Subject = "Order:o1"; return f }, true, ""},
		{"bad link", func() commitlayer.Fact { f := good("x"); f.Links = []commitlayer.Subject{"ticket:"}; return f }, true, ""},
		{"NaN attr", func() commitlayer.Fact { f := good("x"); f.Attrs = commitlayer.Attrs{"a": math.NaN()}; return f }, false, ""},
		{"unencodable attr", func() commitlayer.Fact { f := good("x"); f.Attrs = commitlayer.Attrs{"a": make(chan int)}; return f }, false, ""},
		// The next ones pass Validate and are refused by Postgres mid-batch.
		{"NUL in attrs", func() commitlayer.Fact { f := good("x"); f.Attrs = commitlayer.Attrs{"note": "a\x00b"}; return f }, false, "jsonb"},
		{"NUL in type", func() commitlayer.Fact { f := good("x"); f.Type = "refund\x00"; return f }, false, "text"},
		{"year out of range", func() commitlayer.Fact {
			f := good("x")
			f.OccurredAt = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
			return f
		}, false, "timestamptz"},
		{"NUL in subject", func() commitlayer.Fact { f := good("x"); f.Subject = "order:o\x001"; return f }, false, "text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t)
			batch := []commitlayer.Fact{good("g1"), good("g2"), tc.bad(), good("g3")}
			res, err := testDB.InsertFacts(ctx, tn.ID, batch)
			require.ErrorIs(t, err, commitlayer.ErrInvalid)
			require.Equal(t, commitlayer.InsertResult{}, res)
			var fe *commitlayer.FieldError
			require.Equal(t, tc.fieldErr, errors.As(err, &fe), "%v", err)
			require.Equal(t, map[string]int{"tenants": 1, "contracts": 0, "facts": 0, "source_coverage": 0, "fact_notifications": 0,
				"actions": 0, "verdicts": 0, "connectors": 0, "webhooks": 0, "webhook_deliveries": 0, "console_sessions": 0, "span_rejections": 0, "action_attempts": 0}, rowCounts(t, tn.ID))

			// The good facts land once the bad one is gone.
			res, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{good("g1"), good("g2"), good("g3")})
			require.NoError(t, err)
			require.Equal(t, 3, res.Inserted)
		})
	}
}

func TestInsertFactsUnknownTenant(t *testing.T) {
	testDB := testStore(t)
	_, err := testDB.InsertFacts(context.Background(), "t_missing",
		[]commitlayer.Fact{mkFact("payments", "refund_created", "order:o1", "re_1", t0, nil)})
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

func TestFactSeqIncreasing(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	// Occurred in reverse order of arrival; seq follows arrival.
	var batch []commitlayer.Fact
	for i := range 5 {
		batch = append(batch, mkFact("orders", "note", "order:o1", "n"+string(rune('a'+i)), t0.Add(-time.Duration(i)*time.Minute), nil))
	}
	_, err := testDB.InsertFacts(ctx, tn.ID, batch[:3])
	require.NoError(t, err)
	_, err = testDB.InsertFacts(ctx, tn.ID, batch[3:])
	require.NoError(t, err)
	var seqs []int64
	for _, f := range batch {
		got, err := testDB.FactsByExternalID(ctx, tn.ID, f.Source, f.ExternalID)
		require.NoError(t, err)
		require.NotZero(t, got.Seq)
		seqs = append(seqs, got.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "seq follows batch order and arrival: %v", seqs)
	}
	// FactsAbout orders by occurred_at, then seq.
	facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"order:o1"})
	require.NoError(t, err)
	require.Equal(t, []string{"ne", "nd", "nc", "nb", "na"}, externalIDs(facts))

	// Equal times fall back to seq.
	tn2 := newTenant(t)
	_, err = testDB.InsertFacts(ctx, tn2.ID, []commitlayer.Fact{
		mkFact("orders", "note", "order:o1", "z", t0, nil),
		mkFact("orders", "note", "order:o1", "a", t0, nil),
		mkFact("orders", "note", "order:o1", "m", t0, nil),
	})
	require.NoError(t, err)
	facts, err = testDB.FactsAbout(ctx, tn2.ID, []commitlayer.Subject{"order:o1"})
	require.NoError(t, err)
	require.Equal(t, []string{"z", "a", "m"}, externalIDs(facts))
}

func TestAttrsRoundTrip(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.FixedZone("CET", 3600))
	attrs := commitlayer.Attrs{
		"exact":    int64(9007199254740993), // 2^53 + 1: not representable as float64
		"max":      int64(math.MaxInt64),
		"min":      int64(math.MinInt64),
		"neg":      int64(-2500),
		"zero":     int64(0),
		"float":    2.5,
		"tiny":     1e-7,
		"huge":     1e300,
		"third":    1.0 / 3,
		"str":      "héllo \"quoted\" \\ \u2028",
		"empty":    "",
		"bool":     true,
		"null":     nil,
		"list":     []any{int64(1), 2.5, "x", nil, false},
		"nested":   map[string]any{"amount": int64(9007199254740993), "deeper": map[string]any{"f": -0.125}},
		"currency": "usd",
	}
	f := mkFact("payments", "refund_created", "order:o1", "re_1", at, attrs, "customer:c1", "ticket:t9")
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{f})
	require.NoError(t, err)

	got, err := testDB.FactsByExternalID(ctx, tn.ID, "payments", "re_1")
	require.NoError(t, err)
	require.Equal(t, attrs, got.Attrs)
	require.Equal(t, int64(9007199254740993), got.Attrs["exact"])
	require.IsType(t, float64(0), got.Attrs["float"])
	require.Equal(t, at.UTC(), got.OccurredAt)
	require.Equal(t, time.UTC, got.OccurredAt.Location())
	require.Equal(t, []commitlayer.Subject{"customer:c1", "ticket:t9"}, got.Links)
	f.Seq = got.Seq
	f.OccurredAt = f.OccurredAt.UTC()
	require.Equal(t, f, got)

	// Empty attrs come back as an empty object, empty links as nil.
	_, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "x", "order:o1", "e", t0, nil)})
	require.NoError(t, err)
	got, err = testDB.FactsByExternalID(ctx, tn.ID, "payments", "e")
	require.NoError(t, err)
	require.Equal(t, commitlayer.Attrs{}, got.Attrs)
	require.Nil(t, got.Links)

	// Integral floats are money: 2500.0 comes back as int64 2500.
	_, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "x", "order:o1", "f", t0, commitlayer.Attrs{"amount": 2500.0}),
	})
	require.NoError(t, err)
	got, err = testDB.FactsByExternalID(ctx, tn.ID, "payments", "f")
	require.NoError(t, err)
	require.Equal(t, int64(2500), got.Attrs["amount"])
}

func TestFactsByExternalIDNotFound(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "x", "order:o1", "re_1", t0, nil)})
	require.NoError(t, err)
	for _, k := range [][2]string{{"payments", "re_2"}, {"orders", "re_1"}, {"", ""}, {"payments", "RE_1"}} {
		_, err := testDB.FactsByExternalID(ctx, tn.ID, k[0], k[1])
		require.ErrorIs(t, err, commitlayer.ErrNotFound, "%v", k)
	}
}

// TestFactsAbout builds a small graph:
//
//	order:o1  ← f1 (on o1), f2 (on o1, links customer:c1)
//	ticket:t9 ← f3 (on t9, links order:o1), f4 (on t9, no links)
//	customer:c1 ← f5 (on c1), f6 (on c1, links account:a1)
//	order:o2  ← f7 (on o2, links customer:c1)     two hops from o1
//	account:a1 ← f8 (on a1)                        two hops from o1
//	order:o3  ← f9 (unrelated)
func TestFactsAbout(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("orders", "created", "order:o1", "f1", at(1), nil),
		mkFact("orders", "assigned", "order:o1", "f2", at(2), nil, "customer:c1"),
		mkFact("tickets", "opened", "ticket:t9", "f3", at(3), nil, "order:o1"),
		mkFact("tickets", "note_added", "ticket:t9", "f4", at(4), nil),
		mkFact("crm", "updated", "customer:c1", "f5", at(5), nil),
		mkFact("crm", "linked", "customer:c1", "f6", at(6), nil, "account:a1"),
		mkFact("orders", "created", "order:o2", "f7", at(7), nil, "customer:c1"),
		mkFact("ledger", "posted", "account:a1", "f8", at(8), nil),
		mkFact("orders", "created", "order:o3", "f9", at(9), nil),
	})
	require.NoError(t, err)

	cases := []struct {
		subjects []commitlayer.Subject
		want     []string
	}{
		// Direct facts, the ticket linking in (and its other facts), the
		// customer linked out (and its facts); not o2 or a1 (two hops).
		{[]commitlayer.Subject{"order:o1"}, []string{"f1", "f2", "f3", "f4", "f5", "f6"}},
		// From the ticket: its facts, the order it links and the order's
		// facts; the order's customer is two hops away.
		{[]commitlayer.Subject{"ticket:t9"}, []string{"f1", "f2", "f3", "f4"}},
		// From the customer: its facts, the facts linking it (f2, f7),
		// their subjects' facts (o1, o2), and a1 linked out.
		{[]commitlayer.Subject{"customer:c1"}, []string{"f1", "f2", "f5", "f6", "f7", "f8"}},
		{[]commitlayer.Subject{"order:o3"}, []string{"f9"}},
		{[]commitlayer.Subject{"order:o3", "account:a1"}, []string{"f6", "f8", "f9", "f5"}},
		{[]commitlayer.Subject{"order:nothing"}, nil},
		{nil, nil},
	}
	for _, tc := range cases {
		facts, err := testDB.FactsAbout(ctx, tn.ID, tc.subjects)
		require.NoError(t, err)
		require.ElementsMatch(t, tc.want, externalIDs(facts), "%v", tc.subjects)
		for i := 1; i < len(facts); i++ {
			require.False(t, facts[i].OccurredAt.Before(facts[i-1].OccurredAt), "ordered by occurred_at")
		}
	}
}

func TestFactsOfKinds(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "a", at(1), nil),
		mkFact("payments", "refund_reversed", "order:o1", "b", at(2), nil),
		mkFact("orders", "refund_created", "order:o1", "c", at(3), nil), // same type, other source
		mkFact("payments", "refund_created", "order:o2", "d", at(4), nil),
		mkFact("payments", "payout_sent", "payout:p1", "e", at(5), nil),
	})
	require.NoError(t, err)
	refunds := []commitlayer.FactType{{Source: "payments", Type: "refund_created"}}
	cases := []struct {
		kinds    []commitlayer.FactType
		from, to time.Time
		want     []string
	}{
		{refunds, time.Time{}, time.Time{}, []string{"a", "d"}},
		{refunds, at(2), time.Time{}, []string{"d"}},
		{refunds, time.Time{}, at(3), []string{"a"}},
		{refunds, at(1), at(4), []string{"a", "d"}}, // inclusive
		{refunds, at(5), at(6), nil},
		{[]commitlayer.FactType{{Source: "payments", Type: "refund_created"}, {Source: "payments", Type: "refund_reversed"}, {Source: "orders", Type: "refund_created"}},
			time.Time{}, time.Time{}, []string{"a", "b", "c", "d"}},
		{[]commitlayer.FactType{{Source: "payments", Type: "nope"}}, time.Time{}, time.Time{}, nil},
		{nil, time.Time{}, time.Time{}, nil},
	}
	for _, tc := range cases {
		facts, err := testDB.FactsOfKinds(ctx, tn.ID, tc.kinds, tc.from, tc.to)
		require.NoError(t, err)
		if tc.want == nil {
			require.Empty(t, facts)
			continue
		}
		require.Equal(t, tc.want, externalIDs(facts), "%v %v %v", tc.kinds, tc.from, tc.to)
	}
}

func TestCoverage(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	srcs, err := testDB.Sources(ctx, tn.ID)
	require.NoError(t, err)
	require.Empty(t, srcs)
	connected, err := testDB.ConnectedSources(ctx, tn.ID)
	require.NoError(t, err)
	require.Empty(t, connected)

	_, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "x", "order:o1", "a", t0.Add(time.Hour), nil),
		mkFact("payments", "x", "order:o1", "b", t0, nil), // older, arrives later
		mkFact("orders", "x", "order:o1", "c", t0, nil),
	})
	require.NoError(t, err)
	// Duplicates do not count; a later batch with an older fact does not
	// move last_fact_at back.
	_, err = testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "x", "order:o1", "a", t0.Add(time.Hour), nil),
		mkFact("payments", "x", "order:o1", "d", t0.Add(-time.Hour), nil),
	})
	require.NoError(t, err)
	conn, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "tickets", Kind: "http_events", URL: "http://t"})
	require.NoError(t, err)

	srcs, err = testDB.Sources(ctx, tn.ID)
	require.NoError(t, err)
	require.Len(t, srcs, 3)
	require.Equal(t, "orders", srcs[0].Source)
	require.True(t, srcs[0].EverReported)
	require.Equal(t, int64(1), srcs[0].FactCount)
	require.Equal(t, t0, srcs[0].LastFactAt)
	require.Empty(t, srcs[0].ConnectorID)

	require.Equal(t, "payments", srcs[1].Source)
	require.True(t, srcs[1].EverReported)
	require.Equal(t, int64(3), srcs[1].FactCount)
	require.Equal(t, t0.Add(time.Hour), srcs[1].LastFactAt)
	require.False(t, srcs[1].LastSeenAt.IsZero())

	require.Equal(t, commitlayer.SourceCoverage{Source: "tickets", ConnectorID: conn.ID}, srcs[2])

	connected, err = testDB.ConnectedSources(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"orders", "payments"}, connected)
}

// TestInsertFactsConcurrentOverlap races batches holding the same facts in
// opposite orders (two pulls of one feed, a push and a pull): every fact is
// stored once, the counts add up, and no batch fails on a deadlock.
func TestInsertFactsConcurrentOverlap(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	const n = 200
	forward := make([]commitlayer.Fact, n)
	for i := range forward {
		src := "payments"
		if i%2 == 1 {
			src = "orders"
		}
		forward[i] = mkFact(src, "x", "order:o1", fmt.Sprintf("e%03d", i), t0, nil)
	}
	backward := slices.Clone(forward)
	slices.Reverse(backward)

	const workers = 6
	results := make([]commitlayer.InsertResult, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		batch := forward
		if w%2 == 1 {
			batch = backward
		}
		wg.Go(func() { results[w], errs[w] = testDB.InsertFacts(ctx, tn.ID, batch) })
	}
	wg.Wait()
	inserted := 0
	for w := range workers {
		require.NoError(t, errs[w])
		require.Equal(t, n, results[w].Inserted+results[w].Duplicates)
		inserted += results[w].Inserted
	}
	require.Equal(t, n, inserted)
	srcs, err := testDB.Sources(ctx, tn.ID)
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	require.Equal(t, int64(n/2), srcs[0].FactCount)
	require.Equal(t, int64(n/2), srcs[1].FactCount)
}
