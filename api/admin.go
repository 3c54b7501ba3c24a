package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/commitlayer/commitlayer/client"
)

// postTenant creates a tenant: 201 {"id","name","api_key"}.
func (s *Server) postTenant(w http.ResponseWriter, r *http.Request) {
	var in client.TenantInput
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "name: is required"))
		return
	case len(name) > 200:
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "name: is longer than 200 bytes"))
		return
	}
	if err := noNUL("name", name); err != nil {
		s.writeError(w, r, errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error()))
		return
	}
	t, key, err := s.store.CreateTenant(r.Context(), name)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("create tenant: %w", err))
		return
	}
	writeJSON(w, http.StatusCreated, client.Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, APIKey: key})
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.store.ListTenants(r.Context())
	if err != nil {
		s.writeError(w, r, fmt.Errorf("list tenants: %w", err))
		return
	}
	out := client.TenantList{Tenants: make([]client.Tenant, 0, len(ts))}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, client.Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}
