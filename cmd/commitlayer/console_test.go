package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API process serves the console at /console/ next to the API: a
// login with a tenant's key opens its pages, and the API's routes answer
// as before.
func TestConsoleMounted(t *testing.T) {
	s := newStack(t, Roles{API: true})
	key := s.tenant()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		res, err := c.Get(s.m.URL() + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, _ := get("/console")
	require.Equal(t, http.StatusMovedPermanently, code)
	code, _ = get("/console/actions")
	require.Equal(t, http.StatusSeeOther, code, "not logged in")
	res, err := c.PostForm(s.m.URL()+"/console/login", url.Values{"api_key": {key}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	code, body := get("/console/actions")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "No action matches.")
	require.NotContains(t, body, key)
	code, body = get("/console/")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, "Verdicts over time"))
	code, _ = get("/healthz")
	require.Equal(t, http.StatusOK, code, "the API's routes still answer")
	s.do(key, "GET", "/v1/actions?status=FAIL", nil, http.StatusOK, nil)
}
