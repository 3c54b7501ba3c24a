// Package contracts embeds the eight sandbox action contracts, one YAML file
// per workflow, named "<contract id>.yaml".
package contracts

import "embed"

// FS holds the contract files.
//
//go:embed *.yaml
var FS embed.FS
