package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
)

// ActionQuery names actions of one contract as PriorActions takes them.
type ActionQuery struct {
	Contract  string
	Agent     string
	Subject   commitlayer.Subject
	From, To  time.Time
	ExcludeID string
}

// PassReadRequest is what one verification pass reads about an action besides
// the action itself.
type PassReadRequest struct {
	ActionID string
	Subject  commitlayer.Subject
	Actions  []ActionQuery
}

// PassRead answers a PassReadRequest (Actions[i] answers its Actions[i]);
// Latest is nil without a verdict; Webhooks: the tenant has an enabled webhook.
type PassRead struct {
	Facts     []commitlayer.Fact
	Actions   [][]commitlayer.Action
	Connected []string
	Latest    *commitlayer.Verdict
	Webhooks  bool
}

// ReadPass reads the facts about r.Subject, the actions of each of r.Actions,
// the connected sources and the latest verdict in one round trip: a pipelined
// batch of FactsAbout's, PriorActions', ConnectedSources' and LatestVerdict's
// statements, each in its own snapshot as separate calls would be.
func (db *DB) ReadPass(ctx context.Context, tenantID string, r PassReadRequest) (PassRead, error) {
	for _, q := range r.Actions {
		if err := checkTimes("from", q.From, "to", q.To); err != nil {
			return PassRead{}, fmt.Errorf("read pass of %q: actions of %q: %w", r.ActionID, q.Contract, classify(err))
		}
	}
	out := PassRead{Actions: make([][]commitlayer.Action, len(r.Actions))}
	b := &pgx.Batch{}
	subs := []string{string(r.Subject)}
	b.Queue(factsAboutSQL, tenantID, subs, linkKeys(tenantID, subs)).Query(func(rows pgx.Rows) error {
		facts, err := pgx.CollectRows(rows, scanFact)
		out.Facts = facts
		return err
	})
	for i, q := range r.Actions {
		cond, args := priorActionsQuery(tenantID, q.Contract, q.Agent, q.Subject, q.From, q.To, q.ExcludeID)
		b.Queue(`SELECT `+actionColumns+` FROM actions WHERE `+cond, args...).Query(func(rows pgx.Rows) error {
			acts, err := pgx.CollectRows(rows, scanPlainAction)
			out.Actions[i] = acts
			return err
		})
	}
	b.Queue(connectedSourcesSQL, tenantID).Query(func(rows pgx.Rows) error {
		connected, err := pgx.CollectRows(rows, pgx.RowTo[string])
		out.Connected = connected
		return err
	})
	b.Queue(latestVerdictSQL, tenantID, r.ActionID).Query(func(rows pgx.Rows) error {
		v, err := pgx.CollectExactlyOneRow(rows, scanVerdict)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		out.Latest = &v
		return nil
	})
	b.Queue(hasWebhooksSQL, tenantID).QueryRow(func(row pgx.Row) error { return row.Scan(&out.Webhooks) })
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return PassRead{}, fmt.Errorf("read pass of %q: %w", r.ActionID, classify(err))
	}
	return out, nil
}
