//go:build !linux

package mcpgw

import (
	"fmt"
	"os"
)

// ProtectKey removes COMMITLAYER_API_KEY from the environment, so that no
// command the gateway starts inherits it. On Linux it also keeps the key
// from same-user processes (protect_linux.go); elsewhere run the upstream
// command as another user.
func ProtectKey() error {
	if err := os.Unsetenv(envKey); err != nil {
		return fmt.Errorf("protect key: %w", err)
	}
	return nil
}
