package api

import (
	"net/http"
	"strings"
)

// maxBenchmarkRepeat bounds the repeat a run may ask for (pass^k).
const maxBenchmarkRepeat = 10

// checkBenchmarkExtras checks the shape of a benchmark request's
// replay_of, repeat and judge (400); the runner checks what they name
// (422): a recorded run, a provider.
func checkBenchmarkExtras(req BenchmarkRequest) error {
	if req.Repeat < 0 || req.Repeat > maxBenchmarkRepeat {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "repeat: must be between 0 (once) and %d", maxBenchmarkRepeat)
	}
	if len(req.ReplayOf) > 100 || strings.IndexByte(req.ReplayOf, 0) >= 0 || strings.ContainsAny(req.ReplayOf, " /") {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "replay_of: must be a benchmark run id")
	}
	if len(req.Judge) > 150 || strings.IndexByte(req.Judge, 0) >= 0 {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "judge: must be a provider name, optionally provider/model")
	}
	if len(req.Sinks) > 5 {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "sinks: at most 5 names")
	}
	for i, s := range req.Sinks {
		if s == "" || len(s) > 30 || strings.IndexByte(s, 0) >= 0 || strings.Contains(s, ",") {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "sinks[%d]: must be a sink name", i)
		}
	}
	if req.ReplayOf != "" && (len(req.Only) > 0 || req.Payments != "" || req.Repeat > 1 || req.Judge != "") {
		return errorf(http.StatusBadRequest, codeInvalidRequest,
			"replay_of: a replay re-runs the recorded run's scenarios on its payments backend and carries its judges' verdicts over; only, payments, repeat and judge do not apply")
	}
	if req.ReplayOf != "" && (req.Agent != "" || req.Provider != "") {
		return errorf(http.StatusBadRequest, codeInvalidRequest,
			"replay_of: a replay re-sends the recorded calls and asks no model; agent and provider do not apply (a recorded model-driven run replays as it is)")
	}
	return nil
}
