package harness

import (
	"fmt"
	"log/slog"
	"net/http"
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
}

// HTTPClient returns the client a tenant's connectors are pulled with: the
// scenario's extractor chaos transport for a benchmark tenant, nil (the
// default) for any other. Plug it into activities.Activities.HTTPClient.
func (h *Host) HTTPClient(tenantID string) *http.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.live[tenantID]; ok {
		return l.ExtractClient()
	}
	return nil
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
