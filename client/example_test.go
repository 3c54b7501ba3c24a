package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

// Gate an agent's next irreversible step on CommitLayer's verdict.
func ExampleClient_WaitForVerdict() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(exampleServer(), "cl_tenant_key")
	if err != nil {
		log.Fatal(err)
	}
	acc, err := cl.RecordAction(ctx, commitlayer.Action{
		Contract: "refund_customer", Agent: "support-bot", Subject: "order:o_1001",
		Params: commitlayer.Attrs{"amount": 2500}, Claim: commitlayer.Claim{Status: "success"},
	})
	if err != nil {
		log.Fatal(err)
	}
	v, err := cl.WaitForVerdict(ctx, acc.ID, client.Final)
	if err != nil {
		log.Fatal(err)
	}
	if v.Status != commitlayer.StatusPass {
		fmt.Println("hold the next step:", v.Summary())
		return
	}
	fmt.Println("verified:", v.Summary())
	// Output: verified: PASS outcome=PASS policy=PASS
}

// exampleServer answers like the API: the action is recorded, its first
// read has no verdict yet, the next a final PASS.
func exampleServer() string {
	var reads atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/actions", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"id":"act_1","verdict_url":"/v1/actions/act_1"}`)
	})
	mux.HandleFunc("GET /v1/actions/act_1", func(w http.ResponseWriter, _ *http.Request) {
		verdict := "null"
		if reads.Add(1) > 1 {
			verdict = `{"action_id":"act_1","status":"PASS","provisional":false,"lenses":{"outcome":"PASS","policy":"PASS"},"findings":[],"version":2}`
		}
		fmt.Fprintf(w, `{"action":{"id":"act_1"},"verdict":%s,"history":[]}`, verdict)
	})
	return httptest.NewServer(mux).URL
}
