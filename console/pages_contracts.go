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

type contractRow struct {
	ID        string
	Latest    int
	Versions  []int
	CreatedAt time.Time
}

func (c *Console) contractList(w http.ResponseWriter, r *http.Request, se *session) error {
	recs, err := c.cfg.Store.ListContracts(r.Context(), se.tenant.ID)
	if err != nil {
		return fmt.Errorf("list contracts: %w", err)
	}
	rows := make([]contractRow, 0, len(recs))
	for _, rec := range recs {
		rows = append(rows, contractRow{ID: rec.ID, Latest: rec.Version, Versions: versions(rec.Version), CreatedAt: rec.CreatedAt})
	}
	return c.render(w, http.StatusOK, "contracts", se.page("Contracts", "contracts", "", rows))
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

func (c *Console) contract(w http.ResponseWriter, r *http.Request, se *session) error {
	ctx, tid, id := r.Context(), se.tenant.ID, r.PathValue("id")
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			p := se.page("Contract", "contracts", "version must be a whole number from 1.", nil)
			return c.render(w, http.StatusBadRequest, "error", p)
		}
		version = n
	}
	latest, err := c.cfg.Store.GetContract(ctx, tid, id, 0)
	d := contractData{Record: latest, Latest: latest.Version, Versions: versions(latest.Version)}
	if err == nil && version != 0 && version != latest.Version {
		d.Record, err = c.cfg.Store.GetContract(ctx, tid, id, version)
	}
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		p := se.page("Contract", "contracts", "There is no such contract or version.", nil)
		return c.render(w, http.StatusNotFound, "error", p)
	case err != nil:
		return fmt.Errorf("get contract: %w", err)
	}
	return c.render(w, http.StatusOK, "contract", se.page("Contract "+id, "contracts", "", d))
}

type webhookRow struct {
	Hook       commitlayer.Webhook
	Overlap    bool
	Deliveries []commitlayer.WebhookDelivery
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, se *session) error {
	ctx, tid := r.Context(), se.tenant.ID
	hooks, err := c.cfg.Store.ListWebhooks(ctx, tid)
	if err != nil {
		return fmt.Errorf("list webhooks: %w", err)
	}
	rows := make([]webhookRow, 0, len(hooks))
	for _, h := range hooks {
		ds, err := c.cfg.Store.ListDeliveries(ctx, tid, h.ID, 20)
		if err != nil {
			return fmt.Errorf("list deliveries: %w", err)
		}
		h.Secret = "" // sealed, and not the page's business
		rows = append(rows, webhookRow{Hook: h, Overlap: h.PreviousUntil.After(c.now()), Deliveries: ds})
	}
	return c.render(w, http.StatusOK, "webhooks", se.page("Webhooks", "webhooks", "", rows))
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
