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

	"github.com/commitlayer/commitlayer"
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

// PageBound is a Puller whose connector bounds the pages one pull reads
// (http_json's max_pages); the pull stops there and goes on from its cursor
// next time.
type PageBound interface {
	Puller
	MaxPages() int
}

type bounded struct {
	Puller
	pages int
}

func (b bounded) MaxPages() int { return b.pages }

// pullFunc is a Puller made of a function.
type pullFunc func(ctx context.Context, source, cursor string) (commitlayer.FactPage, error)

func (f pullFunc) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	return f(ctx, source, cursor)
}

// marking returns p with its kind's own "could not reach" errors (kindErrs)
// marked with ErrUnreachable.
func marking(p Puller, kindErrs ...error) Puller {
	return pullFunc(func(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
		pg, err := p.Pull(ctx, source, cursor)
		for _, k := range kindErrs {
			if errors.Is(err, k) {
				return commitlayer.FactPage{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
			}
		}
		return pg, err
	})
}
