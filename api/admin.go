package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

func (s *Server) postTenant(w http.ResponseWriter, r *http.Request) error {
	var in client.TenantInput
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		return err
	}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		return errorf(http.StatusBadRequest, codeInvalidRequest, "name: is required")
	case len(name) > 200:
		return errorf(http.StatusBadRequest, codeInvalidRequest, "name: is longer than 200 bytes")
	}
	if err := noNUL("name", name); err != nil {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error())
	}
	t, key, err := s.store.CreateTenant(r.Context(), name)
	if err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	return writeJSON(w, http.StatusCreated, client.Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, APIKey: key})
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.store.ListTenants(r.Context())
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	return writeJSON(w, http.StatusOK, client.TenantList{Tenants: views(ts, func(t commitlayer.Tenant) client.Tenant {
		return client.Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt}
	})})
}
