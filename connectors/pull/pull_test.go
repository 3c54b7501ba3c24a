package pull

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestOpenEachKind(t *testing.T) {
	events := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/events", r.URL.Path)
		if r.URL.Query().Get("after") != "0" {
			fmt.Fprint(w, `{"events":[],"next":1,"more":false}`)
			return
		}
		fmt.Fprint(w, `{"events":[{"id":"e1","seq":1,"type":"refund_created","subject":"order:o_1","occurred_at":"2026-11-01T10:00:00Z","attrs":{"amount":5}}],"next":1,"more":false}`)
	}))
	defer events.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":"r1","order":"o_1","at":"2026-11-01T10:00:00Z"}],"next":null}`)
	}))
	defer api.Close()
	dsn := testenv.Postgres(t)

	tests := []struct {
		kind, url, config string
		next              string
		subject           commitlayer.Subject
	}{
		{KindHTTPEvents, events.URL, "", "1", "order:o_1"},
		{KindHTTPJSON, "", `{"url":"` + api.URL + `","items":"/data","next":"/next","type":"refund_created","subject":"/order","subject_type":"order","external_id":"/id","occurred_at":"/at"}`, "", "order:o_1"},
		{KindPostgres, "", `{"dsn":"` + dsn + `","queries":[{"type":"refund_created","sql":"SELECT 7::bigint AS id, 'o_1' AS order_id, now() AS at WHERE $1::bigint IS NULL","cursor":"id","subject":"order_id","subject_type":"order","occurred_at":"at"}]}`, `{"refund_created":"7"}`, "order:o_1"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			p, err := Open(tt.kind, tt.url, []byte(tt.config), Options{HTTP: http.DefaultClient})
			require.NoError(t, err)
			page, err := p.Pull(context.Background(), "src", "")
			require.NoError(t, err)
			require.Len(t, page.Facts, 1)
			require.Equal(t, tt.subject, page.Facts[0].Subject)
			require.Equal(t, "src", page.Facts[0].Source)
			require.Equal(t, tt.next, page.Next)
			require.False(t, page.More)
		})
	}
}

func TestOpenRefusesBadInput(t *testing.T) {
	_, err := Open("carrier_pigeon", "", nil, Options{})
	require.ErrorContains(t, err, `connector kind "carrier_pigeon" is not supported`)
	_, err = Open(KindPostgres, "", []byte(`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"DELETE FROM t WHERE $1","cursor":"id","subject":"s","occurred_at":"at"}]}`), Options{})
	require.ErrorContains(t, err, "queries[0].sql: must be a SELECT")
	_, err = Open(KindHTTPJSON, "", []byte(`{}`), Options{})
	require.ErrorContains(t, err, "url: is required")
	p, err := Open(KindHTTPEvents, "http://127.0.0.1:1", nil, Options{})
	require.NoError(t, err)
	_, err = p.Pull(context.Background(), "src", "x")
	require.ErrorContains(t, err, `cursor "x" is not a non-negative integer`)
}

func TestUnreachableIsMarkedForEveryKind(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	url := gone.URL
	gone.Close()
	host := url[len("http://"):]
	for _, tc := range []struct{ kind, url, config string }{
		{KindHTTPEvents, url, ""},
		{KindHTTPJSON, "", `{"url":"` + url + `","items":"/d","next":"/n","type":"t","subject":"/s","external_id":"/i","occurred_at":"/a"}`},
		{KindPostgres, "", `{"dsn":"postgres://reader:pw-secret@` + host + `/db?sslmode=disable&connect_timeout=2","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"}]}`},
	} {
		p, err := Open(tc.kind, tc.url, []byte(tc.config), Options{HTTP: http.DefaultClient})
		require.NoError(t, err, tc.kind)
		_, err = p.Pull(context.Background(), "src", "")
		require.ErrorIs(t, err, ErrUnreachable, tc.kind)
		require.NotContains(t, err.Error(), "pw-secret")
	}
}
