// Package report is the results side of the benchmark: what a run's rows
// say, and how people read them.
//
//   - Rows and results: BuildRow (a scenario's row from the oracle's truth
//     and CommitLayer's verdicts), NewResults and Summarize (the run's
//     summary: agreement per lens, process and family, latency), PassKOf
//     (pass^k of a repeated run), SummarizeReplay, Refusals,
//     CompareWithSandbox; LLMResults for a model-driven run
//     (llm_<provider>.json).
//   - Rendering: Markdown (latest.md, opening with the
//     judge-versus-CommitLayer table, JudgeMarkdown), one self-contained
//     HTML file (HTML, Render: inline CSS and SVG, no external assets) with
//     the summary, the trace-only judges versus CommitLayer as the headline,
//     charts (agreement by failure family, verify latency, pass^k) and every
//     scenario with its findings and a link to its workflow in the Temporal
//     UI; WriteFiles and WriteLLMFiles write them.
//
// It builds and renders sandbox/matrix's types (a results file decodes into
// a [matrix.Results] as it is, [matrix.Decode]) from the catalogue's
// scenarios (sandbox/catalogue); it runs nothing: sandbox/harness's
// activities call it.
package report
