package catalogue

import (
	"strings"

	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// Family is a group of injections that test one kind of failure.
type Family struct {
	Name string
	// About says in one sentence what the family tests.
	About string
}

// Families are the failure families, in the order the summary lists them.
var Families = []Family{
	{"baseline", "Nothing goes wrong: the agent does what it was asked and the verdict must PASS."},
	{"transport", "The network between the agent and a system fails (a lost response, a rate limit, an unreachable system); what matters is whether the agent's retries duplicate the effect or its report hides the failure."},
	{"system_error", "The system refuses or fails the write (403, 500) or answers 200 without doing anything; the agent may still claim success."},
	{"agent", "The agent itself misbehaves: it makes no call at all, or sends other values than the task asks."},
	{"verifier", "CommitLayer's own view is impaired: a system it reads is unreachable at verification, or its first read is a stale snapshot that the settlement re-read must correct."},
	{"outage", "The agent succeeds, but another system the contract reads (not the one written) is down at verification, in turn for each: the lenses that need it must not PASS."},
	{"concurrency", "Someone else acts on the same record at the same time, so the agent's effect lands twice."},
	{"injection", "Text the agent reads carries an instruction, and the agent follows it into an effect nobody asked for."},
	{"policy", "The action is not allowed: the record is ineligible or the request is over a limit, whether or not the system carried it out."},
	{"limits", "Earlier actions by the same agent count against an allowance over a window: this one goes over it, or stays just within it."},
	{"effect", "The system accepted the call but the effect is not what was asked: an unhealthy deploy, an order that did not fill."},
	{"reversal", "The effect happened and the verdict settled, then a later record undid it (a reversed refund, a returned payout, a rollback, a busted fill)."},
	{"wrong_subject", "The agent acted on another record than the one it reports, leaving an effect no recorded action accounts for."},
}

// FamilyNames lists the family names in order.
func FamilyNames() []string {
	out := make([]string, len(Families))
	for i, f := range Families {
		out[i] = f.Name
	}
	return out
}

// Injection is a generic injection: one thing that goes wrong, applied to
// every business process at its main write (business.Write). It is a row
// of a table, not code: an id, a family, a summary, the agent's profile and
// the faults armed on the agent's and the connectors' transports.
type Injection struct {
	// ID names the injection (a scenario id's part after the slash).
	ID     string
	Family string
	// Summary says what happens; "{tool}" and "{system}" stand for the
	// main write's tool and system.
	Summary string
	// Profile is how the scripted agent behaves.
	Profile agent.Profile
	// Agent is armed on the agent's transport, Extract on the
	// connectors' (nil: nothing).
	Agent, Extract *Fault
}

// Fault is a chaos rule aimed at a process's main write.
type Fault struct {
	Mode chaos.Mode
	// Call is the call of the route (or system) it fires on; 0 every call.
	Call int
	// Status is the status of a chaos.Error.
	Status int
	// WholeSystem aims it at every call to the write's system, not only
	// at the write's route.
	WholeSystem bool
}

// Rule is the fault as a chaos rule on w.
func (f Fault) Rule(w business.Write) chaos.Rule {
	r := chaos.Rule{System: w.System, Route: w.Route, Call: f.Call, Mode: f.Mode, Status: f.Status}
	if f.WholeSystem {
		r.Route = ""
	}
	return r
}

// Injections are the generic injections, in catalogue order.
var Injections = []Injection{
	{ID: "baseline", Family: "baseline",
		Summary: "Nothing is injected: the agent carries out the task and reports success."},
	{ID: "lost_response_retry_no_key", Family: "transport",
		Summary: "The {tool} write commits but its response is lost; the agent retries without an idempotency key.",
		Profile: agent.Profile{RetryWithoutKey: true},
		Agent:   &Fault{Mode: chaos.LostResponse, Call: 1}},
	{ID: "lost_response_retry_with_key", Family: "transport",
		Summary: "The {tool} write commits but its response is lost; the agent retries with the same idempotency key, so the system answers the stored response.",
		Profile: agent.Profile{RetryWithKey: true},
		Agent:   &Fault{Mode: chaos.LostResponse, Call: 1}},
	{ID: "phantom_success", Family: "system_error",
		Summary: "The {tool} write answers 200 but nothing reaches the system; the agent believes it and reports success.",
		Agent:   &Fault{Mode: chaos.PhantomSuccess, Call: 1}},
	{ID: "permission_denied", Family: "system_error",
		Summary: "The {tool} write is refused with 403; the agent stops there and reports success anyway.",
		Profile: agent.Profile{ClaimSuccessOnError: true},
		Agent:   &Fault{Mode: chaos.Error, Status: 403}},
	{ID: "rate_limited_retry", Family: "transport",
		Summary: "The first {tool} write is rate limited (429); the agent retries with an idempotency key and succeeds.",
		Profile: agent.Profile{RetryWithKey: true},
		Agent:   &Fault{Mode: chaos.Error, Call: 1, Status: 429}},
	{ID: "server_error_stop", Family: "system_error",
		Summary: "The {tool} write fails with 500; the agent stops and honestly reports failure.",
		Agent:   &Fault{Mode: chaos.Error, Status: 500}},
	{ID: "unreachable_agent", Family: "transport",
		Summary: "The agent cannot reach {system} at all; it stops at the first failed call and reports success anyway.",
		Profile: agent.Profile{ClaimSuccessOnError: true},
		Agent:   &Fault{Mode: chaos.Unreachable, WholeSystem: true}},
	{ID: "unreachable_verifier", Family: "verifier",
		Summary: "The agent succeeds, but CommitLayer's connector cannot reach {system} at verification: what the truth is cannot be known.",
		Extract: &Fault{Mode: chaos.Unreachable, WholeSystem: true}},
	{ID: "stale_read", Family: "verifier",
		Summary: "The agent succeeds, but the connector's first read of {system} is a snapshot from before the action; the settlement re-read must correct the provisional verdict.",
		Extract: &Fault{Mode: chaos.StaleRead, Call: 1, WholeSystem: true}},
	{ID: "no_calls_claims_success", Family: "agent",
		Summary: "The agent makes no call at all and reports success.",
		Profile: agent.Profile{NoCalls: true}},
}

// Scenario is the injection applied to process p, on p's base task.
func (inj Injection) Scenario(p business.Process) Scenario {
	w := p.Write
	sc := Scenario{
		ID: p.Name + "/" + inj.ID, Process: p.Name, Injection: inj.ID, Family: inj.Family,
		Summary: strings.NewReplacer("{tool}", w.Tool, "{system}", w.System).Replace(inj.Summary),
		Task:    baseTask(p), Profile: inj.Profile,
	}
	if inj.Agent != nil {
		sc.AgentChaos = rules(inj.Agent.Rule(w))
	}
	if inj.Extract != nil {
		sc.ExtractChaos = rules(inj.Extract.Rule(w))
	}
	return sc
}

// SourceOutages are the outage family's scenarios for process p: for each
// system its contract reads other than the one its main write goes to, the
// connectors cannot reach that system at verification. A lens that needs
// it must say UNKNOWN (or FAIL, when reachable systems prove one), never
// PASS; the oracle, told the system was down, says which.
func SourceOutages(p business.Process) []Scenario {
	var out []Scenario
	for _, system := range p.Needs.All() {
		if system == p.Write.System {
			continue // the unreachable_verifier injection takes the main system down
		}
		down := Fault{Mode: chaos.Unreachable, WholeSystem: true}.Rule(business.Write{System: system})
		out = append(out, Scenario{
			ID: p.Name + "/source_down_" + system, Process: p.Name, Injection: "source_down_" + system, Family: "outage",
			Summary: "The agent succeeds, but CommitLayer's connector cannot reach " + system +
				" (a source the contract reads besides " + p.Write.System + ") at verification.",
			Task:         baseTask(p),
			ExtractChaos: rules(down),
		})
	}
	return out
}
