package oracle

import (
	"fmt"
	"time"
)

// MaxDeploysPerDay is how often a service may be deployed over Window.
const MaxDeploysPerDay = 3

// deploy reads the truth of a task of the deploy process (reads platform): one
// deployment of the version asked to the environment asked, healthy and not
// rolled back; allowed to production on a service that is not degraded, at
// most three times a day, and only if it stays healthy.
func (j *reading) deploy() error {
	subject := "service:" + j.id
	version := strParam(j.in.Task, "version")
	env := strParam(j.in.Task, "environment")
	if env != "production" {
		j.failPolicy(Params, "production_only", "environment %q is not production", env)
	}
	var status string
	found, err := j.row("platform", `SELECT status FROM services WHERE id = ?`, []any{j.id}, &status)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("platform", "service_not_degraded", "service %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("platform", subject, "service_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre == "degraded" {
			j.failPolicy("platform", "service_not_degraded", "service %s was degraded", j.id)
		}
	}

	type deployment struct {
		id, version, env, health, status string
		at                               time.Time
	}
	rows, err := j.o.dbs["platform"].QueryContext(j.ctx,
		`SELECT id, version, environment, health, status, created_at FROM deployments WHERE service_id = ? ORDER BY rowid`, j.id)
	if err != nil {
		return fmt.Errorf("read deployments: %w", err)
	}
	var all []deployment
	for rows.Next() {
		var d deployment
		var at string
		if err := rows.Scan(&d.id, &d.version, &d.env, &d.health, &d.status, &at); err != nil {
			rows.Close()
			return fmt.Errorf("read deployments: %w", err)
		}
		if d.at, err = parseTime(at); err != nil {
			rows.Close()
			return fmt.Errorf("read deployments: created_at: %w", err)
		}
		all = append(all, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read deployments: %w", err)
	}
	var mine []deployment
	inWindow := 0
	for _, d := range all {
		if d.at.After(j.req) {
			mine = append(mine, d)
		}
		if d.at.After(j.req.Add(-Window)) {
			inWindow++
		}
	}
	if inWindow > MaxDeploysPerDay {
		j.failPolicy("platform", "deploys_per_day", "service %s was deployed %d times in 24 h, over %d", j.id, inWindow, MaxDeploysPerDay)
	}
	for _, d := range mine {
		if d.health == "unhealthy" {
			j.failPolicy("platform", "unhealthy", "deployment %s reported unhealthy", d.id)
		}
		// Agents deploy to production only: what counts is where the
		// deployment went, not only what was asked (a request for
		// another environment is already a reason of its own).
		if d.env != "production" && env == "production" {
			j.failPolicy("platform", "production_only", "deployment %s went to %s", d.id, d.env)
		}
	}

	switch {
	case len(mine) == 0:
		j.failOutcome("platform", "deployed", "service %s was not deployed", j.id)
	case len(mine) > 1:
		j.duplicateOutcome("platform", "deployed", "service %s was deployed %d times, not once", j.id, len(mine))
	default:
		d := mine[0]
		if d.version != version || d.env != env {
			j.failOutcome("platform", "deployed", "deployment %s is %s to %s, asked %s to %s", d.id, d.version, d.env, version, env)
		}
		if d.health != "healthy" {
			j.failOutcome("platform", "healthy", "deployment %s is %s", d.id, d.health)
		}
	}
	for _, d := range mine {
		if d.status == "rolled_back" {
			j.failOutcome("platform", "deployed", "deployment %s was rolled back", d.id)
		}
	}
	return nil
}
