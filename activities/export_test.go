package activities

// PullStats counts a's passes' pulls by outcome (MetricPassPulls).
type PullStats struct{ Pulled, Joined, Skipped int64 }

// PassPullStats returns a's counts so far.
func PassPullStats(a *Activities) PullStats {
	c := &a.pulls
	return PullStats{Pulled: c.pulled.Load(), Joined: c.joined.Load(), Skipped: c.skipped.Load()}
}

// Outcomes of a pass's pull, the label values of MetricPassPulls.
const (
	PullPulled  = "pulled"
	PullJoined  = "joined"
	PullSkipped = "skipped"
)
