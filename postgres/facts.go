package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/commitlayer/commitlayer"
)

// InsertResult counts a batch of facts.
type InsertResult struct {
	Inserted, Duplicates int
	// Subjects are the distinct subjects and links of the inserted facts, sorted.
	Subjects []commitlayer.Subject
}

// Kind names a fact kind.
type Kind struct{ Source, Type string }

// InsertFacts stores a batch whole or not at all.
func (db *DB) InsertFacts(ctx context.Context, tenantID string, facts []commitlayer.Fact) (InsertResult, error) {
	return InsertResult{}, errors.ErrUnsupported
}

// FactsAbout returns the full history of facts on subjects, linked to them,
// and on subjects one link hop away.
func (db *DB) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	return nil, errors.ErrUnsupported
}

// FactsOfKinds returns facts of the given kinds with occurred_at in [from, to].
func (db *DB) FactsOfKinds(ctx context.Context, tenantID string, kinds []Kind, from, to time.Time) ([]commitlayer.Fact, error) {
	return nil, errors.ErrUnsupported
}

// FactsByExternalID returns one fact.
func (db *DB) FactsByExternalID(ctx context.Context, tenantID, source, externalID string) (commitlayer.Fact, error) {
	return commitlayer.Fact{}, errors.ErrUnsupported
}
