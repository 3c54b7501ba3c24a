// Package catalogue is the failure matrix's scenarios: what a scenario is
// (Scenario: a business process's task, the agent's behaviour profile, the
// chaos armed on the agent's and the connectors' transports, what happens
// after settlement), the injections every process takes (Injections,
// Families) and the cases specific to one (Cases), and the catalogue built
// from them (Catalogue, Lookup, Select, RegressionSubset).
//
// A scenario never states the expected verdict: the oracle reads the
// systems' files and says what the truth was. The hooks a scenario carries
// see its live enterprise through Env; running one is sandbox/harness's
// (Live), and SplitForModel says which scenarios a model-driven agent
// leaves out.
package catalogue
