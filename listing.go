package commitlayer

import "time"

// VerdictPending stands for "no verdict yet" where a verdict status is
// expected (status=pending in lists).
const VerdictPending = "pending"

// ActionFilter selects a tenant's actions for a list, newest first
// (requested_at, then id, descending). Zero fields do not filter.
type ActionFilter struct {
	Status string // the current verdict's status, or VerdictPending
	// Provisional, when set, keeps actions whose current verdict is (true)
	// or is not (false) provisional; actions without a verdict have neither.
	Provisional  *bool
	Contract     string
	Agent        string
	Subject      Subject
	Since, Until time.Time // Since ≤ requested_at < Until
	Limit        int       // page size (the store's default and cap apply)
	// After continues a list: only actions strictly after this position.
	After *ActionCursor
}

// ActionCursor is a position in a list of actions: the last one of a page.
type ActionCursor struct {
	RequestedAt time.Time
	ID          string
}

// ActionListItem is one action of a list with its current verdict (nil while pending).
type ActionListItem struct {
	Action  ActionRecord
	Verdict *Verdict
}

// ActionPage is one page of a list; Next is nil on the last page.
type ActionPage struct {
	Actions []ActionListItem
	Next    *ActionCursor
}

// StatsQuery asks for counts of actions by current verdict in Bucket-long
// buckets of requested_at from Since to Until; Contract and Agent filter.
type StatsQuery struct {
	Bucket          time.Duration
	Since, Until    time.Time
	Contract, Agent string
}

// StatusCounts counts actions by current verdict.
type StatusCounts struct {
	Pass    int `json:"PASS"`
	Fail    int `json:"FAIL"`
	Unknown int `json:"UNKNOWN"`
	Pending int `json:"pending"`
}

// Total is the sum of the counts.
func (c StatusCounts) Total() int { return c.Pass + c.Fail + c.Unknown + c.Pending }

// Add adds o to c.
func (c *StatusCounts) Add(o StatusCounts) {
	c.Pass += o.Pass
	c.Fail += o.Fail
	c.Unknown += o.Unknown
	c.Pending += o.Pending
}

// StatsRow counts one contract and agent's actions in the bucket from Start.
type StatsRow struct {
	Start    time.Time
	Contract string
	Agent    string
	Counts   StatusCounts
}
