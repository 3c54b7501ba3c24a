package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/httpjson"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// EnvQueryConnectors names the systems whose connector is the http_json
// query connector (QueryConfig: GET, JSON Pointers, the API's own
// cursor) instead of the http_events feed connector, comma-separated
// ("payments,orders,tickets": the refund workflow's sources), for the
// worker that prepares scenarios (Activities.QueryConnectors); empty means
// feeds for all.
const EnvQueryConnectors = "COMMITLAYER_SANDBOX_QUERY_CONNECTORS"

// ParseQueryConnectors reads a value of EnvQueryConnectors, refusing a
// name that is not a system.
func ParseQueryConnectors(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(systems.Names, s) {
			return nil, fmt.Errorf("%s: %q is not a sandbox system (%s)", EnvQueryConnectors, s, strings.Join(systems.Names, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// connectorFor is the connector a scenario's tenant reads system sys of
// the enterprise at baseURL with.
func connectorFor(baseURL, sys string, query []string) (commitlayer.Connector, error) {
	if !slices.Contains(query, sys) {
		return commitlayer.Connector{Source: sys, Kind: "http_events", URL: baseURL + "/" + sys}, nil
	}
	cfg, err := json.Marshal(QueryConfig(baseURL, sys))
	if err != nil {
		return commitlayer.Connector{}, err
	}
	return commitlayer.Connector{Source: sys, Kind: "http_json", Config: cfg}, nil
}

// maxLinks is how many of a record's links the query connector reads.
const maxLinks = 8

// QueryConfig is the http_json connector configuration that reads a
// sandbox system's records as a customer would point CommitLayer at an
// existing JSON API: GET only, JSON Pointers to the records and their
// fields, the API's own cursor (after=) and has-more flag.
func QueryConfig(baseURL, system string) httpjson.Config {
	links := map[string]string{}
	for i := range maxLinks {
		links["/links/"+strconv.Itoa(i)] = "" // each a whole "type:id"
	}
	return httpjson.Config{
		URL: baseURL + "/" + system + "/events?limit=500", CursorParam: "after",
		Items: "/events", Next: "/next", HasMore: "/more",
		TypePointer: "/type", Subject: "/subject", ExternalID: "/id", OccurredAt: "/occurred_at",
		Attrs: "/attrs", Links: links,
	}
}
