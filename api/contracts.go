package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
)

// viewContract is a contract version without its source.
func viewContract(rec commitlayer.ContractRecord) client.Contract {
	return client.Contract{ID: rec.ID, Version: rec.Version, CreatedAt: rec.CreatedAt}
}

// postContract compiles a YAML or JSON contract and stores it as a new
// version: 201, or 200 when the source is the latest's.
func (s *Server) postContract(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	src, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return jsonError(err) // 413 past MaxBody
	}
	if len(strings.TrimSpace(string(src))) == 0 {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "body is empty; a YAML or JSON contract is expected")
	}
	c, err := contracts.Parse(src)
	if err != nil {
		return contractError(err)
	}
	rec, created, err := s.store.PutContract(r.Context(), t.ID, c.ID(), src)
	switch {
	case isInvalid(err):
		s.logError(r, "store contract", err)
		return errorf(http.StatusUnprocessableEntity, codeInvalidContract, "contract %s cannot be stored", c.ID())
	case err != nil:
		return fmt.Errorf("store contract: %w", err)
	}
	s.contracts.Remember(t.ID, rec, c)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/contracts/"+rec.ID+"?version="+strconv.Itoa(rec.Version))
	return writeJSON(w, status, viewContract(rec))
}

// contractError is the 422 of a contract that does not compile.
func contractError(err error) *apiError {
	ae := &apiError{Status: http.StatusUnprocessableEntity, Code: codeInvalidContract}
	var msgs []string
	for _, e := range contracts.Errors(err) {
		msgs = append(msgs, e.Error())
		ae.Details = append(ae.Details, client.ErrorDetail{Field: e.Field, Line: e.Line, Message: e.Reason})
	}
	ae.Message = strings.Join(msgs, "; ")
	return ae
}

func (s *Server) listContracts(w http.ResponseWriter, r *http.Request) error {
	recs, err := s.store.ListContracts(r.Context(), tenantOf(r.Context()).ID)
	if err != nil {
		return fmt.Errorf("list contracts: %w", err)
	}
	return writeJSON(w, http.StatusOK, client.ContractList{Contracts: views(recs, viewContract)})
}

func (s *Server) getContract(w http.ResponseWriter, r *http.Request) error {
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "version: %q is not a positive integer", commitlayer.Clip(v, 32))
		}
		version = n
	}
	id := r.PathValue("id")
	if !storable(id) {
		return notFound("contract", id)
	}
	rec, err := s.store.GetContract(r.Context(), tenantOf(r.Context()).ID, id, version)
	switch {
	case isNotFound(err) && version > 0:
		return errorf(http.StatusNotFound, codeNotFound, "contract %q has no version %d", commitlayer.Clip(id, 128), version)
	case isNotFound(err):
		return notFound("contract", id)
	case err != nil:
		return fmt.Errorf("get contract: %w", err)
	}
	v := viewContract(rec)
	v.Source = string(rec.Source)
	return writeJSON(w, http.StatusOK, v)
}
