package main

import (
	"fmt"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// The policy and grounding files are authority: whoever can write them
// decides what Gatehouse allows. So serve, at start and at every reload,
// reads them only from regular files of its own uid (or root's) that no
// group or other may write (a symbolic link's target is what is checked;
// the check and the read are of one open file), as it does the identity
// register; otherwise the file is unreadable, which fails closed
// (policy.Unreadable refuses every effect, grounding.Unreadable every
// provider call), and the error names the file and the fix.

// rulesFileLimit bounds a rules file, as policy.Load and grounding.Load do.
const rulesFileLimit = 16 << 20

// loadPolicyFile is policy.Load of a checked file.
func loadPolicyFile(path string) (*policy.Policy, error) {
	data, err := identity.ReadOwnFile(path, "rewrite what Gatehouse's policy allows", rulesFileLimit)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return policy.Parse(path, data)
}

// loadGrounding is provider.ParseGrounding of a checked file.
func loadGrounding(path string, cat grounding.Catalogue) (*grounding.Rules, error) {
	data, err := readGroundingFile(path)
	if err != nil {
		return nil, err
	}
	return provider.ParseGrounding(path, data, cat)
}

// loadGroundingFile is grounding.Parse of a checked file, the catalogue
// left to the caller (policy check reports its problems one by one).
func loadGroundingFile(path string) (*grounding.Rules, error) {
	data, err := readGroundingFile(path)
	if err != nil {
		return nil, err
	}
	return grounding.Parse(path, data)
}

func readGroundingFile(path string) ([]byte, error) {
	data, err := identity.ReadOwnFile(path, "rewrite the grounding rules provider calls are checked against", rulesFileLimit)
	if err != nil {
		return nil, fmt.Errorf("grounding: %w", err)
	}
	return data, nil
}
