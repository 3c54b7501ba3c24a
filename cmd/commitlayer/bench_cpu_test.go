package main

import "testing"

func TestOtherDatabasesBackend(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		other   bool
	}{
		{"postgres: 15/main: postgres commitlayer 127.0.0.1(38154) idle", false},
		{"postgres: 15/main: postgres commitlayer_h26a 127.0.0.1(41692) INSERT", true},
		{"postgres: 15/main: app other [local] idle in transaction", true},
		{"postgres: 15/main: checkpointer ", false},
		{"postgres: 15/main: walwriter", false},
		{"postgres: 15/main: autovacuum worker commitlayer_h26a", false},
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", false},
	} {
		if got := otherDatabasesBackend(c.cmdline, "commitlayer"); got != c.other {
			t.Errorf("otherDatabasesBackend(%q) = %v, want %v", c.cmdline, got, c.other)
		}
	}
	if otherDatabasesBackend("postgres: 15/main: postgres x 127.0.0.1(1) idle", "") {
		t.Error("with no database known, every process counts")
	}
}

func TestCPUSnapshotSinceCountsProcessByProcess(t *testing.T) {
	before := cpuSnapshot{"postgres": {1: 10, 2: 5}, "temporal": {7: 3}}
	after := cpuSnapshot{"postgres": {1: 12, 3: 0.5}, "temporal": {7: 3.25}}
	got := after.since(before)
	// pid 2 exited (its 5 s gone from the total), pid 3 started: 2 + 0.5.
	if got["postgres"] != 2.5 || got["temporal"] != 0.25 {
		t.Fatalf("since = %v, want postgres 2.5, temporal 0.25", got)
	}
	if cpuTotal(got) != 2.75 {
		t.Fatalf("cpuTotal = %v", cpuTotal(got))
	}
}
