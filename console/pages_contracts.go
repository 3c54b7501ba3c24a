package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
)

// The contracts and webhooks pages.

type contractRow struct {
	ID        string
	Latest    int
	Versions  []int
	CreatedAt time.Time
}

func (c *Console) contractList(w http.ResponseWriter, r *http.Request, se *session) {
	recs, err := c.cfg.Store.ListContracts(r.Context(), se.tenant.ID)
	if err != nil {
		c.fail(w, r, fmt.Errorf("list contracts: %w", err))
		return
	}
	rows := make([]contractRow, 0, len(recs))
	for _, rec := range recs {
		rows = append(rows, contractRow{ID: rec.ID, Latest: rec.Version, Versions: versions(rec.Version), CreatedAt: rec.CreatedAt})
	}
	c.render(w, r, http.StatusOK, "contracts", page{Title: "Contracts", Nav: "contracts", Tenant: se.tenant.Name, CSRF: se.csrf, Data: rows})
}

func versions(latest int) []int {
	var out []int
	for v := latest; v >= 1 && len(out) < 100; v-- {
		out = append(out, v)
	}
	return out
}

type contractData struct {
	Record   commitlayer.ContractRecord
	Latest   int
	Versions []int
}

func (c *Console) contract(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid, id := r.Context(), se.tenant.ID, r.PathValue("id")
	p := page{Title: "Contract", Nav: "contracts", Tenant: se.tenant.Name, CSRF: se.csrf}
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			p.Problem = "version must be a whole number from 1."
			c.render(w, r, http.StatusBadRequest, "error", p)
			return
		}
		version = n
	}
	latest, err := c.cfg.Store.GetContract(ctx, tid, id, 0)
	if err == nil && version != 0 && version != latest.Version {
		var rec commitlayer.ContractRecord
		rec, err = c.cfg.Store.GetContract(ctx, tid, id, version)
		p.Data = contractData{Record: rec, Latest: latest.Version, Versions: versions(latest.Version)}
	} else {
		p.Data = contractData{Record: latest, Latest: latest.Version, Versions: versions(latest.Version)}
	}
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		p.Problem = "There is no such contract or version."
		c.render(w, r, http.StatusNotFound, "error", p)
		return
	case err != nil:
		c.fail(w, r, fmt.Errorf("get contract: %w", err))
		return
	}
	p.Title = "Contract " + id
	c.render(w, r, http.StatusOK, "contract", p)
}

// ---- webhooks ----

type webhookRow struct {
	Hook       commitlayer.Webhook
	Overlap    bool
	Deliveries []commitlayer.WebhookDelivery
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid := r.Context(), se.tenant.ID
	hooks, err := c.cfg.Store.ListWebhooks(ctx, tid)
	if err != nil {
		c.fail(w, r, fmt.Errorf("list webhooks: %w", err))
		return
	}
	rows := make([]webhookRow, 0, len(hooks))
	for _, h := range hooks {
		ds, err := c.cfg.Store.ListDeliveries(ctx, tid, h.ID, 20)
		if err != nil {
			c.fail(w, r, fmt.Errorf("list deliveries: %w", err))
			return
		}
		h.Secret = "" // sealed, and not the page's business
		rows = append(rows, webhookRow{Hook: h, Overlap: h.PreviousUntil.After(c.now()), Deliveries: ds})
	}
	c.render(w, r, http.StatusOK, "webhooks", page{Title: "Webhooks", Nav: "webhooks", Tenant: se.tenant.Name, CSRF: se.csrf, Data: rows})
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
