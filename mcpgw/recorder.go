package mcpgw

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
)

// APIRecorder is the Recorder on CommitLayer's API through the Go client:
// bindings from the tenant's latest contract versions (each version's
// source fetched once), actions through POST /v1/actions.
type APIRecorder struct {
	Client *client.Client

	mu       sync.Mutex
	compiled map[string]*contracts.Contract // "id@version"
}

var _ Recorder = (*APIRecorder)(nil)

// Bindings lists the contracts and compiles the bindings of their latest
// versions. A contract that does not compile here (a newer language on the
// server) binds nothing; the others still do.
func (r *APIRecorder) Bindings(ctx context.Context) (*contracts.Bindings, error) {
	list, err := r.Client.ListContracts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list contracts: %w", err)
	}
	r.mu.Lock()
	if r.compiled == nil {
		r.compiled = map[string]*contracts.Contract{}
	}
	r.mu.Unlock()
	var cs []*contracts.Contract
	for _, c := range list {
		k := fmt.Sprintf("%s@%d", c.ID, c.Version)
		r.mu.Lock()
		cc, ok := r.compiled[k]
		r.mu.Unlock()
		if !ok {
			full, err := r.Client.GetContract(ctx, c.ID, c.Version)
			if err != nil {
				return nil, fmt.Errorf("get contract %s: %w", c.ID, err)
			}
			cc, _ = contracts.Parse([]byte(full.Source)) // nil when it does not compile
			r.mu.Lock()
			r.compiled[k] = cc
			r.mu.Unlock()
		}
		if cc != nil {
			cs = append(cs, cc)
		}
	}
	return contracts.NewBindings(cs), nil
}

// Record posts the action with the key, waiting for the provisional
// verdict when asked.
func (r *APIRecorder) Record(ctx context.Context, a commitlayer.Action, key string, wait bool, waitTimeout time.Duration) (client.Accepted, error) {
	opts := client.RecordOptions{IdempotencyKey: key}
	if wait {
		opts.Wait, opts.WaitTimeout = client.Provisional, waitTimeout
	}
	acc, err := r.Client.RecordAction(ctx, a, opts)
	if err != nil {
		return client.Accepted{}, fmt.Errorf("record action: %w", err)
	}
	return acc, nil
}
