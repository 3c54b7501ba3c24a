package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/stretchr/testify/require"
)

func TestContracts(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("contracts")
	_, other := e.tenant("contracts-other")

	res := e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: payoutContract})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.JSON(t)
	require.Equal(t, "send_payout", m["id"])
	require.EqualValues(t, 1, m["version"])
	require.Equal(t, "/v1/contracts/send_payout?version=1", res.Header.Get("Location"))

	// The same source again is the same version.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: payoutContract})
	require.Equal(t, http.StatusOK, res.Status)
	require.EqualValues(t, 1, res.JSON(t)["version"])

	// A change is a new version; JSON is accepted as well as YAML.
	v2 := strings.Replace(payoutContract, "watch: 1h", "watch: 2h", 1)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: v2})
	require.Equal(t, http.StatusCreated, res.Status)
	require.EqualValues(t, 2, res.JSON(t)["version"])
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"id":"json_contract","kind":"action","settlement":"1m","watch":"1m","sources":["tickets"],
		"effects":[{"id":"note","source":"tickets","type":"note_added"}]}`})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var list struct {
		Contracts []struct {
			ID      string
			Version int
			Source  *string
		}
	}
	require.NoError(t, json.Unmarshal(res.Body, &list))
	require.Len(t, list.Contracts, 2)
	require.Equal(t, "json_contract", list.Contracts[0].ID)
	require.Equal(t, "send_payout", list.Contracts[1].ID)
	require.Equal(t, 2, list.Contracts[1].Version)
	require.Nil(t, list.Contracts[1].Source)

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts/send_payout", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.EqualValues(t, 2, res.JSON(t)["version"])
	require.Equal(t, v2, res.JSON(t)["source"])
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts/send_payout?version=1", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, payoutContract, res.JSON(t)["source"])

	for _, tc := range []struct {
		path string
		want int
		code string
	}{
		{"/v1/contracts/send_payout?version=9", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/send_payout?version=0", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/send_payout?version=-1", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/send_payout?version=abc", http.StatusBadRequest, codeInvalidRequest},
		{"/v1/contracts/nope", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/%00", http.StatusNotFound, codeNotFound},
		{"/v1/contracts/%ff%fe", http.StatusNotFound, codeNotFound},
	} {
		res := e.do(apitest.Request{Method: "GET", Path: tc.path, Key: key})
		require.Equal(t, tc.want, res.Status, "%s: %s", tc.path, res.Body)
		require.Equal(t, tc.code, res.ErrCode(t), tc.path)
	}

	// Another tenant sees none of it.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts/send_payout", Key: other})
	require.Equal(t, http.StatusNotFound, res.Status)
	require.NotContains(t, string(res.Body), "ledger")
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: other})
	require.Equal(t, http.StatusOK, res.Status)
	require.JSONEq(t, `{"contracts":[]}`, string(res.Body))
}

func TestContractsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("contracts-bad")
	for _, tc := range []struct {
		name     string
		body     string
		want     int
		code     string
		contains []string
	}{
		{"empty", "", http.StatusBadRequest, codeInvalidRequest, nil},
		{"blank", "  \n ", http.StatusBadRequest, codeInvalidRequest, nil},
		{"yaml syntax", "id: [unclosed\n", http.StatusUnprocessableEntity, codeInvalidContract, []string{"line"}},
		{"bad cel", strings.Replace(payoutContract, "params.amount > 0", "params.amount >>> 0", 1),
			http.StatusUnprocessableEntity, codeInvalidContract, []string{"policy[0].rule", "line 9"}},
		{"unknown field", payoutContract + "colour: blue\n", http.StatusUnprocessableEntity, codeInvalidContract, []string{"colour"}},
		{"missing id", strings.Replace(payoutContract, "id: send_payout\n", "", 1), http.StatusUnprocessableEntity, codeInvalidContract, []string{"id"}},
		{"json array", `[1,2]`, http.StatusUnprocessableEntity, codeInvalidContract, nil},
		{"over limit", payoutContract + "# " + strings.Repeat("x", MaxBody) + "\n", http.StatusRequestEntityTooLarge, codeTooLarge, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t))
			for _, c := range tc.contains {
				require.Contains(t, string(res.Body), c)
			}
		})
	}
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: key})
	require.JSONEq(t, `{"contracts":[]}`, string(res.Body), "nothing was stored")
}
