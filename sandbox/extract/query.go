package extract

import (
	"context"
	"fmt"
	"strconv"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/httpjson"
)

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

// pullQuery reads one system through the http_json query connector from
// the cursor.
func (x *Extractor) pullQuery(ctx context.Context, base, name string) (commitlayer.FactPage, int64, error) {
	c := httpjson.Client{Config: QueryConfig(base, name), HTTP: x.HTTP}
	cursor := ""
	if n := x.cursors[name]; n > 0 {
		cursor = strconv.FormatInt(n, 10)
	}
	page, err := c.PullAll(ctx, name, cursor)
	next := x.cursors[name]
	if page.Next != "" && page.Next != cursor {
		n, perr := strconv.ParseInt(page.Next, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("pull %s: cursor %q is not a sequence number", name, page.Next)
		} else if perr == nil {
			next = n
		}
	}
	return page, next, err
}
