package contracts_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// FuzzParse: no input panics; every error names a field and a reason; a
// contract that parses evaluates without panicking and survives a round
// trip through JSON unchanged. Seeds: the eight sandbox contracts and the
// testdata contracts (plus testdata/fuzz/FuzzParse).
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"../sandbox/contracts/*.yaml", "testdata/*.yaml"} {
		files, err := filepath.Glob(pattern)
		require.NoError(f, err)
		for _, file := range files {
			src, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(src)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte(refundSrc))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := contracts.Parse(src)
		if err != nil {
			require.Nil(t, c)
			for _, e := range contracts.Errors(err) {
				require.NotEmpty(t, e.Reason, "%v", err)
				require.NotEmpty(t, e.Field, "%v", err)
				require.GreaterOrEqual(t, e.Line, 0)
			}
			return
		}
		b, err := json.Marshal(c.Spec)
		require.NoError(t, err)
		back, err := contracts.Parse(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, c.Spec, back.Spec)

		in := refundWorld()
		in.Action.Contract = c.ID()
		in.Prior = []commitlayer.Action{act("p", c.ID(), "bot", "order:o_1", -time.Hour, attrs{"amount": int64(1)})}
		v := c.Evaluate(in)
		requireConsistent(t, v)
		_ = contracts.Orphans(c, []commitlayer.Action{in.Action}, in.Facts)
	})
}

// fuzzInput decodes bytes into facts, prior actions and coverage around
// the refund test contract's world, reaching every check with odd data.
type fuzzInput struct{ data []byte }

func (r *fuzzInput) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

var (
	fuzzSources  = []string{"payments", "orders", "tickets", "crm"}
	fuzzTypes    = []string{"refund_created", "refund_reversed", "order_status_changed", "note_added", "order_created", "charge_captured", ""}
	fuzzSubjects = []commitlayer.Subject{"order:o_1", "order:o_2", "ticket:t_1", "customer:c_1", "order:o_1:x", "bad", ""}
	fuzzKeys     = []string{"amount", "status", "refund_id", "total", "_type", "", "currency"}
)

func (r *fuzzInput) value() any {
	switch b := r.next(); b % 16 {
	case 0:
		return int64(r.next()) * 1000
	case 1:
		return -int64(r.next())
	case 2:
		return math.MaxInt64 - int64(r.next())
	case 3:
		return float64(r.next()) / 3
	case 4:
		return math.NaN()
	case 5:
		return math.Inf(1)
	case 6:
		return []string{"paid", "refunded", "cancelled", "shipped", ""}[r.next()%5]
	case 7:
		return r.next()%2 == 0
	case 8:
		return nil
	case 9:
		return []any{int64(1), "x", nil}
	case 10:
		return map[string]any{"amount": int64(2500)}
	case 11:
		return int(r.next()) // not normalized
	case 12:
		return uint64(math.MaxUint64)
	case 13:
		return struct{ X int }{1}
	case 14:
		return t0
	default:
		return string(r.data)
	}
}

func (r *fuzzInput) fact(i int) commitlayer.Fact {
	f := commitlayer.Fact{
		Source:     fuzzSources[int(r.next())%len(fuzzSources)],
		Type:       fuzzTypes[int(r.next())%len(fuzzTypes)],
		Subject:    fuzzSubjects[int(r.next())%len(fuzzSubjects)],
		ExternalID: []string{"x", "y", "re_1", ""}[int(r.next())%4] + string(rune('a'+i%26)),
		OccurredAt: t0.Add(time.Duration(int8(r.next())) * 37 * time.Minute),
		Seq:        int64(r.next()) - 100,
	}
	if n := r.next() % 5; n > 0 {
		f.Attrs = commitlayer.Attrs{}
		for range n {
			f.Attrs[fuzzKeys[int(r.next())%len(fuzzKeys)]] = r.value()
		}
	}
	for range r.next() % 3 {
		f.Links = append(f.Links, fuzzSubjects[int(r.next())%len(fuzzSubjects)])
	}
	return f
}

// FuzzEvaluate: fuzzed facts (attrs, types, subjects, links, times), priors,
// later actions, params and coverage against a fixed contract (and one with
// a `through` forbid) never panic, give a consistent verdict, and give the
// same verdict whatever the order of the facts and of the later actions;
// for the through contract, also from the facts a caller fetches with
// ThroughSubjects.
func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{}, `{"amount": 2500}`, byte(0xff), int64(15))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 7, 1, 2, 0, 1, 2, 2, 3, 4, 5, 6}, `{"amount": 2500, "currency": "USD"}`, byte(7), int64(600))
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12"), `{"amount": 1e400}`, byte(3), int64(-5))
	f.Add([]byte("refund payments order ticket note status cancelled"), `{"amount": "2500"}`, byte(1), int64(100000))
	// A refund, a later action on the subject before it, another refund.
	f.Add([]byte{0, 0, 0, 2, 30, 100, 1, 0, 0, 2, 0, 1, 0, 0, 0, 20, 0, 0, 0, 0, 0, 40, 101, 0, 0, 3}, `{"amount": 2000}`, byte(7), int64(6000))
	// A refund of 5000 on order:o_1 at t0+37m, reached through customer:c_1
	// by the through contract (facts 0 and 1 link o_2 and o_1 to c_1).
	// The action is on order:o_2 (coverage 0x0f: every source connected).
	f.Add([]byte{3, 4, 1, 0, 0, 0, 0, 1, 3, 3, 3, 4, 0, 1, 0, 0, 0, 1, 3, 3, 0, 0, 0, 2, 1, 0, 1, 0, 0, 5, 0, 3}, `{"amount": 2500}`, byte(0x0f), int64(60))
	c := mustParse(f, refundSrc)
	through := mustParse(f, throughSrc)
	f.Fuzz(func(t *testing.T, data []byte, params string, coverage byte, nowMinutes int64) {
		r := &fuzzInput{data: data}
		in := refundWorld()
		var p commitlayer.Attrs
		if json.Unmarshal([]byte(params), &p) == nil {
			in.Action.Params = p
		}
		in.Action.Subject = fuzzSubjects[int(coverage)%len(fuzzSubjects)]
		in.Coverage = contracts.Coverage{Unreachable: map[string]string{}}
		for i, s := range fuzzSources {
			if coverage&(1<<i) != 0 {
				in.Coverage.Connected = append(in.Coverage.Connected, s)
			}
			if coverage&(1<<(i+4)) != 0 {
				in.Coverage.Unreachable[s] = "down"
			}
		}
		in.Now = t0.Add(time.Duration(nowMinutes%(1<<30)) * time.Minute)
		for i := 0; len(r.data) > 0 && i < 64; i++ {
			in.Facts = append(in.Facts, r.fact(i))
			switch r.next() % 4 {
			case 0:
				in.Prior = append(in.Prior, act(string(rune('p'+i%8)), "refund", []string{"bot", "other"}[r.next()%2],
					string(fuzzSubjects[int(r.next())%len(fuzzSubjects)]), time.Duration(-int(r.next()))*10*time.Minute,
					commitlayer.Attrs{"amount": r.value()}))
			case 1:
				// Mostly well-formed later actions on the subject, some not.
				l := act([]string{"l1", "l2", "a_1", ""}[r.next()%4], []string{"refund", "refund", "other"}[r.next()%3], "bot",
					string(fuzzSubjects[int(r.next())%len(fuzzSubjects)]), time.Duration(int8(r.next()))*37*time.Minute, nil)
				if r.next()%2 == 0 {
					l.Subject = in.Action.Subject
				}
				in.Later = append(in.Later, l)
			}
		}
		v := c.Evaluate(in)
		requireConsistent(t, v)
		require.Equal(t, c.SettlesAt(in.Action.RequestedAt), v.SettlesAt)

		// Facts with distinct (time, seq, source, id) are totally ordered, so
		// the verdict does not depend on their order in the input.
		if distinctOrder(in.Facts) {
			slices.Reverse(in.Facts)
			require.Equal(t, v, c.Evaluate(in))
		}
		// Nor on the order of Later.
		slices.Reverse(in.Later)
		require.Equal(t, v, c.Evaluate(in))
		_ = contracts.Orphans(c, append(in.Prior, in.Action), in.Facts)

		// The through contract on the same world: a consistent verdict,
		// whatever the order of the facts, and the facts about the subject
		// plus the facts about its ThroughSubjects give the verdict all the
		// facts give.
		tin := in
		tin.Action.Contract = through.ID()
		tin.Later = slices.Clone(in.Later)
		for i := range tin.Later {
			if tin.Later[i].Contract == "refund" {
				tin.Later[i].Contract = through.ID()
			}
		}
		tv := through.Evaluate(tin)
		requireConsistent(t, tv)
		if distinctOrder(tin.Facts) {
			own := aboutFacts(tin.Facts, []commitlayer.Subject{tin.Action.Subject})
			fetched := tin
			fetched.Facts = append(own, aboutFacts(tin.Facts, through.ThroughSubjects(tin.Action, own))...)
			require.Equal(t, tv, through.Evaluate(fetched))
			slices.Reverse(tin.Facts)
			require.Equal(t, tv, through.Evaluate(tin))
		}
		_ = contracts.Orphans(through, []commitlayer.Action{tin.Action}, tin.Facts)

		// MayChange's promise: the facts it says cannot change the answer
		// (a kind the contract never reads, no links, no policy state)
		// change nothing, however they mix with the others.
		requireUnchangedBy(t, c, in, v)
		requireUnchangedBy(t, through, tin, tv)
	})
}

// requireUnchangedBy checks that v, c's verdict over in, is also its
// verdict without the facts MayChange clears, one by one and all together.
// Facts sharing a (source, external id) stay: a store holds one of them,
// and of two given the evaluation keeps one.
func requireUnchangedBy(t *testing.T, c *contracts.Contract, in contracts.Input, v commitlayer.Verdict) {
	t.Helper()
	type key struct{ source, ext string }
	n := map[key]int{}
	for _, f := range in.Facts {
		n[key{f.Source, f.ExternalID}]++
	}
	var kept, cleared []commitlayer.Fact
	for _, f := range in.Facts {
		if n[key{f.Source, f.ExternalID}] == 1 && !c.MayChange(contracts.DigestFacts([]commitlayer.Fact{f}), in.Action.RequestedAt) {
			cleared = append(cleared, f)
		} else {
			kept = append(kept, f)
		}
	}
	if len(cleared) == 0 {
		return
	}
	require.False(t, c.MayChange(contracts.DigestFacts(cleared), in.Action.RequestedAt), "the digest of cleared facts clears them")
	without := in
	without.Facts = kept
	require.Equal(t, v, c.Evaluate(without), "without %d facts MayChange cleared", len(cleared))
}

func distinctOrder(facts []commitlayer.Fact) bool {
	type key struct {
		at       time.Time
		seq      int64
		src, ext string
	}
	seen := map[key]bool{}
	for _, f := range facts {
		k := key{f.OccurredAt, f.Seq, f.Source, f.ExternalID}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}
