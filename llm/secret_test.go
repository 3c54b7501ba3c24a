package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
)

// TestKeysNeverAppear drives every failure the adapters report, with keys
// that the server accepts and keys it refuses, and searches every error
// string, the Temporal error built from it, the provider's formatted and
// logged forms, and everything written to the default loggers.
func TestKeysNeverAppear(t *testing.T) {
	var logs bytes.Buffer
	prevSlog, prevLog := slog.Default(), log.Writer()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.SetOutput(&logs)
	t.Cleanup(func() { slog.SetDefault(prevSlog); log.SetOutput(prevLog) })

	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			good := "sk-GOODSECRET-" + p + "-9f8e7d6c5b4a"
			bad := "sk-BADSECRET-" + p + "-1a2b3c4d5e6f"
			keys := []string{good, bad}
			srv, err := fake.Start(p, twoTurns, fake.Option{Key: good})
			require.NoError(t, err)
			t.Cleanup(srv.Close)

			var texts []string
			check := func(err error) {
				if err == nil {
					return
				}
				texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err),
					llmtemporal.ApplicationError(err).Error())
			}
			cfg := srv.Config()
			prov, err := llm.New(cfg)
			require.NoError(t, err)
			texts = append(texts, fmt.Sprintf("%v %+v %#v %s", prov, prov, prov, prov))
			slog.Info("provider", "provider", prov)

			for _, f := range []fake.Fault{{Status: 429, RetryAfter: time.Second}, {Status: 500}, {Malformed: true}} {
				srv.Inject(f)
				_, err := prov.Complete(context.Background(), firstRequest())
				require.Error(t, err)
				check(err)
				slog.Error("turn failed", "err", err)
			}
			// A bad request.
			_, err = prov.Complete(context.Background(), llm.Request{MaxTokens: 10, Messages: []llm.Message{{Role: "system", Text: "x"}}})
			check(err)

			// The wrong key, and a server that is gone.
			cfg.APIKey = bad
			wrong, err := llm.New(cfg)
			require.NoError(t, err)
			_, err = wrong.Complete(context.Background(), firstRequest())
			require.Error(t, err)
			check(err)
			slog.Error("turn failed", "err", err, "provider", wrong)

			gone := srv.Config()
			gone.APIKey = good
			gone.BaseURL = "http://127.0.0.1:1/"
			dead, err := llm.New(gone)
			require.NoError(t, err)
			_, err = dead.Complete(context.Background(), firstRequest())
			require.Error(t, err)
			check(err)

			// No key at all names the variable, not a value.
			t.Setenv(llm.KeyEnv[p], "")
			_, err = llm.FromEnv(p, "")
			check(err)

			for _, s := range append(texts, logs.String()) {
				for _, k := range keys {
					require.NotContains(t, s, k)
				}
			}
		})
	}
}
