package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/witness"
)

const witnessUsage = `Usage: gatehouse witness --state-dir DIR --witness-key-file FILE --name NAME --log VKEY... [--http ADDR]

Runs a checkpoint witness, its own process with its own key, possibly on
another machine. For each log it knows (--log: the log's verifier key,
printed by 'gatehouse serve' and 'gatehouse keygen --log-origin') it keeps
the latest checkpoint it cosigned, and cosigns a newer one only with a
consistency proof from it (C2SP tlog-witness: POST /add-checkpoint). It
refuses a fork (another tree of a size it cosigned, or a proof that does
not verify) and a rollback, and records each in DIR/conflicts.jsonl.
GET /checkpoint?origin=O returns the latest cosigned checkpoint of log O,
for 'gatehouse verify --witness URL'. /healthz, /readyz (its state can
be read) and /metrics (Prometheus: checkpoints cosigned, refused by
reason, the latest cosigned size of each log) are on the same address.

--print-key prints the witness's verifier key (for --witness-key) and exits.
`

func cmdWitness(ctx context.Context, env *cliEnv, args []string) error {
	var (
		stateDir, keyFile, name, addr, logFormat, logLevel string
		logs                                               listFlag
		printKey                                           bool
	)
	fs := newEnvFlags(env, "witness", witnessUsage)
	fs.stringVar(&stateDir, "state-dir", ".gatehouse-witness", "where the witness keeps what it cosigned")
	fs.stringVar(&keyFile, "witness-key-file", "", "the witness's private key file (gatehouse keygen --out wit.key --witness-name NAME: wit.key, mode 0600); $GATEHOUSE_WITNESS_KEY holds the key itself when no file is given")
	fs.stringVar(&name, "name", "", "the witness's name, which names its key (required)")
	fs.Var(&logs, "log", "a log to witness: its verifier key (origin+hash+base64), the .pub file gatehouse keygen --log-origin wrote, or a file of verifier keys one a line; repeatable")
	fs.stringVar(&addr, "http", "127.0.0.1:8081", "address to serve the witness API on")
	fs.BoolVar(&printKey, "print-key", false, "print the witness's verifier key and exit")
	fs.stringVar(&logFormat, "log-format", "text", "text or json")
	fs.stringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	log, err := newLogger(env, logFormat, logLevel)
	if err != nil {
		return err
	}
	if name == "" {
		return usageError("witness needs --name")
	}
	k, err := loadSigningKey(keyFile, env.getenv("GATEHOUSE_WITNESS_KEY"), log)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if k == nil {
		return usageError("witness needs --witness-key-file or $GATEHOUSE_WITNESS_KEY")
	}
	if printKey {
		fmt.Fprintln(env.stdout, journal.VerifierKey(name, k.Public(), true))
		return nil
	}
	vkeys, err := readVerifierKeys(logs)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if len(vkeys) == 0 {
		return usageError("witness needs at least one --log")
	}
	w, err := witness.New(witness.Config{Name: name, Key: k, Logs: vkeys, Dir: stateDir, Logger: log})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--http %s: %w", addr, err)}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := &http.Server{Handler: w.OpsHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(env.stdout, "witness %s listening on http://%s\n  key %s\n  logs %d\n", name, ln.Addr(), w.VerifierKey(), len(vkeys))
	log.Info("witness running", "name", name, "addr", ln.Addr().String(), "logs", len(vkeys))
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readVerifierKeys takes each value as a log's verifier key, or as a file
// holding them (a .pub file keygen --log-origin wrote, or verifier keys
// one a line, '#' comments).
func readVerifierKeys(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		if k, ok := parseVKey(v); ok {
			if k.witness {
				return nil, fmt.Errorf("--log %s is a witness's verifier key, not a log's", clipArg(v))
			}
			out = append(out, k.text)
			continue
		}
		b, _, err := readKeyFile(v)
		if err != nil {
			return nil, fmt.Errorf("--log %q is neither a log's verifier key nor a readable file: %w", clipArg(v), err)
		}
		_, vkeys, err := parsePublicKeys(b)
		if err != nil {
			return nil, fmt.Errorf("--log %s: %w", v, err)
		}
		n := len(out)
		for _, k := range vkeys {
			if !k.witness {
				out = append(out, k.text)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("--log %s %w of a log: make the log's key with gatehouse keygen --log-origin ORIGIN, or pass the verifier key", v, errNoVerifierKey)
		}
	}
	return out, nil
}
