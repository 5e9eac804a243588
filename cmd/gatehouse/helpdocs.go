package main

// cmdDocs are the examples and exit statuses of every command's help
// (renderHelp), by the name its flag set has ("approve show"); a
// subcommand without an entry shows its group's. Every example must run
// as written against `gatehouse serve` on its defaults (README.md shows
// most of them); TestHelp checks each command has examples and exit
// statuses.
var cmdDocs = map[string]cmdDoc{
	"gatehouse": {
		examples: []string{
			"gatehouse serve                              # everything on one machine, data in ./.gatehouse",
			"gatehouse work open --tenant acme --person ada --scope reports",
			"gatehouse verify                             # check the journal offline",
		},
		exits: []exitDoc{{0, "done"}, {1, "the command's check found something, or it failed (see each command)"}, {2, "bad usage or unusable input"}},
	},
	"serve": {
		examples: []string{
			"gatehouse serve                                        # embedded NATS on 127.0.0.1:4222, dashboard on :8080",
			"gatehouse serve --mode strict --policy rules.yaml",
			"GATEHOUSE_MODE=strict gatehouse serve --http 127.0.0.1:9090 --nats-port -1",
		},
		exits: []exitDoc{{0, "stopped cleanly (Ctrl-C, SIGTERM)"}, {1, "it could not start, or its journal writer stopped"},
			{2, "bad flags, or a Gatehouse already runs on this data dir or these ports"}},
	},
	"writer": {
		examples: []string{
			"gatehouse writer --nats-url nats://nats-1:4222 --nats-creds broker.nk --journal-dir /srv/journal",
			"gatehouse writer --nats-url nats://nats-1:4222 --http 127.0.0.1:9090 --signing-key-file log.key --log-origin acme.example/gatehouse",
		},
		exits: []exitDoc{{0, "stopped cleanly"}, {1, "NATS or the journal could not be opened, or another writer holds it"}, {2, "bad flags"}},
	},
	"work": {
		examples: []string{
			"gatehouse work open --tenant acme --person ada --scope reports",
			"gatehouse work open --tenant acme --person bob --agent invoice-bot --mandate-systems output --mandate-expires 2h",
			"gatehouse work close r_01m8n75ye327hsa7apgb8fqfxn",
		},
		exits: []exitDoc{{0, "opened (the run id is printed) or closed"}, {1, "the broker refused it, or no broker answered"}, {2, "bad usage"}},
	},
	"effect": {
		examples: []string{
			"gatehouse effect output --run r_01m8n75ye327hsa7apgb8fqfxn --result '{\"rows\": 3}'",
			"gatehouse effect code --run RUN --action run --params '{\"program\": \"python3\", \"source\": \"print(6*7)\"}'",
			"gatehouse effect memory --run RUN --action put --params '{\"key\": \"k\", \"value\": 1}' --json",
		},
		exits: []exitDoc{{0, "allowed, and it happened"}, {1, "refused, or allowed and it failed (a program exiting non-zero), or no broker answered"},
			{2, "bad usage (an unknown sink or action, params that are not a JSON object, a body too large, a named agent's credential without --agent: BAD_REQUEST, UNKNOWN_SINK, TOO_LARGE, CREDENTIAL_REFUSED)"}, {3, "held for a person's approval (the approval id is printed)"}},
	},
	"agents": {
		examples: []string{
			"gatehouse agents add invoice-bot                # creds/agent-invoice-bot.nk",
			"gatehouse agents add runner --origin shipped",
			"gatehouse agents list --json",
		},
		exits: []exitDoc{{0, "done"}, {1, "refused (the agent exists, or there is no such agent)"}, {2, "bad usage"}},
	},
	"apps": {
		examples: []string{
			"gatehouse apps add crm --tenant acme",
			"gatehouse apps rotate crm",
			"gatehouse apps list --json",
		},
		exits: []exitDoc{{0, "done"}, {1, "refused (the application exists, or there is no such application)"}, {2, "bad usage"}},
	},
	"approve": {
		examples: []string{
			"gatehouse approve list --state pending",
			"gatehouse approve show ap_01m8n7f2...",
			"gatehouse approve approve ap_01m8n7f2... --key backend.key --approver rita --role finance",
		},
		exits: []exitDoc{{0, "done (for list: whatever it lists, even nothing)"}, {1, "the broker refused it (not allowed, already decided, no such request) or no broker answered"},
			{2, "bad usage, or a key that cannot be read"}},
	},
	"verify": {
		examples: []string{
			"gatehouse verify                                   # ./.gatehouse/journal",
			"gatehouse verify /copy/of/journal --json",
			"gatehouse verify --trusted-key log.pub --require-signatures --log-key log.pub --witness-key wit.pub --witness http://witness:8081",
		},
		exits: []exitDoc{{0, "intact"}, {1, "tampering found"}, {2, "unusable input (not a journal, a file that is not a regular file) or bad usage"},
			{130, "interrupted (SIGINT or SIGTERM)"}},
	},
	"checkpoint": {
		examples: []string{
			"gatehouse checkpoint --signing-key-file log.key --log-origin acme.example/gatehouse",
			"gatehouse checkpoint --signing-key-file log.key --log-origin acme.example/gatehouse --witness http://witness:8081 --json",
		},
		exits: []exitDoc{{0, "signed (and cosigned by the witnesses that answered)"}, {1, "a writer holds the journal, or signing failed"}, {2, "bad usage, no key, not a journal"}},
	},
	"witness": {
		examples: []string{
			"gatehouse witness --name witness.example --witness-key-file wit.key --log log.pub --http :8081",
			"gatehouse witness --name witness.example --witness-key-file wit.key --print-key",
		},
		exits: []exitDoc{{0, "stopped cleanly, or printed its key"}, {1, "it stopped serving"}, {2, "bad flags, an unusable key, the address taken"}},
	},
	"keygen": {
		examples: []string{
			"gatehouse keygen --out backend.key                                   # approvals backend: backend.key, backend.pub",
			"gatehouse keygen --out log.key --log-origin acme.example/gatehouse   # journal signing: log.key, log.pub",
			"gatehouse keygen --out wit.key --witness-name witness.example        # a witness: wit.key, wit.pub",
		},
		exits: []exitDoc{{0, "written"}, {2, "bad usage, or a file already there"}},
	},
	"policy": {
		examples: []string{
			"gatehouse policy review",
			"gatehouse policy review /copy/of/journal --json",
		},
		exits: []exitDoc{{0, "nothing strict mode would refuse"}, {1, "findings listed"}, {2, "unusable input or bad usage"}},
	},
	"users": {
		examples: []string{
			"gatehouse users add rita --role reviewer",
			"echo \"$PW\" | gatehouse users add olga --role operator --password-stdin",
			"gatehouse users list --json",
		},
		exits: []exitDoc{{0, "done"}, {1, "refused (the user exists, or there is no such user)"}, {2, "bad usage"}},
	},
	"evidence": {
		examples: []string{
			"gatehouse evidence acme/ada",
			"gatehouse evidence acme/ --export acme-ev/",
			"gatehouse evidence acme/ada --erase --yes",
		},
		exits: []exitDoc{{0, "done (the journal verifies)"}, {1, "the journal has findings, or does not match its latest checkpoint (no export is made)"},
			{2, "bad usage, unusable input, or --erase without --yes"}},
	},
	"replay": {
		examples: []string{
			"gatehouse replay",
			"gatehouse replay .gatehouse/journal r_01m8n75ye327hsa7apgb8fqfxn",
			"gatehouse replay --policy candidate.yaml --json",
		},
		exits: []exitDoc{{0, "every decision reproduced (what-if: none decided differently)"}, {1, "a divergence, a change, or a run that cannot be replayed"},
			{2, "bad usage or unusable input"}},
	},
	"status": {
		examples: []string{
			"gatehouse status",
			"gatehouse status --json",
			"GATEHOUSE_SYSTEM_PASSWORD=... gatehouse status --nats-url nats://nats-1:4222 --creds broker.nk --system-user sys",
		},
		exits: []exitDoc{{0, "all is well"}, {1, "findings (listed: no broker answering, a policy that cannot be read, no writer, a stream without a leader, ...)"},
			{2, "NATS cannot be reached, or bad usage"}},
	},
	"bench": {
		examples: []string{
			"gatehouse bench --agents 8 --duration 3s --bare",
			"gatehouse bench --agents 16 --requests 1000 --json",
		},
		exits: []exitDoc{{0, "it ran and at least one decision was recorded"}, {1, "none was"}, {2, "bad usage"}},
	},
	"sandbox": {
		examples: []string{
			"gatehouse sandbox check",
			"gatehouse sandbox check --all --json",
			"gatehouse sandbox check --tiers landlock",
		},
		exits: []exitDoc{{0, "a confined tier works"}, {1, "only \"unconfined\" is left"}, {2, "bad usage"}},
	},
	"policy check": {
		examples: []string{
			"gatehouse policy check --policy rules.yaml",
			"gatehouse policy check --policy rules.yaml --providers providers.yaml --grounding grounding.yaml --json",
		},
		exits: []exitDoc{{0, "no problems"}, {1, "problems listed"}, {2, "bad usage"}},
	},
	"mcp": {
		examples: []string{
			"gatehouse mcp --run r_01m8n75ye327hsa7apgb8fqfxn --agent invoice-bot      # an MCP client launches this",
			"gatehouse mcp token invoice-bot                                          # a bearer token for serve --mcp-http",
			"gatehouse mcp upstream show files --json",
		},
		exits: []exitDoc{{0, "the client closed the session (or the token was made)"}, {1, "Gatehouse could not be reached; mcp token: the agent is not registered"}, {2, "bad usage"}},
	},
	"mcp upstream": {
		examples: []string{
			"gatehouse mcp upstream list",
			"gatehouse mcp upstream show files",
			"gatehouse mcp upstream accept files --tool read_file --note \"reviewed by rita\"",
		},
		exits: []exitDoc{{0, "done (show: nothing changed)"}, {1, "show: changes wait for review; show or accept: the server has no pin; accept: nothing to accept"}, {2, "bad usage"}},
	},
	"sinks": {
		examples: []string{
			"gatehouse sinks                  # every sink's actions and params",
			"gatehouse sinks memory.put",
			"gatehouse sinks code --json      # with the params' JSON Schema",
		},
		exits: []exitDoc{{0, "listed"}, {2, "no such sink or action, or bad usage"}},
	},
	"contract": {
		examples: []string{
			"gatehouse contract read pay.py",
			"gatehouse contract read pay.py --files helpers.py --entry main --json",
			"cat pay.py | gatehouse contract read -",
		},
		exits: []exitDoc{{0, "the contract is verified"}, {1, "not verified (each reason with its line)"}, {2, "bad usage, a file that cannot be read"}},
	},
	"version": {
		examples: []string{"gatehouse version", "gatehouse version --json"},
		exits:    []exitDoc{{0, "printed"}},
	},
}
