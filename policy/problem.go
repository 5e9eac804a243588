package policy

// Problem says why p cannot be used, as a policy made by Unreadable
// refuses every effect with policy-unreadable: the error the file could
// not be read with (Load's errors name the file). It is "" for a readable
// policy (Load, Parse, Default), and says so for a nil one.
func (p *Policy) Problem() string {
	if p == nil {
		return "no policy was loaded"
	}
	return p.problem
}
