package contracts_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// t0 is when the action under test is requested.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

type attrs = commitlayer.Attrs

// fact builds a fact occurring at t0+off.
func fact(source, typ, subject, id string, off time.Duration, a attrs, links ...string) commitlayer.Fact {
	f := commitlayer.Fact{Source: source, Type: typ, Subject: commitlayer.Subject(subject), ExternalID: id,
		OccurredAt: t0.Add(off), Attrs: a}
	for _, l := range links {
		f.Links = append(f.Links, commitlayer.Subject(l))
	}
	return f
}

// act builds an action requested at t0+off that claims success.
func act(id, contract, agent, subject string, off time.Duration, params attrs) commitlayer.Action {
	return commitlayer.Action{ID: id, Contract: contract, Agent: agent, Subject: commitlayer.Subject(subject),
		Params: params, RequestedAt: t0.Add(off), Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess}}
}

func connected(sources ...string) contracts.Coverage {
	return contracts.Coverage{Connected: sources}
}

func mustParse(t testing.TB, src string) *contracts.Contract {
	t.Helper()
	c, err := contracts.Parse([]byte(src))
	require.NoError(t, err)
	return c
}

func load(t testing.TB, path string) *contracts.Contract {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := contracts.Parse(src)
	require.NoError(t, err, path)
	return c
}

func sandboxContract(t testing.TB, id string) *contracts.Contract {
	t.Helper()
	return load(t, filepath.Join("..", "sandbox", "contracts", id+".yaml"))
}

// got lists a verdict's findings as "code check", in order.
func got(v commitlayer.Verdict) []string {
	out := []string{}
	for _, f := range v.Findings {
		out = append(out, string(f.Code)+" "+f.Check)
	}
	return out
}

func without(facts []commitlayer.Fact, ids ...string) []commitlayer.Fact {
	var out []commitlayer.Fact
	for _, f := range facts {
		drop := false
		for _, id := range ids {
			drop = drop || f.ExternalID == id
		}
		if !drop {
			out = append(out, f)
		}
	}
	return out
}

func finding(t testing.TB, v commitlayer.Verdict, code commitlayer.Code, check string) commitlayer.Finding {
	t.Helper()
	for _, f := range v.Findings {
		if f.Code == code && f.Check == check {
			return f
		}
	}
	require.Failf(t, "finding not found", "%s %s in %v", code, check, got(v))
	return commitlayer.Finding{}
}

// requireConsistent checks what every verdict must satisfy.
func requireConsistent(t testing.TB, v commitlayer.Verdict) {
	t.Helper()
	require.True(t, v.Status.Valid() && v.Lenses.Outcome.Valid() && v.Lenses.Policy.Valid(), "%+v", v)
	require.Equal(t, commitlayer.Worse(v.Lenses.Outcome, v.Lenses.Policy), v.Status)
	require.NotNil(t, v.Findings)
	require.NotNil(t, v.UnavailableSources)
	require.IsNonDecreasing(t, v.UnavailableSources)
	lensStatus := map[commitlayer.Lens]commitlayer.Status{commitlayer.LensOutcome: commitlayer.StatusPass, commitlayer.LensPolicy: commitlayer.StatusPass}
	seenPolicy := false
	for _, f := range v.Findings {
		require.NotNil(t, f.Facts, "finding %s %s has nil facts", f.Code, f.Check)
		require.Contains(t, commitlayer.Codes, f.Code)
		require.NotEmpty(t, f.Check)
		require.NotEmpty(t, f.Message)
		st := commitlayer.StatusFail
		if f.Code == commitlayer.CodeSourceUnavailable || f.Code == commitlayer.CodeNoSignal {
			st = commitlayer.StatusUnknown
		}
		lensStatus[f.Lens] = commitlayer.Worse(lensStatus[f.Lens], st)
		// Outcome findings come before policy findings.
		if f.Lens == commitlayer.LensPolicy {
			seenPolicy = true
		} else {
			require.False(t, seenPolicy, "outcome finding after a policy finding: %v", got(v))
		}
	}
	require.Equal(t, lensStatus[commitlayer.LensOutcome], v.Lenses.Outcome)
	require.Equal(t, lensStatus[commitlayer.LensPolicy], v.Lenses.Policy)
}
