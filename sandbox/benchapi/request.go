package benchapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/sandbox/bench"
)

// Bounds of a request.
const (
	// maxConcurrency bounds the concurrency a run may ask for.
	maxConcurrency = bench.MaxConcurrency
	// maxRepeat bounds the repeat a run may ask for (pass^k).
	maxRepeat = 10
)

// checkRequest checks a request's shape (400, naming the field); what it
// names (a scenario, a backend, a recorded run, a sink) is the runner's to
// check (422). It settles the agent: a provider implies "llm".
func checkRequest(req *bench.Request) error {
	if req.Concurrency < 0 || req.Concurrency > maxConcurrency {
		return invalid("concurrency: must be between 0 (default) and %d", maxConcurrency)
	}
	for i, o := range req.Only {
		if strings.TrimSpace(o) == "" || len(o) > 200 || strings.IndexByte(o, 0) >= 0 {
			return invalid("only[%d]: must be a scenario id or prefix", i)
		}
	}
	if len(req.Payments) > 50 || strings.IndexByte(req.Payments, 0) >= 0 {
		// The runner checks the name against the backends it knows (422).
		return invalid("payments: must be a payments backend name")
	}
	if err := checkAgent(req); err != nil {
		return err
	}
	return checkExtras(*req)
}

func invalid(format string, args ...any) error {
	return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, format, args...)
}

// checkAgent checks a run's agent fields through the registry of agent
// kinds (bench.CheckAgent): the scripted agent, the model-driven one (a
// provider implies it) or a replay (replay_of). A bad field is 400, naming
// it; a provider or agent that is not one is not echoed (a key pasted in
// the wrong field stays out of the answer and the logs).
func checkAgent(req *bench.Request) error {
	_, err := bench.CheckAgent(req)
	var fe *commitlayer.FieldError
	if errors.As(err, &fe) {
		return invalid("%s: %s", fe.Field, fe.Reason)
	}
	return err
}

// checkExtras checks the shape of repeat, judge and sinks (replay_of is
// the replay kind's, checkAgent).
func checkExtras(req bench.Request) error {
	if req.Repeat < 0 || req.Repeat > maxRepeat {
		return invalid("repeat: must be between 0 (once) and %d", maxRepeat)
	}
	if len(req.Judge) > 150 || strings.IndexByte(req.Judge, 0) >= 0 {
		return invalid("judge: must be a provider name, optionally provider/model")
	}
	if len(req.Sinks) > 5 {
		return invalid("sinks: at most 5 names")
	}
	for i, s := range req.Sinks {
		if s == "" || len(s) > 30 || strings.IndexByte(s, 0) >= 0 || strings.Contains(s, ",") {
			return invalid("sinks[%d]: must be a sink name", i)
		}
	}
	return nil
}
