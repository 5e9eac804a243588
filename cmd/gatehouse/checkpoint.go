package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	fs.stringVar(&f.keyFile, "signing-key-file", "", "the private key file (gatehouse keygen --out log.key: log.key, mode 0600) that signs every journal event and checkpoint; $GATEHOUSE_SIGNING_KEY holds the key itself when no file is given (prefer the file)")
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	fs.stringVar(&f.origin, "log-origin", host+"/gatehouse", "the log's name: the first line of every checkpoint and the name of its key")
	fs.Var(&f.witnesses, "witness", "a witness (gatehouse witness) to cosign each checkpoint, by URL; repeatable")
	fs.Var(&f.witnessKeys, "witness-key", "a witness's verifier key, or its .pub file (gatehouse keygen --witness-name): cosignatures that do not verify under one are not kept; repeatable")
	fs.Var(&f.previous, "previous-key", "a public key this deployment signed with before a rotation (its .pub file, or a file of keys), published in did.json; repeatable")
	f.interval = 10 * time.Second
	fs.DurationVar(&f.interval, "checkpoint-interval", f.interval, "sign a checkpoint this often when the head log grew")
}

// signingKey loads the key. A bad key is logged loudly and gives nil:
// events are then written unsigned, never signed with something else.
func (f *integrityFlags) signingKey(env *cliEnv, log *slog.Logger) *journal.SigningKey {
	k, err := loadSigningKey(f.keyFile, env.getenv("GATEHOUSE_SIGNING_KEY"), log)
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
		text, err := verifierKeyArg(k, true)
		var v note.Verifier
		if err == nil {
			v, err = journal.NewNoteVerifier(text)
		}
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
		keys, err := loadTrustedKeys(file)
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
`

func cmdCheckpoint(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir, dir string
		f            integrityFlags
		asJSON       bool
	)
	fs := newEnvFlags(env, "checkpoint", checkpointUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal to checkpoint")
	fs.stringVar(&dir, "journal-dir", "", "the journal directory (default DATA_DIR/journal)")
	fs.BoolVar(&asJSON, "json", false, "print the checkpoint as JSON (origin, size, root hash, who signed it, the log's verifier key)")
	f.register(fs)
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if dir == "" {
		dir = filepath.Join(dataDir, "journal")
	}
	log := slog.New(slog.NewTextHandler(env.stderr, nil))
	k, err := loadSigningKey(f.keyFile, env.getenv("GATEHOUSE_SIGNING_KEY"), log)
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
			if !signsCheckpoints(ctx, addr) {
				return &exitError{code: exitFindings, err: fmt.Errorf("%w: the 'gatehouse serve' at %s writes this journal without a signing key, so it signs no checkpoints: "+
					"restart it with --signing-key-file (it then signs one every --checkpoint-interval and on curl -X POST %s/checkpoint), or stop it and run this again", err, addr, addr)}
			}
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
	if asJSON {
		return printJSON(env, checkpointJSON(b, c.VerifierKey(), filepath.Join(dir, "checkpoints", "latest")))
	}
	fmt.Fprint(env.stdout, string(b))
	fmt.Fprintf(env.stderr, "log key: %s\n", c.VerifierKey())
	return nil
}

const keygenUsage = `Usage: gatehouse keygen --out NAME.key [--log-origin ORIGIN] [--witness-name NAME] [--json]

Makes a new Ed25519 key for anything Gatehouse signs with: the journal
(events and checkpoints), a witness, or an approvals backend. It writes
the private key to NAME.key (PKCS#8 PEM, mode 0600) and the public key to
NAME.pub (PKIX PEM, then the key's verifier keys), neither of which may
exist, and prints the key id, the public key and which flag takes which
file. --log-origin adds the log's verifier key (for --log-key and witness
--log), --witness-name the witness's (for --witness-key). Every flag that
takes a key takes these files.
`

// keygenReport is what keygen prints with --json.
type keygenReport struct {
	PrivateKeyFile string     `json:"private_key_file"`
	PublicKeyFile  string     `json:"public_key_file"`
	KeyID          string     `json:"key_id"`
	PublicKey      string     `json:"public_key"` // hex
	LogKey         string     `json:"log_key,omitempty"`
	WitnessKey     string     `json:"witness_key,omitempty"`
	Uses           []keyUsage `json:"uses"`
}

// keyUsage is one flag that takes one of the files.
type keyUsage struct {
	For  string `json:"for"`  // journal, witness, approvals
	File string `json:"file"` // the private or the public file
	Flag string `json:"flag"` // as a user types it
}

func cmdKeygen(ctx context.Context, env *cliEnv, args []string) error {
	var out, origin, witnessName string
	var asJSON bool
	fs := newEnvFlags(env, "keygen", keygenUsage)
	fs.StringVar(&out, "out", "", "the private key file to write, NAME.key; the public key goes to NAME.pub (required)")
	fs.StringVar(&origin, "log-origin", "", "the journal's log origin: adds the log verifier key to NAME.pub")
	fs.StringVar(&witnessName, "witness-name", "", "the witness's name: adds the witness verifier key to NAME.pub")
	fs.BoolVar(&asJSON, "json", false, "print the key and its uses as JSON")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if out == "" {
		return usageHint("keygen", "keygen needs --out NAME.key")
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	pub := priv.Public().(ed25519.PublicKey)
	rep := keygenReport{PrivateKeyFile: out, PublicKeyFile: pubPathFor(out), KeyID: journal.KeyID(pub), PublicKey: hex.EncodeToString(pub)}
	var vkeys []string
	if origin != "" {
		rep.LogKey = journal.VerifierKey(origin, pub, false)
		vkeys = append(vkeys, rep.LogKey)
	}
	if witnessName != "" {
		rep.WitnessKey = journal.VerifierKey(witnessName, pub, true)
		vkeys = append(vkeys, rep.WitnessKey)
	}
	if err := writeKeyPair(rep.PrivateKeyFile, rep.PublicKeyFile, priv, vkeys); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	rep.Uses = keyUses(rep, origin, witnessName)
	if asJSON {
		return printJSON(env, rep)
	}
	fmt.Fprintf(env.stdout, "key id      %s\npublic key  %s\n", rep.KeyID, rep.PublicKey)
	if rep.LogKey != "" {
		fmt.Fprintf(env.stdout, "log key     %s\n", rep.LogKey)
	}
	if rep.WitnessKey != "" {
		fmt.Fprintf(env.stdout, "witness key %s\n", rep.WitnessKey)
	}
	fmt.Fprintf(env.stdout, "wrote %s (private key, mode 0600: keep it secret) and %s (public key)\nuse them as:\n", rep.PrivateKeyFile, rep.PublicKeyFile)
	width := 0
	for _, u := range rep.Uses {
		width = max(width, len(u.File))
	}
	last := ""
	for _, u := range rep.Uses {
		if u.For != last {
			fmt.Fprintf(env.stdout, "  %s:\n", map[string]string{"journal": "signing the journal", "witness": "a witness",
				"approvals": "an approvals backend"}[u.For])
			last = u.For
		}
		fmt.Fprintf(env.stdout, "    %-*s  %s\n", width, u.File, u.Flag)
	}
	return nil
}

// keyUses lists the flags that take the new key's files: for the purpose
// --log-origin or --witness-name names, or, without either, the two a
// plain key serves (signing the journal without checkpoints, an approvals
// backend).
func keyUses(r keygenReport, origin, witnessName string) []keyUsage {
	priv, pub := r.PrivateKeyFile, r.PublicKeyFile
	var u []keyUsage
	add := func(forWhat, file, flag string) { u = append(u, keyUsage{For: forWhat, File: file, Flag: flag}) }
	if origin != "" || witnessName == "" {
		sign := "gatehouse serve|writer|checkpoint --signing-key-file " + priv
		if origin != "" {
			sign += " --log-origin " + origin
		}
		add("journal", priv, sign)
		add("journal", pub, "gatehouse verify --trusted-key "+pub)
		if origin != "" {
			add("journal", pub, "gatehouse verify --log-key "+pub+" (with --checkpoint or --witness); verify --export DIR --log-key "+pub)
			add("journal", pub, "gatehouse witness --log "+pub)
		}
		add("journal", pub, "gatehouse serve --previous-key "+pub+" (once the journal signs with a newer key)")
	}
	if witnessName != "" {
		add("witness", priv, "gatehouse witness --name "+witnessName+" --witness-key-file "+priv)
		add("witness", pub, "gatehouse serve|writer|checkpoint --witness-key "+pub+"; gatehouse verify --witness-key "+pub)
	}
	if origin == "" && witnessName == "" {
		add("approvals", pub, "gatehouse serve --approval-key "+pub)
		add("approvals", priv, "gatehouse approve approve|refuse|reconcile ID --key "+priv+" ...")
	}
	return u
}

// checkpointReport is what checkpoint prints with --json.
type checkpointReport struct {
	Origin     string   `json:"origin"`
	Size       uint64   `json:"size"`
	RootHash   string   `json:"root_hash"` // base64, as in the note
	SignedBy   []string `json:"signed_by"` // the log's and each witness's key name
	LogKey     string   `json:"log_key"`
	File       string   `json:"file"`
	Checkpoint string   `json:"checkpoint"` // the signed note, as stored
}

func checkpointJSON(note []byte, logKey, file string) checkpointReport {
	r := checkpointReport{LogKey: logKey, File: file, Checkpoint: string(note), SignedBy: []string{}}
	body, sigs, _ := strings.Cut(string(note), "\n\n")
	lines := strings.Split(body, "\n")
	if len(lines) >= 3 {
		r.Origin, r.RootHash = lines[0], lines[2]
		_, _ = fmt.Sscan(lines[1], &r.Size)
	}
	for _, l := range strings.Split(sigs, "\n") {
		if rest, ok := strings.CutPrefix(l, "\u2014 "); ok {
			name, _, _ := strings.Cut(rest, " ")
			r.SignedBy = append(r.SignedBy, name)
		}
	}
	return r
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

// signsCheckpoints reports whether the Gatehouse at base (its web address)
// serves checkpoints: false only when it says it signs none (404 on
// /checkpoint/key); anything else, unreachable included, counts as yes,
// so the advice to ask it stays as it was.
func signsCheckpoints(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/checkpoint/key", nil)
	if err != nil {
		return true
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return true
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound
}
