package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/commitlayer/commitlayer/console"
	"github.com/commitlayer/commitlayer/workflows"
)

// apiHandler is what the API process serves: the API, with the console
// at /console/ reading through the same store, verifier and orphan lister,
// behind the trusted proxies' headers.
func (m *Main) apiHandler() (http.Handler, error) {
	c, err := console.New(console.Config{
		Store:      m.DB,
		Verifier:   m.Actions,
		Orphans:    m.Actions,
		TemporalUI: consoleTemporalUI(m.Config),
		Namespace:  m.Config.Temporal.Namespace,
		WorkflowID: workflows.VerifyWorkflowID,
		Logger:     m.Logger.With("component", "console"),
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", c.Handler())
	mux.Handle("/console", c.Handler())
	mux.Handle("/", m.API.Handler())
	return m.Config.TrustedProxies.Wrap(mux), nil
}

// consoleTemporalUI is the Temporal UI the console links verifications to:
// COMMITLAYER_TEMPORAL_UI, else the one the benchmark report uses.
func consoleTemporalUI(cfg Config) string {
	if u := strings.TrimSpace(os.Getenv("COMMITLAYER_TEMPORAL_UI")); u != "" {
		return u
	}
	return temporalUIBase(cfg)
}
