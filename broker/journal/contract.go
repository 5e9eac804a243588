package journal

// ProgramContract is, on a code effect's decision, what Gatehouse read of
// the operations the program's own code can send through its gateway,
// before it ran: each operation (provider, method, path template relative
// to the provider's base URL), whether the contract is verified (every
// call the program can make is one of them), and for an unverified one
// why. Reader names the reader's version. Calls the program then makes are
// decided against it (their decisions record verified).
//
// At most MaxContractOperations operations and MaxContractReasons reasons
// are recorded; Counts give the totals when more were read.
type ProgramContract struct {
	Reader     string              `json:"reader"`
	Verified   bool                `json:"verified"`
	Operations []ContractOperation `json:"operations"`
	Unverified []ContractReason    `json:"unverified,omitempty"`
	// OperationsTotal and ReasonsTotal are set when the lists were cut.
	OperationsTotal int `json:"operations_total,omitempty"`
	ReasonsTotal    int `json:"reasons_total,omitempty"`
}

// Bounds on what a decision records of a contract.
const (
	MaxContractOperations = 256
	MaxContractReasons    = 32
)

// ContractOperation is one operation of a ProgramContract.
type ContractOperation struct {
	Provider string `json:"provider"`
	Method   string `json:"method"`
	Template string `json:"template"`
}

// ContractReason is why a contract is not verified: a stable reason name,
// the line of the program, and a detail for a person.
type ContractReason struct {
	Reason string `json:"reason"`
	Line   int    `json:"line,omitempty"`
	Detail string `json:"detail"`
}
