package httpevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// feed serves n events in the http_events format, honouring after and limit.
func feed(t *testing.T, n int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/shop/events" {
			http.NotFound(w, r)
			return
		}
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		type ev struct {
			ID         string         `json:"id"`
			Seq        int64          `json:"seq"`
			Type       string         `json:"type"`
			Subject    string         `json:"subject"`
			OccurredAt string         `json:"occurred_at"`
			Attrs      map[string]any `json:"attrs"`
			Links      []string       `json:"links"`
		}
		page := struct {
			Events []ev  `json:"events"`
			Next   int64 `json:"next"`
			More   bool  `json:"more"`
		}{Events: []ev{}, Next: after}
		for seq := after + 1; seq <= int64(n); seq++ {
			if len(page.Events) == limit {
				page.More = true
				break
			}
			page.Events = append(page.Events, ev{
				ID: fmt.Sprintf("shop-%d", seq), Seq: seq, Type: "refund_created",
				Subject:    fmt.Sprintf("order:o_%d", 1000+seq),
				OccurredAt: time.Date(2026, 11, 29, 10, 0, int(seq), 0, time.UTC).Format(time.RFC3339),
				Attrs:      map[string]any{"amount": 9007199254740993, "currency": "USD"},
				Links:      []string{fmt.Sprintf("ticket:t_%d", seq)},
			})
			page.Next = seq
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestPullPages(t *testing.T) {
	srv := feed(t, 5)
	c := &Client{HTTP: srv.Client(), BaseURL: srv.URL + "/shop/"}
	ctx := context.Background()

	p, err := c.Pull(ctx, "shop", 0, 2)
	require.NoError(t, err)
	require.Len(t, p.Facts, 2)
	require.Equal(t, int64(2), p.Next)
	require.True(t, p.More)
	f := p.Facts[0]
	require.Equal(t, "shop", f.Source)
	require.Equal(t, "shop-1", f.ExternalID)
	require.Equal(t, "refund_created", f.Type)
	require.Equal(t, commitlayer.Subject("order:o_1001"), f.Subject)
	require.Equal(t, time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC), f.OccurredAt)
	require.Equal(t, int64(9007199254740993), f.Attrs["amount"], "integers stay exact")
	require.Equal(t, []commitlayer.Subject{"ticket:t_1"}, f.Links)
	require.Zero(t, f.Seq, "the store assigns Seq")

	p, err = c.Pull(ctx, "shop", 4, 2)
	require.NoError(t, err)
	require.Len(t, p.Facts, 1)
	require.Equal(t, int64(5), p.Next)
	require.False(t, p.More)

	p, err = c.Pull(ctx, "shop", 5, 2)
	require.NoError(t, err)
	require.Empty(t, p.Facts)
	require.Equal(t, int64(5), p.Next, "an empty page keeps the cursor")
	require.False(t, p.More)
}

// pullPages follows pages from after as the pull activity does: until the
// feed has no more, its cursor does not advance, or maxPages pages were read.
func pullPages(t *testing.T, c *Client, after int64, maxPages int) Page {
	t.Helper()
	all := Page{Next: after}
	for range maxPages {
		p, err := c.Pull(context.Background(), "shop", all.Next, 0)
		require.NoError(t, err)
		all.Facts = append(all.Facts, p.Facts...)
		advanced := p.Next != all.Next
		all.Next, all.More = p.Next, p.More
		if !p.More || !advanced {
			break
		}
	}
	return all
}

func TestPullFollowsPages(t *testing.T) {
	srv := feed(t, 1203)
	c := &Client{HTTP: srv.Client(), BaseURL: srv.URL + "/shop"}

	all := pullPages(t, c, 0, 100)
	require.Len(t, all.Facts, 1203)
	require.Equal(t, int64(1203), all.Next)
	require.False(t, all.More)
	for i, f := range all.Facts {
		require.Equal(t, fmt.Sprintf("shop-%d", i+1), f.ExternalID)
	}

	bounded := pullPages(t, c, 0, 2)
	require.Len(t, bounded.Facts, 2*DefaultLimit)
	require.Equal(t, int64(2*DefaultLimit), bounded.Next)
	require.True(t, bounded.More, "stopped by the bound")

	rest := pullPages(t, c, bounded.Next, 100)
	require.Len(t, rest.Facts, 1203-2*DefaultLimit)
}

// A feed that says more but does not advance gives a page whose cursor is
// the one just read: the pull activity stops on it.
func TestPullOnFeedThatDoesNotAdvance(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("after")
		fmt.Fprintf(w, `{"events":[],"next":%s,"more":true}`, after)
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), BaseURL: srv.URL}
	p, err := c.Pull(context.Background(), "shop", 7, 0)
	require.NoError(t, err)
	require.Empty(t, p.Facts)
	require.Equal(t, int64(7), p.Next)
	require.True(t, p.More)
}

func TestPullUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now: connection refused
	c := &Client{HTTP: &http.Client{Timeout: 5 * time.Second}, BaseURL: url}
	_, err := c.Pull(context.Background(), "shop", 0, 10)
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotErrorIs(t, err, ErrBadResponse)
	require.ErrorContains(t, err, "pull shop")
}

func TestPullTimeoutIsUnreachable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &Client{HTTP: &http.Client{Timeout: 50 * time.Millisecond}, BaseURL: srv.URL}
	_, err := c.Pull(context.Background(), "shop", 0, 10)
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotErrorIs(t, err, ErrBadResponse)
}

func TestPullStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
	}{
		{500, `{"error":{"code":"internal_error","message":"internal error"}}`, "internal_error"},
		{400, `{"error":{"code":"invalid_request","message":"after must be a non-negative integer"}}`, "invalid_request"},
		{503, `<html>down</html>`, ""},
		{404, ``, ""},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := &Client{HTTP: srv.Client(), BaseURL: srv.URL}
			_, err := c.Pull(context.Background(), "shop", 0, 10)
			require.ErrorIs(t, err, ErrBadResponse)
			require.NotErrorIs(t, err, ErrUnreachable)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.status, se.StatusCode)
			require.Equal(t, tc.code, se.Code)
		})
	}
}

func TestPullBadArguments(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, base, source string
		after              int64
		want               string
	}{
		{"negative cursor", "http://127.0.0.1:1", "shop", -1, "negative"},
		{"no scheme", "127.0.0.1:1/x", "shop", 0, "not an http(s) URL"},
		{"ftp", "ftp://127.0.0.1/x", "shop", 0, "not an http(s) URL"},
		{"empty base", "", "shop", 0, "not an http(s) URL"},
		{"empty source", "http://127.0.0.1:1", "", 0, "source"},
		{"source with space", "http://127.0.0.1:1", "my shop", 0, "source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{BaseURL: tc.base}
			_, err := c.Pull(ctx, tc.source, tc.after, 10)
			require.ErrorContains(t, err, tc.want)
			require.NotErrorIs(t, err, ErrUnreachable)
		})
	}
}

const okEvent = `{"id":"shop-1","seq":1,"type":"t","subject":"order:o_1","occurred_at":"2026-11-29T10:00:00Z","attrs":{},"links":[]}`

func TestDecodePageMalformed(t *testing.T) {
	ev := func(replace ...string) string {
		return strings.NewReplacer(replace...).Replace(okEvent)
	}
	for _, tc := range []struct {
		name  string
		body  string
		after int64
		limit int
		want  string
	}{
		{"not json", `nope`, 0, 10, "not a JSON object"},
		{"array", `[]`, 0, 10, "not a JSON object"},
		{"empty", ``, 0, 10, "not a JSON object"},
		{"trailing data", `{"events":[],"next":0} {}`, 0, 10, "data after"},
		{"events missing", `{"next":0}`, 0, 10, "events is missing"},
		{"events null", `{"events":null,"next":0}`, 0, 10, "events is missing"},
		{"events not array", `{"events":{},"next":0}`, 0, 10, "not a JSON object"},
		{"next missing", `{"events":[]}`, 0, 10, "next is missing"},
		{"next string", `{"events":[],"next":"7"}`, 0, 10, "non-negative integer"},
		{"next negative", `{"events":[],"next":-1}`, 0, 10, "non-negative integer"},
		{"next fraction", `{"events":[],"next":1.5}`, 0, 10, "non-negative integer"},
		{"next behind cursor", `{"events":[],"next":3}`, 5, 10, "before the cursor"},
		{"next behind last seq", `{"events":[` + okEvent + `],"next":0}`, 0, 10, "before the last event's seq"},
		{"too many events", `{"events":[` + okEvent + `,` + ev(`shop-1`, `shop-2`, `"seq":1`, `"seq":2`) + `],"next":2}`, 0, 1, "more than the limit"},
		{"event not object", `{"events":[7],"next":1}`, 0, 10, "events[0]: not a JSON object"},
		{"id missing", `{"events":[` + ev(`"id":"shop-1",`, ``) + `],"next":1}`, 0, 10, "events[0].id: is required"},
		{"id empty", `{"events":[` + ev(`"shop-1"`, `""`) + `],"next":1}`, 0, 10, "events[0].id: is required"},
		{"id number", `{"events":[` + ev(`"shop-1"`, `12`) + `],"next":1}`, 0, 10, "events[0].id: wrong type"},
		{"type missing", `{"events":[` + ev(`"type":"t",`, ``) + `],"next":1}`, 0, 10, "events[0].type: is required"},
		{"subject missing", `{"events":[` + ev(`"subject":"order:o_1",`, ``) + `],"next":1}`, 0, 10, "events[0].subject: is required"},
		{"subject without colon", `{"events":[` + ev(`order:o_1`, `o_1`) + `],"next":1}`, 0, 10, "events[0].subject"},
		{"subject upper type", `{"events":[` + ev(`order:o_1`, `Order:o_1`) + `],"next":1}`, 0, 10, "events[0].subject"},
		{"occurred_at missing", `{"events":[` + ev(`"occurred_at":"2026-11-29T10:00:00Z",`, ``) + `],"next":1}`, 0, 10, "events[0].occurred_at: is required"},
		{"occurred_at not rfc3339", `{"events":[` + ev(`2026-11-29T10:00:00Z`, `29/11/2026`) + `],"next":1}`, 0, 10, "events[0].occurred_at"},
		{"occurred_at number", `{"events":[` + ev(`"2026-11-29T10:00:00Z"`, `1764410400`) + `],"next":1}`, 0, 10, "events[0].occurred_at: wrong type"},
		{"attrs array", `{"events":[` + ev(`"attrs":{}`, `"attrs":[1]`) + `],"next":1}`, 0, 10, "events[0].attrs: must be an object"},
		{"attrs string", `{"events":[` + ev(`"attrs":{}`, `"attrs":"x"`) + `],"next":1}`, 0, 10, "events[0].attrs"},
		{"attrs number out of range", `{"events":[` + ev(`"attrs":{}`, `"attrs":{"a":1e999}`) + `],"next":1}`, 0, 10, "events[0].attrs"},
		{"links not array", `{"events":[` + ev(`"links":[]`, `"links":"ticket:t_1"`) + `],"next":1}`, 0, 10, "events[0].links: wrong type"},
		{"link not string", `{"events":[` + ev(`"links":[]`, `"links":[3]`) + `],"next":1}`, 0, 10, "events[0].links[0]: must be a string"},
		{"link not subject", `{"events":[` + ev(`"links":[]`, `"links":["ticket"]`) + `],"next":1}`, 0, 10, "events[0].links[0]"},
		{"seq fraction", `{"events":[` + ev(`"seq":1`, `"seq":1.5`) + `],"next":1}`, 0, 10, "events[0].seq: wrong type"},
		{"seq at cursor", `{"events":[` + okEvent + `],"next":1}`, 1, 10, "events[0].seq: 1 is not after 1"},
		{"seq not increasing", `{"events":[` + ev(`"seq":1`, `"seq":3`) + `,` + ev(`shop-1`, `shop-2`, `"seq":1`, `"seq":2`) + `],"next":3}`, 0, 10, "events[1].seq: 2 is not after 3"},
		{"duplicate id", `{"events":[` + okEvent + `,` + ev(`"seq":1`, `"seq":2`) + `],"next":2}`, 0, 10, "events[1].id: \"shop-1\" appears twice"},
		{"next does not advance", `{"events":[` + ev(`"seq":1,`, ``) + `],"next":0}`, 0, 10, "did not advance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodePage("shop", []byte(tc.body), tc.after, tc.limit)
			require.ErrorIs(t, err, ErrBadResponse)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestDecodePageGood(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		after    int64
		limit    int
		facts    int
		next     int64
		more     bool
		checkOne func(t *testing.T, f commitlayer.Fact)
	}{
		{name: "empty", body: `{"events":[],"next":4}`, after: 4, limit: 10, next: 4},
		{name: "one", body: `{"events":[` + okEvent + `],"next":1,"more":false}`, limit: 10, facts: 1, next: 1},
		{name: "more from the feed", body: `{"events":[` + okEvent + `],"next":1,"more":true}`, limit: 10, facts: 1, next: 1, more: true},
		{name: "more inferred from a full page", body: `{"events":[` + okEvent + `],"next":1}`, limit: 1, facts: 1, next: 1, more: true},
		{name: "no seq, no attrs, no links, unknown fields kept out",
			body:  `{"events":[{"id":"x","type":"t","subject":"a:b","occurred_at":"2026-11-29T10:00:00.5+01:00","extra":1}],"next":9}`,
			after: 3, limit: 10, facts: 1, next: 9,
			checkOne: func(t *testing.T, f commitlayer.Fact) {
				require.Equal(t, commitlayer.Attrs{}, f.Attrs)
				require.Nil(t, f.Links)
				require.Equal(t, time.Date(2026, 11, 29, 9, 0, 0, 5e8, time.UTC), f.OccurredAt)
			}},
		{name: "attrs types",
			body:  `{"events":[{"id":"x","type":"t","subject":"a:b","occurred_at":"2026-11-29T10:00:00Z","attrs":{"i":2500,"f":2.5,"whole":2500.0,"s":"USD","b":true,"n":null,"o":{"k":[1,"x"]}}}],"next":1}`,
			limit: 10, facts: 1, next: 1,
			checkOne: func(t *testing.T, f commitlayer.Fact) {
				require.Equal(t, commitlayer.Attrs{"i": int64(2500), "f": 2.5, "whole": int64(2500), "s": "USD", "b": true, "n": nil,
					"o": map[string]any{"k": []any{int64(1), "x"}}}, f.Attrs)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePage("shop", []byte(tc.body), tc.after, tc.limit)
			require.NoError(t, err)
			require.Len(t, p.Facts, tc.facts)
			require.Equal(t, tc.next, p.Next)
			require.Equal(t, tc.more, p.More)
			for _, f := range p.Facts {
				require.NoError(t, f.Validate())
				require.Equal(t, "shop", f.Source)
			}
			if tc.checkOne != nil {
				tc.checkOne(t, p.Facts[0])
			}
		})
	}
}

func TestDecodePageRejectsBadSource(t *testing.T) {
	_, err := DecodePage("", []byte(`{"events":[],"next":0}`), 0, 10)
	require.ErrorContains(t, err, "source")
	require.False(t, errors.Is(err, ErrBadResponse), "a bad source name is the caller's mistake, not the feed's")
}

func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(`{"events":[`+okEvent+`],"next":1}`), int64(0), 10)
	f.Add([]byte(`{"events":[],"next":0,"more":true}`), int64(0), 1)
	f.Add([]byte(`{"events":[{"id":"x","type":"t","subject":"a:b","occurred_at":"2026-11-29T10:00:00Z","attrs":{"a":[{"b":1e308}]},"links":["c:d"]}],"next":5}`), int64(2), 3)
	f.Add([]byte(`{"events":[{"id":1}],"next":"x"}`), int64(0), 0)
	f.Fuzz(func(t *testing.T, body []byte, after int64, limit int) {
		if after < 0 {
			after = -after
		}
		p, err := DecodePage("shop", body, after, limit)
		if err != nil {
			require.ErrorIs(t, err, ErrBadResponse)
			return
		}
		require.GreaterOrEqual(t, p.Next, after)
		for _, f := range p.Facts {
			require.NoError(t, f.Validate())
			require.Equal(t, "shop", f.Source)
		}
	})
}
