// Package workflows holds CommitLayer's Temporal workflows. Everything here
// is deterministic workflow code: time comes from workflow.Now, waits are
// timers in selectors, and nothing iterates a map to make a decision.
package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
)

// TaskQueue is the task queue the CommitLayer worker polls.
const TaskQueue = "commitlayer"

// Signal, query and update names.
const (
	// SignalFactsArrived nudges a verification: its subject (or a linked
	// subject) got new facts. Payload: FactsArrived.
	SignalFactsArrived = "facts-arrived"
	// QueryVerdict returns the verification's current verdict.
	QueryVerdict = "verdict"
	// UpdateRecheck forces a re-verification (pull, evaluate) and returns
	// the new current verdict.
	UpdateRecheck = "recheck"
	// SignalEndWatch ends a verification's watch early: once its verdict
	// is final, it records the end and completes. Payload: EndWatch.
	SignalEndWatch = "end-watch"
)

// Search attributes that make verifications findable in the Temporal UI:
//
//	temporal workflow list --query 'CommitLayerVerdict="FAIL"'
var (
	SAVerdict     = temporal.NewSearchAttributeKeyKeyword("CommitLayerVerdict")
	SAContract    = temporal.NewSearchAttributeKeyKeyword("CommitLayerContract")
	SAAgent       = temporal.NewSearchAttributeKeyKeyword("CommitLayerAgent")
	SASubject     = temporal.NewSearchAttributeKeyKeyword("CommitLayerSubject")
	SATenant      = temporal.NewSearchAttributeKeyKeyword("CommitLayerTenant")
	SAProvisional = temporal.NewSearchAttributeKeyBool("CommitLayerProvisional")
)

// SearchAttributes lists every search attribute the product's workflows
// use, for registration at worker start.
var SearchAttributes = []temporal.SearchAttributeKey{
	SAVerdict, SAContract, SAAgent, SASubject, SATenant, SAProvisional,
}

// VerifySearchAttributes are the search attributes a verification starts
// with, plus extra: what finds it before its first verdict — its tenant,
// subject and agent. The agent stays at the start because it is the value
// Temporal may refuse (too long for a search attribute, as an older API
// accepted): refused at the start, the action is marked failed for the
// tenant to see; refused in an upsert, the verification's workflow task
// would fail on every attempt. The contract, verdict and provisional flag
// come with the first verdict (publish in verify.go). Both starts (the
// product's, verify.StartOptions, and the benchmark's children) use this.
func VerifySearchAttributes(tenantID string, a commitlayer.Action, extra ...temporal.SearchAttributeUpdate) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(append([]temporal.SearchAttributeUpdate{
		SATenant.ValueSet(tenantID),
		SASubject.ValueSet(string(a.Subject)),
		SAAgent.ValueSet(a.Agent),
	}, extra...)...)
}

// VerifySummary is a verification's one-line summary in the Temporal UI.
func VerifySummary(a commitlayer.Action) string {
	return "verify " + a.Contract + " by " + a.Agent + " on " + string(a.Subject)
}

// VerifyWorkflowID is the workflow ID of an action's verification.
func VerifyWorkflowID(tenantID, actionID string) string {
	return "verify/" + tenantID + "/" + actionID
}

// PollWorkflowID is the workflow ID of a tenant's connector poller.
func PollWorkflowID(tenantID string) string {
	return "connectors/" + tenantID
}
