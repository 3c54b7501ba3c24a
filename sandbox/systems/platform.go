package systems

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const platformSchema = `
CREATE TABLE services (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	status TEXT NOT NULL,
	version TEXT NOT NULL,
	environment TEXT NOT NULL,
	fail_next_health INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE deployments (
	id TEXT PRIMARY KEY,
	service_id TEXT NOT NULL,
	version TEXT NOT NULL,
	environment TEXT NOT NULL,
	previous_version TEXT NOT NULL,
	health TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	rolled_back_at TEXT
);
CREATE INDEX deployments_service ON deployments(service_id);
`

// CodeAlreadyRolledBack refuses rolling back a deployment twice.
const CodeAlreadyRolledBack = "already_rolled_back"

// Platform values.
var (
	ServiceStatuses = []string{"healthy", "degraded"}
	Environments    = []string{"staging", "production"}
)

// Service is a deployable service.
type Service struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Status      string `json:"status"`
	Version     string `json:"version"`
	Environment string `json:"environment"`
	// FailNextHealthCheck makes the next deploy's health check report
	// unhealthy. It is the platform's configuration, not a record: it is
	// never sent to the agent nor emitted as an event.
	FailNextHealthCheck bool `json:"-"`
}

// Deployment is one deploy of a service.
type Deployment struct {
	ID              string `json:"id"`
	ServiceID       string `json:"service_id"`
	Version         string `json:"version"`
	Environment     string `json:"environment"`
	PreviousVersion string `json:"previous_version"`
	Health          string `json:"health"`
	Status          string `json:"status"`
}

// DeployRequest is POST /platform/services/{id}/deploy.
type DeployRequest struct {
	Version     string `json:"version"`
	Environment string `json:"environment"`
}

// PlatformSystem is services and deployments.
type PlatformSystem struct{ sys *System }

// NewPlatform serves the platform system over sys.
func NewPlatform(sys *System) *PlatformSystem { return &PlatformSystem{sys: sys} }

// System returns the underlying system.
func (p *PlatformSystem) System() *System { return p.sys }

const (
	serviceCols    = `id, name, status, version, environment, fail_next_health`
	deploymentCols = `id, service_id, version, environment, previous_version, health, status`
)

func scanService(row interface{ Scan(...any) error }) (Service, error) {
	var s Service
	err := row.Scan(&s.ID, &s.Name, &s.Status, &s.Version, &s.Environment, &s.FailNextHealthCheck)
	return s, err
}

func scanDeployment(row interface{ Scan(...any) error }) (Deployment, error) {
	var d Deployment
	err := row.Scan(&d.ID, &d.ServiceID, &d.Version, &d.Environment, &d.PreviousVersion, &d.Health, &d.Status)
	return d, err
}

// Routes registers the platform routes.
func (p *PlatformSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /platform/services/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return p.Service(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("GET /platform/deployments/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return p.Deployment(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("POST /platform/services/{id}/deploy", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *DeployRequest) (any, error) {
		return p.deploy(tx, r.PathValue("id"), *req)
	}))
	mux.HandleFunc("POST /platform/deployments/{id}/rollback", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *struct{}) (any, error) {
		return p.rollBack(tx, r.PathValue("id"))
	}))
	type statusReq struct {
		Status string `json:"status"`
	}
	mux.HandleFunc("POST /platform/services/{id}/status", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *statusReq) (any, error) {
		return p.setStatus(tx, r.PathValue("id"), req.Status)
	}))
	type healthReq struct {
		FailNext bool `json:"fail_next"`
	}
	mux.HandleFunc("POST /platform/services/{id}/health_check", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *healthReq) (any, error) {
		return p.failNextHealthCheck(tx, r.PathValue("id"), req.FailNext)
	}))
}

// Service reads a service.
func (p *PlatformSystem) Service(ctx context.Context, id string) (Service, error) {
	s, err := scanService(p.sys.db.QueryRowContext(ctx, `SELECT `+serviceCols+` FROM services WHERE id = ?`, id))
	if err != nil {
		return Service{}, missing(err, "service", id)
	}
	return s, nil
}

// Deployment reads a deployment.
func (p *PlatformSystem) Deployment(ctx context.Context, id string) (Deployment, error) {
	d, err := scanDeployment(p.sys.db.QueryRowContext(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = ?`, id))
	if err != nil {
		return Deployment{}, missing(err, "deployment", id)
	}
	return d, nil
}

// Deploy deploys a version of a service to an environment.
func (p *PlatformSystem) Deploy(ctx context.Context, serviceID string, req DeployRequest) (Deployment, error) {
	return do(ctx, p.sys, func(tx *Tx) (Deployment, error) { return p.deploy(tx, serviceID, req) })
}

// RollBack rolls a deployment back to the version before it (operator).
func (p *PlatformSystem) RollBack(ctx context.Context, deploymentID string) (Deployment, error) {
	return do(ctx, p.sys, func(tx *Tx) (Deployment, error) { return p.rollBack(tx, deploymentID) })
}

// SetServiceStatus marks a service healthy or degraded (operator).
func (p *PlatformSystem) SetServiceStatus(ctx context.Context, id, status string) (Service, error) {
	return do(ctx, p.sys, func(tx *Tx) (Service, error) { return p.setStatus(tx, id, status) })
}

// FailNextHealthCheck sets whether the next deploy of a service reports
// unhealthy (operator). It changes configuration only: no event.
func (p *PlatformSystem) FailNextHealthCheck(ctx context.Context, id string, fail bool) (Service, error) {
	return do(ctx, p.sys, func(tx *Tx) (Service, error) { return p.failNextHealthCheck(tx, id, fail) })
}

func (p *PlatformSystem) loadService(tx *Tx, id string) (Service, error) {
	s, err := scanService(tx.QueryRow(`SELECT `+serviceCols+` FROM services WHERE id = ?`, id))
	if err != nil {
		return Service{}, missing(err, "service", id)
	}
	return s, nil
}

func (p *PlatformSystem) deploy(tx *Tx, serviceID string, req DeployRequest) (Deployment, error) {
	switch {
	case req.Version == "" || len(req.Version) > maxName || strings.ContainsAny(req.Version, " \t\r\n"):
		return Deployment{}, invalid("version must be a short name without spaces, got %q", req.Version)
	case !slices.Contains(Environments, req.Environment):
		return Deployment{}, invalid("environment must be one of %s, got %q", strings.Join(Environments, ", "), req.Environment)
	}
	s, err := p.loadService(tx, serviceID)
	if err != nil {
		return Deployment{}, err
	}
	id, err := tx.NextID("dep_", "deployments")
	if err != nil {
		return Deployment{}, err
	}
	health := "healthy"
	if s.FailNextHealthCheck {
		health = "unhealthy"
	}
	d := Deployment{ID: id, ServiceID: s.ID, Version: req.Version, Environment: req.Environment,
		PreviousVersion: s.Version, Health: health, Status: "deployed"}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`INSERT INTO deployments(`+deploymentCols+`, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.ServiceID, d.Version, d.Environment, d.PreviousVersion, d.Health, d.Status, now); err != nil {
		return Deployment{}, fmt.Errorf("deploy: %w", err)
	}
	if _, err := tx.Exec(`UPDATE services SET version = ?, environment = ?, fail_next_health = 0 WHERE id = ?`,
		d.Version, d.Environment, s.ID); err != nil {
		return Deployment{}, fmt.Errorf("deploy: %w", err)
	}
	subject := "service:" + s.ID
	if err := tx.Emit("deployed", subject, map[string]any{"deployment_id": id, "version": d.Version, "environment": d.Environment}); err != nil {
		return Deployment{}, err
	}
	if err := tx.Emit("health_reported", subject, map[string]any{"status": health, "version": d.Version}); err != nil {
		return Deployment{}, err
	}
	return d, nil
}

func (p *PlatformSystem) rollBack(tx *Tx, deploymentID string) (Deployment, error) {
	d, err := scanDeployment(tx.QueryRow(`SELECT `+deploymentCols+` FROM deployments WHERE id = ?`, deploymentID))
	if err != nil {
		return Deployment{}, missing(err, "deployment", deploymentID)
	}
	if d.Status == "rolled_back" {
		return Deployment{}, refuse(http.StatusConflict, CodeAlreadyRolledBack, "deployment %s is already rolled back", deploymentID)
	}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`UPDATE deployments SET status = 'rolled_back', rolled_back_at = ? WHERE id = ?`, now, d.ID); err != nil {
		return Deployment{}, fmt.Errorf("roll back: %w", err)
	}
	if _, err := tx.Exec(`UPDATE services SET version = ? WHERE id = ?`, d.PreviousVersion, d.ServiceID); err != nil {
		return Deployment{}, fmt.Errorf("roll back: %w", err)
	}
	if err := tx.Emit("rolled_back", "service:"+d.ServiceID, map[string]any{"deployment_id": d.ID, "to_version": d.PreviousVersion}); err != nil {
		return Deployment{}, err
	}
	d.Status = "rolled_back"
	return d, nil
}

func (p *PlatformSystem) setStatus(tx *Tx, id, status string) (Service, error) {
	if !slices.Contains(ServiceStatuses, status) {
		return Service{}, invalid("status must be one of %s, got %q", strings.Join(ServiceStatuses, ", "), status)
	}
	s, err := p.loadService(tx, id)
	if err != nil {
		return Service{}, err
	}
	if s.Status == status {
		return s, nil
	}
	if _, err := tx.Exec(`UPDATE services SET status = ? WHERE id = ?`, status, id); err != nil {
		return Service{}, fmt.Errorf("set service status: %w", err)
	}
	if err := tx.Emit("service_status_changed", "service:"+id, map[string]any{"status": status, "previous": s.Status}); err != nil {
		return Service{}, err
	}
	s.Status = status
	return s, nil
}

func (p *PlatformSystem) failNextHealthCheck(tx *Tx, id string, fail bool) (Service, error) {
	s, err := p.loadService(tx, id)
	if err != nil {
		return Service{}, err
	}
	if _, err := tx.Exec(`UPDATE services SET fail_next_health = ? WHERE id = ?`, fail, id); err != nil {
		return Service{}, fmt.Errorf("configure health check: %w", err)
	}
	s.FailNextHealthCheck = fail
	return s, nil
}

// Seed inserts services, emitting service_registered.
func (p *PlatformSystem) Seed(ctx context.Context, s *Seeder, services []Service) error {
	return p.sys.seed(ctx, func(tx *Tx) error {
		for _, sv := range services {
			at := s.Stamp()
			if _, err := tx.Exec(`INSERT INTO services(`+serviceCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
				sv.ID, sv.Name, sv.Status, sv.Version, sv.Environment, sv.FailNextHealthCheck); err != nil {
				return fmt.Errorf("service %s: %w", sv.ID, err)
			}
			if err := tx.emitAt(at, "service_registered", "service:"+sv.ID, map[string]any{
				"name": sv.Name, "status": sv.Status, "version": sv.Version, "environment": sv.Environment,
			}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
