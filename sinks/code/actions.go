package code

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	acts := []broker.Action{{
		Sink: policy.SinkCode, Name: ActionRun, Title: "Run code in the sandbox",
		Description: "Run a short program (python3 or sh) in Gatehouse's sandbox, or an integration stored in its " +
			"registry: it sees only its own workspace, gets no network when the sandbox is confined, and is killed " +
			"at its limits. Input comes only through these params and output only through the reply (exit code, " +
			"stdout, stderr, the files it left). A Python program calls providers through Gatehouse with its " +
			"client module (import gatehouse; gatehouse.post(\"erp\", \"/payments\", body={...})), each call decided " +
			"on its own and held to the operations read from the program's code before it runs: keep providers, " +
			"methods and the fixed parts of paths in the code. The target is the program's name.",
		Params: Params{},
		Fields: map[string]string{
			"program":     "the interpreter: python3 or sh (or another the deployment offers)",
			"source":      "the program's source, written to its entry file (main.py, main.sh)",
			"integration": "instead of program and source: the name of an integration stored with action register, run as registry code",
			"args":        "arguments given to the program after its entry file",
			"stdin":       "text given to the program on its standard input",
			"files":       "files written into the workspace beside the source: name to base64 content",
			"timeout_ms":  "wall-clock limit in milliseconds, at most the deployment's limit (0: the deployment's)",
		},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkCode),
		Examples: []json.RawMessage{
			json.RawMessage(`{"program": "python3", "source": "print(1+1)", "args": ["a"], "stdin": "x", "files": {"data.csv": "YSxiCg=="}, "timeout_ms": 5000}`),
			json.RawMessage(`{"integration": "` + ExampleIntegration + `", "stdin": "{\"invoice\": \"INV-7\"}"}`),
		},
	}}
	if s.cfg.Registry != nil {
		acts = append(acts, broker.Action{
			Sink: policy.SinkCode, Name: ActionRegister, Title: "Store an integration for reuse",
			Description: "Store a program in Gatehouse's registry of integrations, with the effect it declares (read, " +
				"write, destructive or notify), to run later by name (action run, integration). The operations its code " +
				"can send are read now and recorded; code whose operations go beyond its declared effect is refused. " +
				"A stored integration runs as registry code: every mutating call it makes must be one its own code " +
				"was read to send. The target is the integration's name.",
			Params: RegisterParams{},
			Fields: map[string]string{
				"name":    "the integration's name: 1 to 64 letters, digits, '.', '_' or '-'",
				"program": "the interpreter: python3",
				"source":  "the integration's source",
				"effect":  "the effect it declares: read, write, destructive or notify",
			},
			Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkCode),
			Examples: []json.RawMessage{json.RawMessage(`{"name": "erp-remind", "program": "python3", "effect": "write", ` +
				`"source": "import gatehouse, json, sys\ninv = json.load(sys.stdin)[\"invoice\"]\ngatehouse.post(\"erp\", f\"/invoices/{inv}/remind\", atom=\"erp.remind\")\n"}`)},
		})
	}
	return acts
}

// ExampleIntegration is the integration the run action's example names.
const ExampleIntegration = "erp-remind"
