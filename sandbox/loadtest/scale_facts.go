package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// factsCase is facts_per_tenant's figures: the small tenant's (0) and the
// big one's (1) pass latencies and the facts table's size at each.
type factsCase struct {
	pass  [2][]time.Duration
	sizes [2]storeSize
}

// factsPerTenant loads a small and a big tenant with the same facts per
// subject, measures the store at each size, then probes both, five rounds
// each interleaved, so that the neighbours' load falls on both alike.
func (sc *scale) factsPerTenant(ctx context.Context) (factsCase, error) {
	var out factsCase
	perSubject := sc.c.Facts / sc.c.Subjects
	sizes := [2]int{sc.c.SmallFacts, sc.c.Facts}
	var tenants [2]*tenant
	for i, name := range []string{"bench-scale-small", "bench-scale-big"} {
		t, err := sc.newTenant(ctx, name)
		if err != nil {
			return out, err
		}
		tenants[i] = t
		if _, _, err := t.api.PutContract(ctx, payoutContract("bench_payout", "10m", "0s")); err != nil {
			return out, err
		}
		n := sizes[i]
		start := time.Now()
		loaded, err := loadFacts(ctx, sc.s.DB, t.id, tenantFacts("acc", n/perSubject, n, sc.requestedAt))
		if err != nil {
			return out, err
		}
		load := time.Since(start)
		if _, err := noticesDrained(ctx, sc.s.DB, t.id); err != nil {
			return out, err
		}
		if _, err := sc.s.DB.Pool().Exec(ctx, `ANALYZE facts`); err != nil {
			return out, fmt.Errorf("analyze facts: %w", err)
		}
		if out.sizes[i], err = factStoreSize(ctx, sc.s.DB); err != nil {
			return out, err
		}
		fmt.Fprintf(sc.w, "  tenant of %d facts over %d subjects: loaded in %s (%.0f facts/s, batches of %d through the store's insert)\n",
			loaded, n/perSubject, load.Round(time.Millisecond), float64(loaded)/load.Seconds(), loadBatch)
	}
	var e2e [2][]time.Duration
	rounds := min(5, sc.c.Probes)
	for r := range rounds {
		n := sc.c.Probes / rounds
		if r == 0 {
			n += sc.c.Probes % rounds
		}
		for i, t := range tenants {
			pass, took, err := t.probe(ctx, n, sc.requestedAt)
			if err != nil {
				return out, err
			}
			out.pass[i], e2e[i] = append(out.pass[i], pass...), append(e2e[i], took...)
		}
	}
	for i, pass := range out.pass {
		fmt.Fprintf(sc.w, "  %d facts: pass latency p50 %s p99 %s; POST → final verdict p50 %s p99 %s (%d verifications, one at a time, %d rounds interleaved)\n",
			sizes[i], pct(pass, 50), pct(pass, 99), pct(e2e[i], 50), pct(e2e[i], 99), len(pass), rounds)
	}
	for _, s := range out.sizes {
		fmt.Fprintf(sc.w, "  facts table at %d rows: heap %.1f MiB, indexes %.1f MiB (%s), %.0f bytes per fact\n",
			s.Facts, mib(s.TableBytes), mib(s.IndexBytes), s.indexSizes(), s.bytesPerFact())
	}
	return out, nil
}

// tenantFacts yields n facts over subjects accounts account:<prefix>_<i>,
// each with its opening (linking its customer, 90 days before
// requestedAt), its payout a second after requestedAt, and balance changes
// spread over the 90 days between: a tenant's history, not a pile on one
// subject.
func tenantFacts(prefix string, subjects, n int, requestedAt time.Time) func() (commitlayer.Fact, bool) {
	per, extra := n/subjects, n%subjects
	i, j := 0, 0 // subject, fact of the subject
	span := 90 * 24 * time.Hour
	return func() (commitlayer.Fact, bool) {
		if i == subjects {
			return commitlayer.Fact{}, false
		}
		k := per
		if i < extra {
			k++
		}
		acc := commitlayer.Subject(fmt.Sprintf("account:%s_%d", prefix, i))
		id := prefix + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
		var f commitlayer.Fact
		switch j {
		case 0:
			f = commitlayer.Fact{Source: "ledger", Type: "account_opened", Subject: acc, ExternalID: id,
				OccurredAt: requestedAt.Add(-span), Attrs: commitlayer.Attrs{"status": "active"},
				Links: []commitlayer.Subject{commitlayer.Subject(fmt.Sprintf("customer:%s_c%d", prefix, i))}}
		case 1:
			f = commitlayer.Fact{Source: "ledger", Type: "payout_sent", Subject: acc, ExternalID: id,
				OccurredAt: requestedAt.Add(time.Second), Attrs: commitlayer.Attrs{"amount": 100}}
		default:
			at := requestedAt.Add(-span + time.Duration(j)*span/time.Duration(k+1))
			f = commitlayer.Fact{Source: "ledger", Type: "balance_changed", Subject: acc, ExternalID: id,
				OccurredAt: at, Attrs: commitlayer.Attrs{"delta": j, "balance": 1000 + j}}
		}
		if j++; j == k {
			i, j = i+1, 0
		}
		return f, true
	}
}

// probe verifies n actions on account:acc_<probeBase>…, one at a time, and
// returns their passes' latency as the worker stored it on the final
// verdict, and POST → final verdict.
func (t *tenant) probe(ctx context.Context, n int, requestedAt time.Time) (pass, e2e []time.Duration, err error) {
	samples, err := t.closedLoop(ctx, n, 1, requestedAt)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(samples))
	for i, s := range samples {
		ids[i] = s.id
		e2e = append(e2e, s.last.Sub(s.posted))
	}
	passes, err := benchstore.New(t.s.DB).LatestPassLatencies(ctx, t.id, ids)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		if d := passes[id]; d > 0 {
			pass = append(pass, d)
		}
	}
	if len(pass) == 0 {
		return nil, nil, errors.New("no verdict carries its pass latency")
	}
	// The tenant's next probe verifies the next accounts.
	t.probeBase += n
	return pass, e2e, nil
}
