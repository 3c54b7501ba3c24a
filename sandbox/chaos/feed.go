package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// head returns the highest seq of a system's feed, paging through it.
func (t *Transport) head(ctx context.Context, system string) (int64, error) {
	if t.base == "" {
		return 0, errors.New("transport has no base URL")
	}
	var after int64
	for range 10000 {
		u := fmt.Sprintf("%s/%s/events?after=%d&limit=5000", t.base, system, after)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, err
		}
		resp, err := t.inner.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("feed answered %d", resp.StatusCode)
		}
		var page struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
			Next int64 `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, fmt.Errorf("decode feed: %w", err)
		}
		if len(page.Events) == 0 || page.Next <= after {
			return after, nil
		}
		after = page.Next
	}
	return 0, errors.New("feed does not end")
}

// CutFeed keeps the events of an http_events page with seq ≤ snapshot and
// sets "next" to the highest seq kept (or after when none is kept). It
// returns the new body and how many events it hid. Fields it does not know
// are kept.
func CutFeed(body []byte, snapshot, after int64) ([]byte, int, error) {
	var page map[string]json.RawMessage
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, 0, fmt.Errorf("decode feed page: %w", err)
	}
	var events []json.RawMessage
	if raw, ok := page["events"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &events); err != nil {
			return nil, 0, fmt.Errorf("decode feed events: %w", err)
		}
	}
	kept := make([]json.RawMessage, 0, len(events))
	next := after
	for i, ev := range events {
		var head struct {
			Seq *int64 `json:"seq"`
		}
		if err := json.Unmarshal(ev, &head); err != nil || head.Seq == nil {
			return nil, 0, fmt.Errorf("feed event %d has no seq", i)
		}
		if *head.Seq <= snapshot {
			kept = append(kept, ev)
			next = max(next, *head.Seq)
		}
	}
	var err error
	if page["events"], err = json.Marshal(kept); err != nil {
		return nil, 0, err
	}
	if page["next"], err = json.Marshal(next); err != nil {
		return nil, 0, err
	}
	out, err := json.Marshal(page)
	if err != nil {
		return nil, 0, err
	}
	return out, len(events) - len(kept), nil
}
