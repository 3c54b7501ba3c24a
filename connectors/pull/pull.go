// Package pull opens a tenant's connector by kind and pulls it the same way
// whatever the kind: Pull(ctx, source, cursor) returns facts, the cursor to
// store and whether more is waiting. The worker's pull activity can call
// it instead of switching on kinds.
package pull

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/httpevents"
	"github.com/commitlayer/commitlayer/connectors/httpjson"
	"github.com/commitlayer/commitlayer/connectors/pgquery"
	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// Kinds of connector.
const (
	KindHTTPEvents = "http_events"
	KindPostgres   = pgquery.Kind
	KindHTTPJSON   = httpjson.Kind
	KindStripe     = stripeconn.Kind
)

// Puller reads facts from one connector.
type Puller interface {
	Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error)
}

// ErrUnreachable is wrapped by every kind's "could not reach the source"
// errors (the source counts as not connected for this verification).
var ErrUnreachable = errors.New("source unreachable")

// Options are the process's means of reaching sources: the address rules
// belong in them.
type Options struct {
	// HTTP is the client for http_events, http_json and stripe (give it a
	// timeout and a transport that applies the address rules).
	HTTP *http.Client
	// DialFunc makes the database connections of postgres connectors.
	DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
	// PageLimit is the page size asked of http_events feeds (0: its default).
	PageLimit int
	// Secrets opens the credentials a kind sealed at registration.
	Secrets *secrets.Box
	// Secret is an opened credential given directly (the stripe kind's API
	// key), for a connector that was never sealed; never logged.
	Secret string
}

type stripePuller struct {
	c     *stripeconn.Client
	limit int
}

func (p *stripePuller) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	limit := p.limit
	if limit <= 0 || limit > 100 {
		limit = 100 // Stripe's largest page
	}
	pg, err := p.c.Pull(ctx, source, cursor, limit)
	if err != nil {
		if stripeconn.Retryable(err) {
			return commitlayer.FactPage{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return commitlayer.FactPage{}, err
	}
	return commitlayer.FactPage{Facts: pg.Facts, Next: pg.Next, More: pg.More}, nil
}

// unreachable marks a kind's own unreachable error with ErrUnreachable.
func unreachable(err, kindErr error) error {
	if errors.Is(err, kindErr) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

type eventsPuller struct {
	c     *httpevents.Client
	limit int
}

func (p *eventsPuller) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	var after int64
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s: cursor %q is not a non-negative integer", source, cursor)
		}
		after = n
	}
	pg, err := p.c.Pull(ctx, source, after, p.limit)
	if err != nil {
		return commitlayer.FactPage{}, unreachable(err, httpevents.ErrUnreachable)
	}
	return commitlayer.FactPage{Facts: pg.Facts, Next: strconv.FormatInt(pg.Next, 10), More: pg.More}, nil
}

type pgPuller struct{ c *pgquery.Client }

func (p *pgPuller) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	pg, err := p.c.Pull(ctx, source, cursor)
	if err != nil {
		return commitlayer.FactPage{}, unreachable(err, pgquery.ErrUnreachable)
	}
	return pg, nil
}

type jsonPuller struct{ c *httpjson.Client }

func (p *jsonPuller) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	pg, err := p.c.Pull(ctx, source, cursor)
	if err != nil {
		return commitlayer.FactPage{}, unreachable(err, httpjson.ErrUnreachable)
	}
	return pg, nil
}
