package policy

// originTrust orders origins from least to most trusted; an origin not
// listed (or none) is trusted least.
var originTrust = map[Origin]int{
	OriginModel: 1, OriginRegistry: 2, OriginDirect: 3, OriginRuntime: 4, OriginShipped: 5,
}

// LeastTrusted returns the less trusted of two origins; an unknown or
// empty origin is less trusted than every known one, and comes back as
// OriginModel, so code whose origin is not known is held to the strictest
// rules.
func LeastTrusted(a, b Origin) Origin {
	if originTrust[a] == 0 || originTrust[b] == 0 {
		return OriginModel
	}
	if originTrust[b] < originTrust[a] {
		return b
	}
	return a
}
