package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/client/webhook"
)

// webhooksChange is the GetVersion change id of verdict webhooks: from
// version 1 each published verdict queues its events for delivery.
const webhooksChange = "verdict-webhooks"

// webhookDeliveryWindow is how long an event's delivery is retried.
const webhookDeliveryWindow = 24 * time.Hour

// WebhookState is what a verification remembers of its verdict events
// across continue-as-new.
type WebhookState struct {
	// Queue holds the events not yet delivered, in order; the first may be
	// in flight (delivered again by the next run: receivers de-duplicate
	// by id, and the store skips webhooks that have it).
	Queue []webhook.Event `json:",omitempty"`
	// FinalSent is set once verdict.final is queued.
	FinalSent bool `json:",omitempty"`
}

// webhooks delivers a verification's verdict events one at a time, in
// order, each retried with backoff for up to a day (DeliverWebhooks).
type webhooks struct {
	running bool // the delivering goroutine runs
	wanted  bool // the last evaluation saw the tenant has webhooks
}

// EventID is the id of an action's verdict event: the same on every
// delivery and retry, for receivers to de-duplicate by.
func EventID(tenantID, actionID, eventType string, version int) string {
	h := sha256.Sum256([]byte(tenantID + "\x00" + actionID + "\x00" + eventType + "\x00" + strconv.Itoa(version)))
	return "evt_" + hex.EncodeToString(h[:16])
}

// queueWebhooks queues the events of a newly published verdict (from
// webhooksChange version 1 on, when the tenant has webhooks, as the
// evaluation said): verdict.changed for every version, verdict.final for
// the first one that is not provisional. verdict.final goes with the first
// final verdict published while the tenant has webhooks.
func (v *verification) queueWebhooks(ctx workflow.Context) {
	// A tenant without webhooks (the evaluation said so; its answer is in
	// the history) asks for no version: no marker, no event.
	if !v.hooks.wanted || workflow.GetVersion(ctx, webhooksChange, workflow.DefaultVersion, 1) < 1 {
		return // a tenant without webhooks, or a run from before them: nothing scheduled
	}
	st := v.webhookState()
	verdict := v.state.Verdict
	event := func(typ string) webhook.Event {
		return webhook.Event{ID: EventID(v.in.TenantID, v.in.ActionID, typ, verdict.Version), Type: typ,
			ActionID: v.in.ActionID, Sequence: verdict.Version, Verdict: verdict}
	}
	st.Queue = append(st.Queue, event(webhook.EventVerdictChanged))
	if !verdict.Provisional && !st.FinalSent {
		st.FinalSent = true
		st.Queue = append(st.Queue, event(webhook.EventVerdictFinal))
	}
	v.startWebhooks(ctx)
}

func (v *verification) webhookState() *WebhookState {
	if v.state.Webhooks == nil {
		v.state.Webhooks = &WebhookState{}
	}
	return v.state.Webhooks
}

// startWebhooks starts the delivering goroutine unless it runs. It runs
// only when there is something to deliver (a run resumed with a queue
// starts it at setup), so histories without events are unchanged.
func (v *verification) startWebhooks(ctx workflow.Context) {
	if v.hooks.running || v.state.Webhooks == nil || len(v.state.Webhooks.Queue) == 0 {
		return
	}
	v.hooks.running = true
	st := v.state.Webhooks
	workflow.Go(ctx, func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ScheduleToCloseTimeout: webhookDeliveryWindow,
			StartToCloseTimeout:    2 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:    time.Second,
				BackoffCoefficient: 2,
				MaximumInterval:    10 * time.Minute,
			},
		})
		for {
			if err := workflow.Await(ctx, func() bool { return len(st.Queue) > 0 }); err != nil {
				return // cancelled
			}
			e := st.Queue[0] // stays queued until its delivery is over
			err := workflow.ExecuteActivity(actx, act.DeliverWebhooks, activities.DeliverWebhooksInput{
				TenantID: v.in.TenantID, Event: e,
			}).Get(ctx, nil)
			if err != nil {
				// A day of retries is over (or the run is cancelled): the
				// deliveries' records say which webhooks never had it.
				workflow.GetLogger(ctx).Warn("webhook event abandoned", "event", e.ID, "error", err)
			}
			st.Queue = st.Queue[1:]
			if len(st.Queue) == 0 {
				v.nudgeIdle() // nothing left to deliver: the verification may sleep
			}
		}
	})
}

// awaitWebhooks waits until every queued event has been delivered (or
// abandoned), before the verification completes: the event in flight is
// the queue's first until its delivery is over. Without events it returns
// at once and records nothing.
func (v *verification) awaitWebhooks(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool {
		return v.state.Webhooks == nil || len(v.state.Webhooks.Queue) == 0
	})
}
