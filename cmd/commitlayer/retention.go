package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer/postgres"
)

// Fact retention: COMMITLAYER_FACT_RETENTION (a Go duration, e.g. 2160h for
// 90 days; unset or 0 keeps every fact) makes each worker process purge,
// every retentionInterval, the facts older than that which no open
// verification reads (postgres.DB.PurgeFacts: never a fact a watching
// verification's pass reads, never a verdict). `commitlayer purge-facts`
// runs one purge now.

const (
	envFactRetention = "COMMITLAYER_FACT_RETENTION"
	// minFactRetention refuses a retention too short to outlive any sane
	// watch window: facts within it are what limits and windows count.
	minFactRetention  = time.Hour
	retentionInterval = time.Hour
)

// factRetentionFromEnv reads COMMITLAYER_FACT_RETENTION; 0 when unset.
func factRetentionFromEnv() (time.Duration, error) {
	s := strings.TrimSpace(os.Getenv(envFactRetention))
	if s == "" || s == "0" {
		return 0, nil
	}
	return parseRetention(envFactRetention, s)
}

func parseRetention(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < minFactRetention {
		return 0, fmt.Errorf("%s %q is not a duration of at least %s (set it above the longest settlement + watch + limit window of your contracts, e.g. 2160h)", name, s, minFactRetention)
	}
	return d, nil
}

// startRetention purges facts past Config.FactRetention in the background
// until Close, when the process runs a worker and retention is set.
func (m *Main) startRetention(roles Roles) {
	if m.Config.FactRetention <= 0 || !roles.Worker {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.DB.RunFactRetention(ctx, m.Config.FactRetention, retentionInterval, m.Logger.With("component", "retention"))
	}()
	m.stopRetention = func() { cancel(); <-done }
}

// purgeFactsCmd is `commitlayer purge-facts [-retention D]`: one purge of
// every tenant's facts past retention, now.
func purgeFactsCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("commitlayer purge-facts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv(envFactRetention)
	ret := fs.String("retention", def, "drop facts older than this that no open verification reads (default "+envFactRetention+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ret == "" {
		fmt.Fprintf(stderr, "commitlayer purge-facts: set -retention or %s\n", envFactRetention)
		return 2
	}
	d, err := parseRetention("-retention", *ret)
	if err != nil {
		fmt.Fprintln(stderr, "commitlayer purge-facts:", err)
		return 2
	}
	db, err := postgres.Open(ctx, envOr("DATABASE_URL", DefaultDatabaseURL))
	if err != nil {
		logger.Error("purge-facts", "error", err)
		return 1
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		logger.Error("purge-facts", "error", err)
		return 1
	}
	start := time.Now()
	res, err := db.PurgeFacts(ctx, d, time.Now())
	if err != nil {
		logger.Error("purge-facts", "error", err)
		return 1
	}
	fmt.Fprintf(stdout, "purged %d facts older than %s of %d tenants in %s\n", res.Deleted, d, res.Tenants, time.Since(start).Round(time.Millisecond))
	return 0
}
