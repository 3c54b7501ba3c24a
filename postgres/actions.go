package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ActionRecord is a stored action.
type ActionRecord struct {
	commitlayer.Action
	TenantID   string
	SettlesAt  time.Time
	WatchUntil time.Time
	CreatedAt  time.Time
}

// CreateAction records an action, honouring idempotency keys and client ids.
func (db *DB) CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, settlesAt, watchUntil time.Time,
	idempotencyKey string, requestHash []byte) (ActionRecord, bool, error) {
	return ActionRecord{}, false, errors.ErrUnsupported
}

// GetAction returns one action.
func (db *DB) GetAction(ctx context.Context, tenantID, actionID string) (ActionRecord, error) {
	return ActionRecord{}, errors.ErrUnsupported
}

// PriorActions returns actions of a contract by agent and/or on subject,
// requested in [from, to], excluding excludeID.
func (db *DB) PriorActions(ctx context.Context, tenantID, contractID, agent string, subject commitlayer.Subject, from, to time.Time, excludeID string) ([]commitlayer.Action, error) {
	return nil, errors.ErrUnsupported
}

// ActionsOfContract returns the actions of a contract requested at or after since.
func (db *DB) ActionsOfContract(ctx context.Context, tenantID, contractID string, since time.Time) ([]commitlayer.Action, error) {
	return nil, errors.ErrUnsupported
}

// WatchedActions returns actions on subjects whose watch_until is after now.
func (db *DB) WatchedActions(ctx context.Context, tenantID string, subjects []commitlayer.Subject, now time.Time) ([]ActionRecord, error) {
	return nil, errors.ErrUnsupported
}
