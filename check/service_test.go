package check

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSameVerdictsAsTheService stores the sandbox-shaped run in the real
// store and evaluates each action with the service's Evaluate activity (the
// store's facts about the subject, through-subjects, prior and later
// actions, coverage), then checks that `check` says exactly the same:
// status, lenses, every finding with its message and facts, unavailable
// sources and claim contradiction.
func TestSameVerdictsAsTheService(t *testing.T) {
	db := teststore.DB(t)
	ctx := context.Background()
	tenant, _, err := db.CreateTenant(ctx, "check-equivalence")
	require.NoError(t, err)

	paths, err := filepath.Glob(filepath.Join("..", "sandbox", "contracts", "*.yaml"))
	require.NoError(t, err)
	for _, p := range paths {
		src, err := os.ReadFile(p)
		require.NoError(t, err)
		cs, err := LoadContracts([]string{p})
		require.NoError(t, err)
		for id := range cs {
			_, _, err := db.PutContract(ctx, tenant.ID, id, src)
			require.NoError(t, err)
		}
	}
	cs, err := LoadContracts(paths)
	require.NoError(t, err)
	facts, err := readFile(filepath.Join("testdata", "sandbox", "facts.ndjson"), ReadFacts)
	require.NoError(t, err)
	_, err = db.InsertFacts(ctx, tenant.ID, facts)
	require.NoError(t, err)
	actions, err := readFile(filepath.Join("testdata", "sandbox", "actions.ndjson"), ReadActions)
	require.NoError(t, err)
	for _, l := range actions {
		a := l.Value
		a.ContractVersion = 1
		c := cs[a.Contract]
		_, _, err := db.CreateAction(ctx, tenant.ID, a, c.SettlesAt(a.RequestedAt), c.WatchUntil(a.RequestedAt), "", nil)
		require.NoError(t, err)
	}

	mine := runSandbox(t)
	at := mine[0].Verdict.EvaluatedAt
	service := &activities.Activities{Store: db, Now: func() time.Time { return at }}
	for _, r := range mine {
		res, err := service.Evaluate(ctx, activities.EvaluateInput{TenantID: tenant.ID, ActionID: r.Action.ID})
		require.NoError(t, err, r.Action.ID)
		require.Equal(t, comparable(res.Verdict), comparable(r.Verdict), r.Action.ID)
	}
}

// comparable keeps what a verdict says, not when, which stored version or
// how long its pass took.
func comparable(v commitlayer.Verdict) commitlayer.Verdict {
	v.Version, v.ContractVersion = 0, 0
	v.EvaluatedAt = v.EvaluatedAt.UTC()
	v.SettlesAt = v.SettlesAt.UTC()
	for i := range v.Findings {
		if len(v.Findings[i].Facts) == 0 {
			v.Findings[i].Facts = nil
		}
	}
	if len(v.UnavailableSources) == 0 {
		v.UnavailableSources = nil
	}
	return v
}
