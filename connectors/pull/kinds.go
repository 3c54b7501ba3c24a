package pull

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/httpevents"
	"github.com/commitlayer/commitlayer/connectors/httpjson"
	"github.com/commitlayer/commitlayer/connectors/pgquery"
	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/netguard"
)

// kinds are the connector kinds by name; never written after init.
var kinds = map[string]Kind{}

func init() {
	for _, k := range []Kind{httpEventsKind{}, postgresKind{}, httpJSONKind{}, stripeKind{}} {
		kinds[k.Name()] = k
	}
}

func fieldErr(field, format string, args ...any) error {
	return &commitlayer.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// noSecrets refuses an api_key on a kind that takes none.
func noSecrets(reg Registration) error {
	if reg.APIKey != "" {
		return fieldErr("api_key", "only the %s kind takes one", KindStripe)
	}
	return nil
}

// http_events: a feed at url.
type httpEventsKind struct{}

func (httpEventsKind) Name() string { return KindHTTPEvents }

func (k httpEventsKind) Prepare(ctx context.Context, reg Registration, env Env) (Stored, error) {
	switch {
	case reg.URL == "":
		return Stored{}, fieldErr("url", "is required")
	case len(reg.Config) > 0 && string(reg.Config) != "null":
		return Stored{}, fieldErr("config", "the %s kind takes none", KindHTTPEvents)
	}
	if err := noSecrets(reg); err != nil {
		return Stored{}, err
	}
	if err := checkURL(ctx, env.Addresses, "url", reg.URL); err != nil {
		return Stored{}, err
	}
	return Stored{URL: reg.URL}, nil
}

func (httpEventsKind) Open(_ string, c commitlayer.Connector, opts Options) (Puller, error) {
	if c.URL == "" {
		return nil, fieldErr("url", "is required")
	}
	ec := &httpevents.Client{HTTP: opts.HTTP, BaseURL: c.URL}
	return marking(pullFunc(func(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
		after, err := strconv.ParseInt(cmp.Or(cursor, "0"), 10, 64)
		if err != nil || after < 0 {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s: cursor %q is not a non-negative integer", source, cursor)
		}
		pg, err := ec.Pull(ctx, source, after, opts.PageLimit)
		if err != nil {
			return commitlayer.FactPage{}, err
		}
		return commitlayer.FactPage{Facts: pg.Facts, Next: strconv.FormatInt(pg.Next, 10), More: pg.More}, nil
	}), httpevents.ErrUnreachable), nil
}

// postgres: a database read with SELECTs; the DSN's password sealed.
type postgresKind struct{}

func (postgresKind) Name() string { return KindPostgres }

func (k postgresKind) Prepare(ctx context.Context, reg Registration, env Env) (Stored, error) {
	if reg.URL != "" {
		return Stored{}, fieldErr("url", "the %s kind takes its address in config.dsn", KindPostgres)
	}
	if err := noSecrets(reg); err != nil {
		return Stored{}, err
	}
	cfg, err := pgquery.ParseConfig(reg.Config)
	if err != nil {
		return Stored{}, err
	}
	hosts, err := pgquery.Hosts(cfg.DSN)
	if errors.Is(err, pgquery.ErrUnixSocket) {
		return Stored{}, &RefusedError{Field: "config.dsn", Err: &netguard.AddressError{Reason: "unix socket"}}
	}
	if err != nil {
		return Stored{}, err
	}
	if env.Addresses != nil {
		for _, h := range hosts {
			if err := env.Addresses.CheckHost(ctx, h.Host, h.Port); err != nil {
				return Stored{}, &RefusedError{Field: "config.dsn", Err: err}
			}
		}
	}
	config, sealed, err := pgquery.SealDSN(env.Secrets, reg.TenantID, reg.ConnectorID, reg.Config)
	if err != nil {
		return Stored{}, err
	}
	return Stored{Config: config, Secret: sealed}, nil
}

func (postgresKind) Open(tenantID string, c commitlayer.Connector, opts Options) (Puller, error) {
	config := c.Config
	if c.Secret != "" {
		dsn, err := pgquery.OpenDSN(opts.Secrets, tenantID, c.ID, c.Secret)
		if err != nil {
			return nil, err
		}
		if config, err = pgquery.WithDSN(config, dsn); err != nil {
			return nil, err
		}
	}
	cfg, err := pgquery.ParseConfig(config)
	if err != nil {
		return nil, err
	}
	return marking(&pgquery.Client{Config: cfg, DialFunc: opts.DialFunc}, pgquery.ErrUnreachable), nil
}

// http_json: a JSON API read with GETs; its headers sealed.
type httpJSONKind struct{}

func (httpJSONKind) Name() string { return KindHTTPJSON }

func (k httpJSONKind) Prepare(ctx context.Context, reg Registration, env Env) (Stored, error) {
	if reg.URL != "" {
		return Stored{}, fieldErr("url", "the %s kind takes its address in config.url", KindHTTPJSON)
	}
	if err := noSecrets(reg); err != nil {
		return Stored{}, err
	}
	cfg, err := httpjson.ParseConfig(reg.Config)
	if err != nil {
		return Stored{}, err
	}
	if err := checkURL(ctx, env.Addresses, "config.url", cfg.URL); err != nil {
		return Stored{}, err
	}
	config, sealed, err := httpjson.SealHeaders(env.Secrets, reg.TenantID, reg.ConnectorID, reg.Config)
	if err != nil {
		return Stored{}, err
	}
	return Stored{Config: config, Secret: sealed}, nil
}

func (httpJSONKind) Open(tenantID string, c commitlayer.Connector, opts Options) (Puller, error) {
	config := c.Config
	if c.Secret != "" {
		var err error
		if config, err = httpjson.OpenHeaders(opts.Secrets, tenantID, c.ID, c.Secret, config); err != nil {
			return nil, err
		}
	}
	cfg, err := httpjson.ParseConfig(config)
	if err != nil {
		return nil, err
	}
	p := marking(&httpjson.Client{Config: cfg, HTTP: opts.HTTP}, httpjson.ErrUnreachable)
	return bounded{p, cmp.Or(cfg.MaxPages, httpjson.DefaultMaxPages)}, nil
}

// stripe: a Stripe account read with its (restricted or test) key; an
// optional base URL (a Stripe-compatible endpoint).
type stripeKind struct{}

func (stripeKind) Name() string { return KindStripe }

func (stripeKind) Prepare(ctx context.Context, reg Registration, env Env) (Stored, error) {
	switch {
	case reg.APIKey == "":
		return Stored{}, fieldErr("api_key", "is required for the %s kind", KindStripe)
	case len(reg.Config) > 0 && string(reg.Config) != "null":
		return Stored{}, fieldErr("config", "the %s kind takes none", KindStripe)
	}
	if reg.URL != "" {
		if err := checkURL(ctx, env.Addresses, "url", reg.URL); err != nil {
			return Stored{}, err
		}
	}
	sealed, hint, err := stripeconn.SealKey(env.Secrets, reg.TenantID, reg.ConnectorID, reg.APIKey)
	if err != nil {
		return Stored{}, err
	}
	return Stored{URL: reg.URL, Secret: sealed, SecretHint: hint}, nil
}

func (stripeKind) Open(tenantID string, c commitlayer.Connector, opts Options) (Puller, error) {
	key := opts.Secret
	if c.Secret != "" {
		var err error
		if key, err = stripeconn.OpenKey(opts.Secrets, tenantID, c.ID, c.Secret); err != nil {
			return nil, err
		}
	}
	if key == "" {
		return nil, errors.New("stripe connector: no api key")
	}
	sc := &stripeconn.Client{HTTP: opts.HTTP, BaseURL: c.URL, Key: key}
	// What may clear by itself (429, 5xx, network) counts as unreachable.
	return marking(pullFunc(func(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
		return sc.Pull(ctx, source, cursor, opts.PageLimit)
	}), stripeconn.ErrUnreachable, stripeconn.ErrRateLimited), nil
}
