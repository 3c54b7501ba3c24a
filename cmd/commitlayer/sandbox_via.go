package main

import (
	"context"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/verify"
)

// scenarioVerifier is the API's verifier in a process that hosts sandbox
// scenarios (`commitlayer sandbox`, `demo`, a benchmark worker serving the
// API): an action recorded for the tenant of a scenario live here — by the
// MCP gateway or the trace ingest on a -via run — is not started (the
// service marks it started) but left to its scenario, which starts its verification as its child beside
// the enterprise (connector pulls through the scenario's chaos, the final
// verdict reported to it), as on the direct path. Every other action is
// started as the product starts it.
type scenarioVerifier struct {
	*verify.Client
	m *Main
}

var _ service.Verifier = scenarioVerifier{}

func (v scenarioVerifier) Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	if h := v.host(); h != nil {
		if _, ok := h.ScenarioWorkflow(tenantID); ok {
			return nil
		}
	}
	return v.Client.Start(ctx, tenantID, a)
}

// host is the process's scenario host, once its benchmark workers run.
func (v scenarioVerifier) host() *harness.Host {
	if v.m.Harness == nil {
		return nil
	}
	return v.m.Harness.Host
}

// apiActions is the service the process's API records and starts
// verifications with: the product's, or one starting through
// scenarioVerifier where scenarios live.
func (m *Main) apiActions(roles Roles) *service.Actions {
	if roles.BenchmarkWorker {
		return service.NewActions(m.DB, m.Contracts, scenarioVerifier{Client: m.Verifier, m: m}, nil, m.Logger)
	}
	return m.Actions
}

// viaMains names the task action of each row of a via run (action id →
// scenario id) for the check bundle; nil for a run the harness recorded.
func viaMains(started bench.Started, rows []matrix.Row) map[string]string {
	if started.Agent == nil || started.Agent.Via == "" {
		return nil
	}
	mains := map[string]string{}
	for _, r := range rows {
		if r.LLM != nil && !r.LLM.NoAction && len(r.LLM.ViaActions) > 0 {
			mains[r.LLM.ViaActions[0]] = r.ID
		}
	}
	return mains
}
