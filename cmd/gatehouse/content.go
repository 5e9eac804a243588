package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// envOr reads an unprefixed environment variable the reference names
// (JOURNAL_CAPTURE), else def.
func envOr(env *cliEnv, name, def string) string {
	if v := env.getenv(name); v != "" {
		return v
	}
	return def
}

// envInt is envOr for a number; a bad value keeps def (the flag's own
// GATEHOUSE_ variable and the command line still win).
func envInt(env *cliEnv, name string, def int) int {
	if n, err := strconv.Atoi(env.getenv(name)); err == nil {
		return n
	}
	return def
}

// openContent opens DATA_DIR/content for the capture mode, keeps the
// policy's and prov's grounding rules' sources in it so replay can load
// them by digest, and starts the
// eraser of unused content. The returned func stops the eraser and closes
// the store; the sink is nil when capture is off.
func openContent(ctx context.Context, js jetstream.JetStream, c *serveConfig, pol *policy.Policy, prov *provider.Sink, log *slog.Logger) (broker.ContentSink, func(), error) {
	mode, err := content.ParseMode(c.journalCapture)
	if err != nil {
		return nil, nil, usageError("--journal-capture: %v", err)
	}
	if c.journalContentDays < 0 {
		return nil, nil, usageError("--journal-content-days must be 0 or more")
	}
	if c.contentStore != "dir" && c.contentStore != "objectstore" {
		return nil, nil, usageError("--content-store must be dir or objectstore, not %q", c.contentStore)
	}
	if mode == content.ModeOff {
		return nil, func() {}, nil
	}
	var store *content.Store
	switch {
	case mode != content.ModeFull:
	case c.contentStore == "objectstore":
		if store, err = content.OpenObjectStore(ctx, js, content.ObjectStoreConfig{Replicas: c.replicas}); err != nil {
			return nil, nil, fmt.Errorf("content store: %w", err)
		}
	default:
		if store, err = content.Open(filepath.Join(c.dataDir, "content"), content.Options{}); err != nil {
			return nil, nil, fmt.Errorf("content store: %w", err)
		}
	}
	capt, err := content.NewCapturer(store, mode)
	if err != nil {
		return nil, nil, err
	}
	// The sources in force, by digest, so replay can load the policy and
	// run the checks of provider calls again.
	keepPolicySource(capt, c.policy, pol, log)
	if prov != nil {
		keepGroundingSource(capt, c.grounding, prov.Grounding(), log)
	}
	if store == nil {
		return capt, func() {}, nil
	}
	er := content.StartEraser(store, content.EraserConfig{MaxAge: time.Duration(c.journalContentDays) * 24 * time.Hour, Logger: log})
	return capt, func() { er.Close(); _ = store.Close() }, nil
}

// keepRecordContent makes every sink that keeps grounding records (the
// provider sink) keep their bodies in the content store too, when capture
// is full, so replay can run grounding checks again.
func keepRecordContent(sinks []broker.Sink, capture broker.ContentSink) {
	capt, ok := capture.(*content.Capturer)
	if !ok || capt.Mode() != content.ModeFull {
		return
	}
	for _, s := range sinks {
		if p, ok := s.(*provider.Sink); ok {
			p.KeepContent(capt)
		}
	}
}

// contentStoreFlags choose the content store an offline command (replay,
// evidence --erase) reads: the folder, or the NATS Object Store bucket
// serve --content-store objectstore keeps content in, reached with
// --nats-url/--nats-creds or, without them, through the endpoints file a
// running serve wrote in --data-dir (as 'gatehouse work' finds it).
type contentStoreFlags struct {
	kind, natsURL, creds string
}

func (f *contentStoreFlags) register(fs *flagSet) {
	fs.stringVar(&f.kind, "content-store", "dir", "where serve kept captured content: dir (a folder) or objectstore (the NATS Object Store bucket "+content.ContentBucket+")")
	fs.stringVar(&f.natsURL, "nats-url", "", "with --content-store objectstore: NATS URL (default: the one the local 'gatehouse serve' wrote in --data-dir)")
	fs.stringVar(&f.creds, "nats-creds", "", "with --content-store objectstore: nkey seed file (default: the local server's broker credentials)")
}

// open opens the chosen store; dir is the folder for --content-store dir.
// The returned func closes it (and the NATS connection). Errors are usage
// errors: the store named cannot be reached.
func (f *contentStoreFlags) open(ctx context.Context, dataDir, dir string) (*content.Store, func(), error) {
	switch f.kind {
	case "dir", "":
		s, err := content.Open(dir, content.Options{})
		if err != nil {
			return nil, nil, &exitError{code: exitUsage, err: err}
		}
		return s, func() { _ = s.Close() }, nil
	case "objectstore":
	default:
		return nil, nil, usageError("--content-store must be dir or objectstore, not %q", f.kind)
	}
	url, creds := f.natsURL, f.creds
	if url == "" {
		ep, err := readEndpoints(dataDir)
		if err != nil {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--content-store objectstore: %w", err)}
		}
		url = ep.NATSURL
		if creds == "" && ep.AppCreds != "" { // the embedded server: its broker credential reaches JetStream
			creds = embedded.CredsPath(filepath.Join(dataDir, "nats"), embedded.RoleBroker)
		}
	}
	nc, err := connectNATS(url, creds, "gatehouse-content")
	if err != nil {
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("connect to NATS at %s: %w", redactURL(url), err)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, &exitError{code: exitUsage, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := content.OpenObjectStore(ctx, js, content.ObjectStoreConfig{Existing: true})
	if err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = fmt.Errorf("%w (was serve started with --content-store objectstore and --journal-capture full?)", err)
		}
		return nil, nil, &exitError{code: exitUsage, err: err}
	}
	return s, func() { _ = s.Close(); nc.Close() }, nil
}

// erasureLog names where s logs its erasures, for messages.
func (f *contentStoreFlags) erasureLog(s *content.Store) string {
	if s.Dir() == "" {
		return "the object store bucket " + content.ContentBucket + " (erasures/)"
	}
	return filepath.Join(s.Dir(), "erasures.jsonl")
}
