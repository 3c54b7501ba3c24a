package api

import "github.com/commitlayer/commitlayer/postgres"

// The adapter implements every resource's store.
var (
	_ Store  = (*postgres.DB)(nil)
	_ Pinger = (*postgres.DB)(nil)
)
