// Package repotest holds tests of the repository as a whole: the module's
// import graph, and docs that must match the results they quote.
package repotest
