package main

import "os"

// configFromEnv is the configuration of this process's environment, checked
// for the roles, as the commands build it.
func configFromEnv(roles Roles) (Config, error) {
	c, err := LoadConfig(os.Getenv)
	if err == nil {
		err = c.Check(roles)
	}
	return c, err
}
