package postgres

import (
	"context"
	"errors"

	"github.com/commitlayer/commitlayer"
)

// AppendVerdict stores v as a new version unless the latest says the same.
func (db *DB) AppendVerdict(ctx context.Context, tenantID string, v commitlayer.Verdict) (commitlayer.Verdict, bool, error) {
	return commitlayer.Verdict{}, false, errors.ErrUnsupported
}

// LatestVerdict returns the latest verdict of an action.
func (db *DB) LatestVerdict(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	return commitlayer.Verdict{}, errors.ErrUnsupported
}

// VerdictHistory returns every verdict of an action in version order.
func (db *DB) VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error) {
	return nil, errors.ErrUnsupported
}

// LatestVerdicts returns the latest verdict of each action that has one.
func (db *DB) LatestVerdicts(ctx context.Context, tenantID string, actionIDs []string) (map[string]commitlayer.Verdict, error) {
	return nil, errors.ErrUnsupported
}
