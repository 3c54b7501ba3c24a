package mcpgw

// ScrubInitialEnv is scrubInitialEnv, for the protection test.
var ScrubInitialEnv = scrubInitialEnv
