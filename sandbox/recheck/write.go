package recheck

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

// Store is what a check bundle is read from: the run's tenants, in the
// benchmark's store on the product's (*benchstore.Store).
type Store interface {
	BenchmarkTenants(ctx context.Context, runID string) ([]commitlayer.Tenant, error)
	TenantFacts(ctx context.Context, tenantID string) ([]commitlayer.Fact, error)
	TenantActions(ctx context.Context, tenantID string) ([]benchstore.KeyedAction, error)
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
	Sources(ctx context.Context, tenantID string) ([]commitlayer.SourceCoverage, error)
	LatestVerdict(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error)
}

var _ Store = (*benchstore.Store)(nil)

// Written is what Write wrote: the bundle's path, its scenarios, and the
// tenants left out (no verdict on a main action).
type Written struct {
	Path      string
	Scenarios int
	Skipped   int
}

// Write writes <dir>/<base>.check.ndjson.gz: for each scenario
// of the run, what its tenant holds (contracts, facts, actions, sources) and
// the latest verdict stored for its main action, so `commitlayer check
// --results` verifies them again with no server. Run it before a purge.
//
// On a via run (mains not nil) the main actions are not the harness's:
// mains names each scenario's task action (the gateway's or the ingest's,
// from the rows) by its id.
func Write(ctx context.Context, db Store, runID, commit, dir, base string, mains map[string]string) (Written, error) {
	entries, skipped, err := checkBundle(ctx, db, runID, mains)
	if err != nil {
		return Written{}, err
	}
	if len(entries) == 0 {
		return Written{}, fmt.Errorf("check bundle: no scenario of run %s has a recorded action", runID)
	}
	path := filepath.Join(dir, base+BundleSuffix)
	if err := WriteBundleFile(path, BundleHeader{RunID: runID, Commit: commit}, entries); err != nil {
		return Written{}, err
	}
	return Written{Path: path, Scenarios: len(entries), Skipped: skipped}, nil
}

// checkBundle reads the run's scenarios from the store. A tenant with no
// main action or no verdict for it (a retried preparation's, a scenario
// that failed before the agent acted) is counted in skipped. mains names
// a via run's main actions (action id → scenario id; nil otherwise).
func checkBundle(ctx context.Context, db Store, runID string, mains map[string]string) (entries []BundleEntry, skipped int, err error) {
	tenants, err := db.BenchmarkTenants(ctx, runID)
	if err != nil {
		return nil, 0, fmt.Errorf("check bundle: %w", err)
	}
	prefix := "benchmark/" + runID + "/"
	attempts := map[string]int{}
	for _, t := range tenants {
		e, ok, err := bundleEntry(ctx, db, t.ID, prefix, mains)
		if err != nil {
			return nil, 0, fmt.Errorf("check bundle: tenant %s: %w", t.ID, err)
		}
		if !ok {
			skipped++
			continue
		}
		attempts[e.Scenario]++
		e.Attempt = attempts[e.Scenario]
		entries = append(entries, e)
	}
	// A scenario run once is not numbered; repeats are 1, 2, … in the
	// order their tenants were created.
	for i := range entries {
		if attempts[entries[i].Scenario] == 1 {
			entries[i].Attempt = 0
		}
	}
	slices.SortStableFunc(entries, func(a, b BundleEntry) int {
		return strings.Compare(a.Scenario, b.Scenario)
	})
	return entries, skipped, nil
}

// bundleEntry reads one tenant. Its main action is the one recorded under
// the key benchmark/<run>/<scenario>/main (harness.Activities.record), or
// on a via run the one mains names.
func bundleEntry(ctx context.Context, db Store, tenantID, prefix string, mains map[string]string) (BundleEntry, bool, error) {
	acts, err := db.TenantActions(ctx, tenantID)
	if err != nil {
		return BundleEntry{}, false, err
	}
	var e BundleEntry
	type cv struct {
		id string
		v  int
	}
	var versions []cv
	for _, a := range acts {
		if k := a.IdempotencyKey; strings.HasPrefix(k, prefix) && strings.HasSuffix(k, "/main") {
			e.Scenario = strings.TrimSuffix(strings.TrimPrefix(k, prefix), "/main")
			e.Main = a.ID
		}
		if sc, ok := mains[a.ID]; ok {
			e.Scenario, e.Main = sc, a.ID
		}
		e.Actions = append(e.Actions, a.Action)
		if !slices.Contains(versions, cv{a.Contract, a.ContractVersion}) {
			versions = append(versions, cv{a.Contract, a.ContractVersion})
		}
	}
	if e.Main == "" {
		return e, false, nil
	}
	e.Verdict, err = db.LatestVerdict(ctx, tenantID, e.Main)
	if errors.Is(err, commitlayer.ErrNotFound) {
		return e, false, nil
	} else if err != nil {
		return e, false, err
	}
	for _, c := range versions {
		rec, err := db.GetContract(ctx, tenantID, c.id, c.v)
		if err != nil {
			return e, false, err
		}
		e.Contracts = append(e.Contracts, BundleContract{ID: rec.ID, Version: rec.Version, Source: string(rec.Source)})
	}
	if e.Facts, err = db.TenantFacts(ctx, tenantID); err != nil {
		return e, false, err
	}
	// The connected sources are those that ever reported a fact (one row
	// a source, in source order, as ConnectedSources reads them). The
	// sources unreachable for the last pass are those whose connector's
	// last pull failed (a pull that succeeds clears the error); the reason
	// is the short class the tenant sees (timeout, refused, http 503),
	// never the network text.
	sources, err := db.Sources(ctx, tenantID)
	if err != nil {
		return e, false, err
	}
	for _, s := range sources {
		if s.EverReported {
			e.Connected = append(e.Connected, s.Source)
		}
		if s.LastError != "" {
			if e.Unreachable == nil {
				e.Unreachable = map[string]string{}
			}
			e.Unreachable[s.Source] = s.LastError
		}
	}
	return e, true, nil
}
