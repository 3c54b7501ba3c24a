package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// deploy: deploy a version of a service that is not degraded to
// production, at most three times a day.
var deploy = Process{
	Name:        Deploy,
	Contract:    "deploy_service",
	SubjectType: "service",
	Params:      []string{"version", "environment"},
	Write:       Write{System: "platform", Route: "POST /platform/services/{id}/deploy", Tool: "deploy"},
	base: Base{Subject: "service:svc_api",
		Params: commitlayer.Attrs{"version": "1.5.0", "environment": "production"}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Deploy version %v of service %s to %v", p["version"], id, p["environment"])
	},
	Report: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Deployed %v of %s to %v.", p["version"], id, p["environment"])
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_service", map[string]any{"service_id": id}); err != nil {
			return err
		}
		return s.Call(ctx, "deploy", map[string]any{"service_id": id, "version": s.Param("version"),
			"environment": s.Param("environment")})
	},
	Needs: Needs{Outcome: []string{"platform"}, Policy: []string{"platform"}},
	Effects: []Effect{
		{System: "platform", Type: "deployed"},
		{System: "platform", Type: "health_reported"},
	},
}
