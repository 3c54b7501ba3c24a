package pull

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/testenv"
)

// TestErrorClassesSayWhatHappened: what GET /v1/sources shows of a failed
// pull (netguard.Classify of the error, stored by the pull activity) names
// the failure: an HTTP status, a SQL error, a refused address, a refused
// connection. On HEAD an http_json 500 and a SQL error were both
// "unreachable".
func TestErrorClassesSayWhatHappened(t *testing.T) {
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer status.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	dsn := testenv.Postgres(t)
	jsonCfg := func(url string) string {
		return `{"url":"` + url + `","items":"/d","next":"/n","type":"t","subject":"/s","external_id":"/i","occurred_at":"/a"}`
	}
	pgCfg := func(dsn, sql string) string {
		return fmt.Sprintf(`{"dsn":%q,"queries":[{"type":"t","sql":%q,"cursor":"id","subject":"s","occurred_at":"at"}]}`, dsn, sql)
	}
	guard := netguard.New(netguard.Options{}) // loopback refused
	for _, tc := range []struct {
		name, kind, url, config string
		opts                    Options
		want                    string
	}{
		{"http_json 500", KindHTTPJSON, "", jsonCfg(status.URL), Options{HTTP: http.DefaultClient}, "http 500"},
		{"http_events 500", KindHTTPEvents, status.URL, "", Options{HTTP: http.DefaultClient}, "http 500"},
		{"http_json refused", KindHTTPJSON, "", jsonCfg(goneURL), Options{HTTP: http.DefaultClient}, netguard.Refused},
		{"http_json address", KindHTTPJSON, "", jsonCfg(status.URL), Options{HTTP: guard.Client()}, netguard.AddressNotAllowed},
		{"postgres sql error", KindPostgres, "", pgCfg(dsn, "SELECT * FROM no_such_table WHERE $1::text IS NULL"), Options{}, "sql error 42P01"},
		{"postgres address", KindPostgres, "", pgCfg(dsn, "SELECT 1 AS id WHERE $1::text IS NULL"), Options{DialFunc: guard.DialContext}, netguard.AddressNotAllowed},
		{"postgres refused", KindPostgres, "", pgCfg("postgres://reader@"+strings.TrimPrefix(goneURL, "http://")+"/db?sslmode=disable&connect_timeout=2", "SELECT 1 WHERE $1::text IS NULL"), Options{}, netguard.Refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open(tc.kind, tc.url, []byte(tc.config), tc.opts)
			require.NoError(t, err)
			_, err = p.Pull(context.Background(), "src", "")
			require.Error(t, err)
			require.Equal(t, tc.want, netguard.Classify(err), "error: %v", err)
		})
	}
}
