// Package report renders a benchmark run for people: one self-contained
// HTML file (inline CSS and SVG, no external assets) with the summary, the
// trace-only judges versus CommitLayer as the headline, charts (agreement
// by failure family, verify latency, pass^k) and every scenario with its
// findings and a link to its workflow in the Temporal UI; and the
// judge-versus-CommitLayer table in markdown, which opens latest.md.
//
// It renders sandbox/matrix's types: a results file decodes into a
// [matrix.Results] as it is ([matrix.Decode]).
package report
