package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/connectors/pull"
)

// postFacts ingests a batch, stored whole or not at all with the notice to
// its subjects' verifications, which the reconcilers deliver until
// Temporal takes it: accepted facts always reach their verifications.
func (s *Server) postFacts(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	facts, err := decodeFacts(http.MaxBytesReader(w, r.Body, MaxFactsBody), s.bound())
	if err != nil {
		return err
	}
	res, err := s.store.InsertFacts(r.Context(), t.ID, facts)
	if err != nil {
		var fe *commitlayer.FieldError
		switch {
		case isInvalid(err) && errors.As(err, &fe):
			return errorf(http.StatusBadRequest, codeInvalidRequest, "facts: %s", fe.Error())
		case isInvalid(err):
			s.logError(r, "insert facts: invalid", err)
			return errorf(http.StatusBadRequest, codeInvalidRequest, "facts: the batch holds a value the store cannot keep")
		default:
			return fmt.Errorf("insert facts: %w", err)
		}
	}
	s.metrics.facts.WithLabelValues("inserted").Add(float64(res.Inserted))
	s.metrics.facts.WithLabelValues("duplicate").Add(float64(res.Duplicates))
	return writeJSON(w, http.StatusOK, client.FactsResult{Inserted: res.Inserted, Duplicates: res.Duplicates})
}

func viewConnector(c commitlayer.Connector) client.Connector {
	return client.Connector{
		ID: c.ID, Source: c.Source, Kind: c.Kind, URL: c.URL, KeyLast4: c.SecretHint, Config: json.RawMessage(c.Config), Cursor: c.Cursor,
		LastPullAt: timePtr(c.LastPullAt), LastError: c.LastError, LastErrorAt: timePtr(c.LastErrorAt),
		CreatedAt: c.CreatedAt,
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Server) postConnector(w http.ResponseWriter, r *http.Request) error {
	var in client.ConnectorInput
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		return err
	}
	kind, aerr := validateConnector(&in)
	if aerr != nil {
		return aerr
	}
	tenantID := tenantOf(r.Context()).ID
	id := commitlayer.NewID("conn_")
	var env pull.Env
	env.Secrets = s.secrets
	if s.guard != nil {
		env.Addresses = s.guard
	}
	// The kind checks every address with the rules its pulls dial by, and
	// seals every credential.
	st, err := kind.Prepare(r.Context(), pull.Registration{
		TenantID: tenantID, ConnectorID: id, URL: in.URL, Config: in.Config, APIKey: in.APIKey,
	}, env)
	if err != nil {
		var refused *pull.RefusedError
		if errors.As(err, &refused) {
			// Only the class: the reason may name a resolved address.
			return errorf(http.StatusUnprocessableEntity, codeAddressNotAllowed, "%s", refused.Error())
		}
		// The messages name the field and the rule broken, never a secret.
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error())
	}
	conn := commitlayer.Connector{ID: id, Source: in.Source, Kind: in.Kind, URL: st.URL, Config: st.Config,
		Secret: st.Secret, SecretHint: st.SecretHint}
	c, err := s.store.CreateConnector(r.Context(), tenantID, conn)
	switch {
	case isConflict(err):
		return errorf(http.StatusConflict, codeConflict, "source %q already has a connector", in.Source)
	case isInvalid(err):
		s.logError(r, "create connector: invalid", err)
		return errorf(http.StatusBadRequest, codeInvalidRequest, "the connector cannot be stored")
	case err != nil:
		return fmt.Errorf("create connector: %w", err)
	}
	w.Header().Set("Location", "/v1/connectors")
	return writeJSON(w, http.StatusCreated, viewConnector(c))
}

// validateConnector checks what every kind shares and returns the kind.
func validateConnector(in *client.ConnectorInput) (pull.Kind, *apiError) {
	bad := func(format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	switch {
	case in.Source == "":
		return nil, bad("source: is required")
	case !commitlayer.ValidName(in.Source):
		return nil, bad("source: %q may only hold letters, digits, '_', '-' and '.'", commitlayer.Clip(in.Source, 64))
	case in.Kind == "":
		return nil, bad("kind: is required")
	case len(in.URL) > 2048:
		return nil, bad("url: is longer than 2048 bytes")
	}
	kind, ok := pull.Lookup(in.Kind)
	if !ok {
		return nil, errorf(http.StatusUnprocessableEntity, codeUnsupportedKind, "kind: %q is not supported; use one of %s",
			commitlayer.Clip(in.Kind, 64), strings.Join(pull.Kinds(), ", "))
	}
	if in.URL != "" {
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
			strings.ContainsAny(in.URL, " \t\r\n\x00") {
			return nil, bad("url: %q is not an absolute http or https URL", commitlayer.Clip(in.URL, 128))
		}
	}
	return kind, nil
}

func (s *Server) listConnectors(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.store.ListConnectors(r.Context(), tenantOf(r.Context()).ID)
	if err != nil {
		return fmt.Errorf("list connectors: %w", err)
	}
	return writeJSON(w, http.StatusOK, client.ConnectorList{Connectors: views(cs, viewConnector)})
}

func (s *Server) listSources(w http.ResponseWriter, r *http.Request) error {
	srcs, err := s.store.Sources(r.Context(), tenantOf(r.Context()).ID)
	if err != nil {
		return fmt.Errorf("list sources: %w", err)
	}
	out := client.SourceList{Sources: make([]client.Source, 0, len(srcs))}
	for _, c := range srcs {
		out.Sources = append(out.Sources, client.Source{
			Source: c.Source, EverReported: c.EverReported, FactCount: c.FactCount,
			LastFactAt: timePtr(c.LastFactAt), LastSeenAt: timePtr(c.LastSeenAt),
			ConnectorID: c.ConnectorID, LastError: c.LastError, LastErrorAt: timePtr(c.LastErrorAt),
		})
	}
	rejected, err := s.store.SpanRejections(r.Context(), tenantOf(r.Context()).ID)
	if err != nil {
		return fmt.Errorf("list span rejections: %w", err)
	}
	out.SpanRejections = views(rejected, func(x commitlayer.SpanRejection) client.SpanRejection {
		return client.SpanRejection(x)
	})
	return writeJSON(w, http.StatusOK, out)
}

// deleteConnector removes a connector; the facts it brought stay.
func (s *Server) deleteConnector(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !storable(id) {
		return notFound("connector", id)
	}
	if err := storeErr(s.store.DeleteConnector(r.Context(), tenantOf(r.Context()).ID, id), "delete", "connector", id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
