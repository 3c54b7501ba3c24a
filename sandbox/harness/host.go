package harness

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// Host holds the live enterprises of the scenarios running in this
// process, by tenant. Its methods are not activities.
type Host struct {
	mu       sync.Mutex
	live     map[string]*live         // by tenant id
	prepared map[string]PrepareResult // by run/scenario: a retried Prepare answers the same
	// payments are the payments backends selected in this process, by name,
	// each selected once (lazily) and closed by CloseAll.
	payments map[string]*stripepay.Selection
}

// Payments returns this process's payments backend named name ("" is the
// sandbox), selecting it on first use: a stripe-fake selection starts the
// in-process fake Stripe, a stripe one reads and checks the key through
// getenv. A failed selection is not kept, so a fixed environment is seen.
func (h *Host) Payments(name string, getenv func(string) string, logger *slog.Logger) (*stripepay.Selection, error) {
	if name == "" {
		name = stripepay.NameSandbox
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if sel, ok := h.payments[name]; ok {
		return sel, nil
	}
	sel, err := stripepay.Select(name, getenv, logger)
	if err != nil {
		return nil, err
	}
	if h.payments == nil {
		h.payments = map[string]*stripepay.Selection{}
	}
	h.payments[name] = sel
	return sel, nil
}

type live struct {
	*Live
	tenantID string
	dir      string
	started  time.Time
	key      string // run/scenario
	// workflowID is the Scenario workflow that prepared it.
	workflowID string
	// tenantKey is the scenario tenant's API key, kept in this process's
	// memory only: the via paths record through the API with it
	// (via_run.go); it is in no workflow input, result or log.
	tenantKey string
}

// ExtractTransport returns the transport a tenant's connectors are pulled
// through: the scenario's extractor chaos for a tenant of a scenario live
// in this process, nil for any other.
func (h *Host) ExtractTransport(tenantID string) http.RoundTripper {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.live[tenantID]; ok {
		return l.ExtractChaos
	}
	return nil
}

// ExtractClient is the HTTP client the benchmark's verifications pull their
// tenants' connectors with (the sandbox's wiring of activities.Activities):
// each request to a scenario's enterprise goes through that scenario's
// chaos transport (every enterprise listens on an address of its own),
// others straight to the network.
func (h *Host) ExtractClient() *http.Client {
	return &http.Client{Transport: enterpriseRouter{h}, Timeout: clientTimeout}
}

type enterpriseRouter struct{ h *Host }

func (r enterpriseRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.h.mu.Lock()
	var rt http.RoundTripper
	for _, l := range r.h.live {
		if u, err := url.Parse(l.Env.Enterprise.URL()); err == nil && u.Host == req.URL.Host {
			rt = l.ExtractChaos
			break
		}
	}
	r.h.mu.Unlock()
	if rt != nil {
		return rt.RoundTrip(req)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// ScenarioWorkflow is the workflow ID of the scenario whose enterprise
// serves a tenant, when that scenario is live in this process.
func (h *Host) ScenarioWorkflow(tenantID string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.live[tenantID]
	if !ok || l.workflowID == "" {
		return "", false
	}
	return l.workflowID, true
}

func (a *Activities) get(tenantID string) (*live, error) {
	a.Host.mu.Lock()
	defer a.Host.mu.Unlock()
	l, ok := a.Host.live[tenantID]
	if !ok {
		// The enterprise lived in a process that is gone: the scenario
		// cannot go on, and retrying will not bring it back.
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no live enterprise for tenant %s in this process", tenantID), "ScenarioLost", nil)
	}
	return l, nil
}

// CloseAll closes every live enterprise and then the payments backends
// (process shutdown).
func (h *Host) CloseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, l := range h.live {
		l.closeVia()
		_ = l.Close()
		_ = os.RemoveAll(l.dir)
		delete(h.live, id)
		delete(h.prepared, l.key)
	}
	for name, sel := range h.payments {
		sel.Close()
		delete(h.payments, name)
	}
}
