package main

import (
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// The policy and grounding files are authority: whoever can write them
// decides what Gatehouse allows. So serve, at start and at every reload,
// reads them only when they are regular files of its own uid that no
// group or other may write (a symbolic link's target is what is checked),
// as it does the identity register; otherwise the file is unreadable,
// which fails closed (policy.Unreadable refuses every effect,
// grounding.Unreadable every provider call), and the error names the
// file and the fix.

// checkPolicyFile checks the policy file at path.
func checkPolicyFile(path string) error {
	return identity.CheckOwnFile(path, "rewrite what Gatehouse's policy allows")
}

// loadGrounding is provider.LoadGrounding of a checked file.
func loadGrounding(path string, cat grounding.Catalogue) (*grounding.Rules, error) {
	if err := identity.CheckOwnFile(path, "rewrite the grounding rules provider calls are checked against"); err != nil {
		return nil, err
	}
	return provider.LoadGrounding(path, cat)
}
