package commitlayer

import "time"

// VerdictPending stands for "no verdict yet" where a verdict status is
// expected (status=pending in lists).
const VerdictPending = "pending"

// ActionFilter selects a tenant's actions for a list, newest first
// (requested_at, then id, descending). Zero fields do not filter.
type ActionFilter struct {
	// Status is the current verdict's status (PASS, FAIL, UNKNOWN) or
	// VerdictPending for actions without a verdict yet.
	Status string
	// Provisional, when set, keeps actions whose current verdict is (true)
	// or is not (false) provisional; actions without a verdict have neither.
	Provisional *bool
	Contract    string
	Agent       string
	Subject     Subject
	// Since and Until bound requested_at: Since ≤ requested_at < Until.
	Since, Until time.Time
	// Limit bounds the page (the store's default and cap apply).
	Limit int
	// After continues a list: only actions strictly after this position.
	After *ActionCursor
}

// ActionCursor is a position in a list of actions: the last one of a page.
type ActionCursor struct {
	RequestedAt time.Time
	ID          string
}

// ActionListItem is one action of a list with its current verdict (nil
// while pending).
type ActionListItem struct {
	Action  ActionRecord
	Verdict *Verdict
}

// ActionPage is one page of a list; Next is nil on the last page.
type ActionPage struct {
	Actions []ActionListItem
	Next    *ActionCursor
}

// StatsQuery asks for counts of actions by their current verdict in time
// buckets of requested_at: [Since, Until) cut into Bucket-long buckets from
// Since. Contract and Agent, when set, filter.
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

// StatsRow counts the actions of one contract and agent requested in the
// bucket that starts at Start.
type StatsRow struct {
	Start    time.Time
	Contract string
	Agent    string
	Counts   StatusCounts
}
