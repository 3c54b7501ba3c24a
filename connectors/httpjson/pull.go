package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Client pulls one http_json connector.
type Client struct {
	Config Config
	// HTTP does the requests (the worker's address rules go in its
	// transport); nil means a client with the configured timeout. Its
	// redirects are refused either way.
	HTTP *http.Client
}

var errRedirect = errors.New("redirects are refused")

// Pull reads one page after cursor ("" for the first) as facts of source.
func (c *Client) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	cc, err := c.Config.compile()
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	if !commitlayer.ValidName(source) {
		return commitlayer.FactPage{}, fmt.Errorf("pull %q: source name may only hold letters, digits, '_', '-' and '.'", source)
	}
	u := *cc.url
	if cursor != "" {
		q := u.Query()
		param := c.Config.CursorParam
		if param == "" {
			param = "cursor"
		}
		q.Set(param, cursor)
		u.RawQuery = q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, cc.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range c.Config.Headers {
		req.Header.Set(k, v)
	}
	hc := http.Client{Timeout: cc.timeout}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	where := cc.url.Scheme + "://" + cc.url.Host
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, errRedirect) {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: %w: %w", source, where, ErrBadResponse, errRedirect)
		}
		// The URL's query may hold a token: name only the host, and keep
		// the cause (refused, timeout, address not allowed) without the
		// URL net/http wraps it in.
		return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: %w: %w", source, where, ErrUnreachable, transportCause(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, cc.maxBytes+1))
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: read body: %w: %w", source, where, ErrUnreachable, transportCause(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: %w", source, where, &StatusError{StatusCode: resp.StatusCode})
	}
	if int64(len(body)) > cc.maxBytes {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: %w: the answer is larger than %d bytes", source, where, ErrBadResponse, cc.maxBytes)
	}
	p, err := decodePage(cc, source, body, cursor)
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s from %s: %w", source, where, err)
	}
	return p, nil
}

// transportCause is why a request failed without the URL (which
// net/http's *url.Error repeats, query included): the error it wraps.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var te interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout() {
		return fmt.Errorf("timed out: %w", err)
	}
	return err
}

func decodePage(cc *compiled, source string, body []byte, cursor string) (commitlayer.FactPage, error) {
	bad := func(format string, args ...any) (commitlayer.FactPage, error) {
		return commitlayer.FactPage{}, fmt.Errorf("%w: %s", ErrBadResponse, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return bad("the answer is not JSON: %v", err)
	}
	if dec.More() {
		return bad("data after the JSON value")
	}
	rawItems, ok := cc.items.Get(doc)
	if !ok {
		return bad("items %q is missing", cc.items)
	}
	items, ok := rawItems.([]any)
	if !ok && rawItems != nil { // null is an empty page
		return bad("items %q is not an array", cc.items)
	}
	p := commitlayer.FactPage{Next: cursor, Facts: make([]commitlayer.Fact, 0, len(items))}
	if v, ok := cc.next.Get(doc); ok && v != nil {
		s, err := scalarText(v)
		if err != nil {
			return bad("next %q: %v", cc.next, err)
		}
		if s != "" {
			p.Next, p.More = s, true
		}
	}
	if cc.hasHasMore {
		// More pages only when the API says so too.
		v, ok := cc.hasMore.Get(doc)
		b, isBool := v.(bool)
		if ok && v != nil && !isBool {
			return bad("has_more %q is not a boolean", cc.hasMore)
		}
		p.More = p.More && b
	}
	seen := map[string]bool{}
	for i, it := range items {
		f, err := record(cc, source, it)
		if err != nil {
			return bad("items[%d]: %v", i, err)
		}
		if seen[f.ExternalID] {
			return bad("items[%d]: external id %q appears twice in the page", i, f.ExternalID)
		}
		seen[f.ExternalID] = true
		p.Facts = append(p.Facts, f)
	}
	return p, nil
}

// record maps one item to a fact.
func record(cc *compiled, source string, it any) (commitlayer.Fact, error) {
	f := commitlayer.Fact{Source: source, Type: "", Attrs: commitlayer.Attrs{}}
	str := func(name string, p Pointer) (string, error) {
		v, ok := p.Get(it)
		if !ok || v == nil {
			return "", fmt.Errorf("%s %q is missing", name, p)
		}
		s, err := scalarText(v)
		if err != nil {
			return "", fmt.Errorf("%s %q: %v", name, p, err)
		}
		return s, nil
	}
	var err error
	if cc.hasType {
		f.Type = cc.typeName
	} else if f.Type, err = str("type_pointer", cc.typ); err != nil {
		return f, err
	}
	subj, err := str("subject", cc.subject)
	if err != nil {
		return f, err
	}
	if cc.subjectType != "" {
		subj = cc.subjectType + ":" + subj
	}
	f.Subject = commitlayer.Subject(subj)
	if f.ExternalID, err = str("external_id", cc.id); err != nil {
		return f, err
	}
	at, ok := cc.at.Get(it)
	switch x := at.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return f, fmt.Errorf("occurred_at %q: %q is not RFC 3339", cc.at, x)
		}
		f.OccurredAt = t.UTC()
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return f, fmt.Errorf("occurred_at %q: %s is not integer Unix seconds", cc.at, x)
		}
		f.OccurredAt = time.Unix(n, 0).UTC()
	default:
		if !ok || at == nil {
			return f, fmt.Errorf("occurred_at %q is missing", cc.at)
		}
		return f, fmt.Errorf("occurred_at %q is neither an RFC 3339 string nor Unix seconds", cc.at)
	}
	for _, l := range cc.links {
		v, ok := l.p.Get(it)
		if !ok || v == nil {
			continue
		}
		s, err := scalarText(v)
		if err != nil {
			return f, fmt.Errorf("links %q: %v", l.p, err)
		}
		if l.typ != "" {
			s = l.typ + ":" + s
		}
		f.Links = append(f.Links, commitlayer.Subject(s))
	}
	av, ok := cc.attrs.Get(it)
	if ok && av != nil {
		m, isObj := av.(map[string]any)
		if !isObj {
			return f, fmt.Errorf("attrs %q is not an object", cc.attrs)
		}
		n, err := commitlayer.NormalizeValue(m)
		if err != nil {
			return f, fmt.Errorf("attrs %q: %v", cc.attrs, err)
		}
		f.Attrs = n.(map[string]any)
	}
	return f, f.Validate()
}

// scalarText is a string, or an integer's digits.
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		if _, err := strconv.ParseInt(x.String(), 10, 64); err != nil {
			return "", fmt.Errorf("%s is not an integer", x)
		}
		return x.String(), nil
	}
	return "", fmt.Errorf("is a %s, not a string or integer", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "value"
}
