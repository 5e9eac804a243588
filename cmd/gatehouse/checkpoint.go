package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/witness"
	"github.com/gatehouse/gatehouse/web"
)

// integrityFlags are the signing and checkpoint flags serve, writer and
// checkpoint share.
type integrityFlags struct {
	keyFile     string
	origin      string
	interval    time.Duration
	witnesses   listFlag
	witnessKeys listFlag
	previous    listFlag
}

func (f *integrityFlags) register(fs *flagSet) {
	fs.stringVar(&f.keyFile, "signing-key-file", "", "Ed25519 seed (hex or base64, mode 0600) that signs every journal event and checkpoint; $GATEHOUSE_SIGNING_KEY holds the seed itself when no file is given (prefer the file)")
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	fs.stringVar(&f.origin, "log-origin", host+"/gatehouse", "the log's name: the first line of every checkpoint and the name of its key")
	fs.Var(&f.witnesses, "witness", "a witness (gatehouse witness) to cosign each checkpoint, by URL; repeatable")
	fs.Var(&f.witnessKeys, "witness-key", "a witness's verifier key (or a file holding it): cosignatures that do not verify under one are not kept; repeatable")
	fs.Var(&f.previous, "previous-key", "a file of public keys this deployment signed with before a rotation, published in did.json; repeatable")
	f.interval = 10 * time.Second
	fs.DurationVar(&f.interval, "checkpoint-interval", f.interval, "sign a checkpoint this often when the head log grew")
}

// signingKey loads the key. A bad key is logged loudly and gives nil:
// events are then written unsigned, never signed with something else.
func (f *integrityFlags) signingKey(env *cliEnv, log *slog.Logger) *journal.SigningKey {
	k, err := journal.LoadSigningKey(f.keyFile, env.getenv("GATEHOUSE_SIGNING_KEY"), log)
	if err != nil {
		log.Error("SIGNING KEY UNUSABLE: journal events are written UNSIGNED and no checkpoint is signed until it is fixed", "err", err)
		return nil
	}
	if k == nil {
		log.Info("journal signing is off (no --signing-key-file or $GATEHOUSE_SIGNING_KEY)")
		return nil
	}
	log.Info("journal events and checkpoints are signed", "key", k, "log_origin", f.origin)
	return k
}

// witnessVerifiers parses --witness-key; a bad key is logged and skipped.
func (f *integrityFlags) witnessVerifiers(log *slog.Logger) []note.Verifier {
	var out []note.Verifier
	for _, k := range f.witnessKeys {
		v, err := journal.NewNoteVerifier(keyOrFile(k))
		if err != nil {
			log.Error("--witness-key unusable; ignored", "key", k, "err", err)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (f *integrityFlags) cosigners() []journal.Cosigner {
	var out []journal.Cosigner
	for _, u := range f.witnesses {
		out = append(out, &witness.Client{URL: u})
	}
	return out
}

// web returns what the web server publishes: the audit key in did.json
// and the previous keys (the caller sets the checkpoints).
func (f *integrityFlags) web(k *journal.SigningKey, log *slog.Logger) *web.Integrity {
	if k == nil {
		return nil
	}
	in := &web.Integrity{AuditKey: k.Public()}
	for _, file := range f.previous {
		keys, err := journal.LoadTrustedKeys(file)
		if err != nil {
			log.Error("--previous-key unreadable; not published", "file", file, "err", err)
			continue
		}
		for _, id := range keys.IDs() {
			pub, _ := keys.Key(id)
			in.PreviousKeys = append(in.PreviousKeys, pub)
		}
	}
	return in
}

const checkpointUsage = `Usage: gatehouse checkpoint [--data-dir DIR | --journal-dir DIR] --signing-key-file FILE [--log-origin NAME] [--witness URL]... [--json]

Signs a checkpoint of the journal's head log now (a C2SP signed note: log
origin, number of head entries, RFC 6962 root hash), submits it to each
--witness for a cosignature, stores it in JOURNAL/checkpoints/latest and
prints it. It takes the journal's writer lock: while 'gatehouse serve'
runs with a writer, ask it instead: curl -X POST http://ADDR/checkpoint.

Exit status: 0 signed, 1 failed, 2 usage.
`

func cmdCheckpoint(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir, dir string
		f            integrityFlags
	)
	fs := newEnvFlags(env, "checkpoint", checkpointUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal to checkpoint")
	fs.stringVar(&dir, "journal-dir", "", "the journal directory (default DATA_DIR/journal)")
	f.register(fs)
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if dir == "" {
		dir = filepath.Join(dataDir, "journal")
	}
	log := slog.New(slog.NewTextHandler(env.stderr, nil))
	k, err := journal.LoadSigningKey(f.keyFile, env.getenv("GATEHOUSE_SIGNING_KEY"), log)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if k == nil {
		return usageError("checkpoint needs --signing-key-file or $GATEHOUSE_SIGNING_KEY")
	}
	if _, err := os.Stat(filepath.Join(dir, "head.jsonl")); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s is not a journal: %w", dir, err)}
	}
	w, err := journal.Open(dir, journal.WriterOptions{Logger: log})
	if errors.Is(err, journal.ErrLocked) {
		addr := "http://ADDR"
		if ep, eerr := readEndpoints(dataDir); eerr == nil && ep.HTTP != "" {
			addr = ep.HTTP
		}
		return &exitError{code: exitFindings, err: fmt.Errorf("%w: a writer is running; ask it to sign one: curl -X POST %s/checkpoint "+
			"(once the dashboard has users, as an operator signed in there, or GET /checkpoint?fresh=1 in the browser)", err, addr)}
	}
	if err != nil {
		return err
	}
	defer w.Close()
	c, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: f.origin, Key: k, Witnesses: f.cosigners(), WitnessKeys: f.witnessVerifiers(log), Logger: log})
	if err != nil {
		return err
	}
	b, err := c.Checkpoint(ctx)
	if err != nil {
		return err
	}
	fmt.Fprint(env.stdout, string(b))
	fmt.Fprintf(env.stderr, "log key: %s\n", c.VerifierKey())
	return nil
}

const keygenUsage = `Usage: gatehouse keygen --out FILE [--log-origin NAME] [--witness-name NAME]

Makes a new Ed25519 key: writes its seed (hex) to FILE with mode 0600 (the
file must not exist) and prints its key id, its public key (hex, for
--trusted-key files) and its signed-note verifier key: a log's for
--log-origin, a witness's (cosignature/v1) for --witness-name.
`

func cmdKeygen(ctx context.Context, env *cliEnv, args []string) error {
	var out, origin, witnessName string
	fs := newEnvFlags(env, "keygen", keygenUsage)
	fs.StringVar(&out, "out", "", "file to write the seed to (required)")
	fs.StringVar(&origin, "log-origin", "", "print the log verifier key for this origin")
	fs.StringVar(&witnessName, "witness-name", "", "print the witness verifier key for this name")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if out == "" {
		return usageError("keygen needs --out FILE")
	}
	k, err := journal.WriteSigningKey(out, rand.Reader)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	printKey(env, k.Public(), origin, witnessName)
	return nil
}

func printKey(env *cliEnv, pub ed25519.PublicKey, origin, witnessName string) {
	fmt.Fprintf(env.stdout, "key id      %s\npublic key  %s\n", journal.KeyID(pub), hex.EncodeToString(pub))
	if origin != "" {
		fmt.Fprintf(env.stdout, "log key     %s\n", journal.VerifierKey(origin, pub, false))
	}
	if witnessName != "" {
		fmt.Fprintf(env.stdout, "witness key %s\n", journal.VerifierKey(witnessName, pub, true))
	}
}

// checkpointFollower signs checkpoints for a writer that may be reopened
// (the writer command's loop): each opened Writer gets a new Checkpointer
// (attach), and one goroutine (run, owned by the caller) refreshes the
// current one every interval.
type checkpointFollower struct {
	f   *integrityFlags
	key *journal.SigningKey
	log *slog.Logger
	cur atomic.Pointer[journal.Checkpointer]
}

// attach gives w a Checkpointer; without a key it does nothing. A
// failure is logged: events are still written.
func (c *checkpointFollower) attach(w *journal.Writer) {
	if c.key == nil {
		return
	}
	cp, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: c.f.origin, Key: c.key, Interval: c.f.interval, Witnesses: c.f.cosigners(), WitnessKeys: c.f.witnessVerifiers(c.log), Logger: c.log})
	if err != nil {
		c.log.Error("CHECKPOINTS OFF for this writer: the checkpointer could not start", "err", err)
		c.cur.Store(nil)
		return
	}
	c.cur.Store(cp)
}

func (c *checkpointFollower) run(ctx context.Context) {
	if c.key == nil {
		return
	}
	t := time.NewTicker(c.f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cp := c.cur.Load(); cp != nil {
			if _, err := cp.Refresh(ctx); err != nil && !errors.Is(err, journal.ErrEmptyLog) && ctx.Err() == nil {
				c.log.Error("journal: checkpoint failed", "err", err)
			}
		}
	}
}
