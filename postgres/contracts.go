package postgres

import (
	"context"
	"errors"
	"time"
)

// ContractRecord is one stored version of a contract.
type ContractRecord struct {
	ID        string
	Version   int
	Source    []byte // YAML or JSON as posted
	CreatedAt time.Time
}

// PutContract stores a new version when source differs from the latest
// version's, else returns the latest (created = false).
func (db *DB) PutContract(ctx context.Context, tenantID, contractID string, source []byte) (ContractRecord, bool, error) {
	return ContractRecord{}, false, errors.ErrUnsupported
}

// GetContract returns one version of a contract; version 0 means the latest.
func (db *DB) GetContract(ctx context.Context, tenantID, contractID string, version int) (ContractRecord, error) {
	return ContractRecord{}, errors.ErrUnsupported
}

// ListContracts returns the latest version of each contract.
func (db *DB) ListContracts(ctx context.Context, tenantID string) ([]ContractRecord, error) {
	return nil, errors.ErrUnsupported
}
