package main

import (
	"context"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/witness"
)

// verifyIntegrity are verify's signature and checkpoint flags.
type verifyIntegrity struct {
	trusted     listFlag
	require     bool
	checkpoints listFlag
	logKey      string
	witnessKeys listFlag
	witnesses   listFlag
	quorum      int
}

func (v *verifyIntegrity) register(fs *flagSet) {
	fs.Var(&v.trusted, "trusted-key", "a trusted public key: the .pub file gatehouse keygen wrote, a file of keys (PEM, hex or base64, one a line) or the key itself; every signed event must verify under one of them; repeatable, so keys from before a rotation stay usable")
	fs.BoolVar(&v.require, "require-signatures", false, "report every unsigned event (unsigned-event)")
	fs.Var(&v.checkpoints, "checkpoint", "a signed checkpoint file to check the head log against (needs --log-key); repeatable")
	fs.StringVar(&v.logKey, "log-key", "", "the log's verifier key (origin+hash+base64), or the .pub file gatehouse keygen --log-origin wrote")
	fs.Var(&v.witnessKeys, "witness-key", "a witness's verifier key, or the .pub file gatehouse keygen --witness-name wrote; checkpoints must carry its cosignature; repeatable")
	fs.Var(&v.witnesses, "witness", "fetch the latest checkpoint this witness cosigned for the log (by URL) and check against it; repeatable")
	fs.IntVar(&v.quorum, "witness-quorum", 0, "how many of the --witness-key witnesses must have cosigned (default: all)")
}

// cpText is a checkpoint as read from a file or a witness.
type cpText struct {
	from string
	b    []byte
	err  error
}

// verify runs journal.Verify with the flags' keys and checkpoints and
// says what it checked (sc). A checkpoint that does not open (bad
// signature, missing cosignature) is a bad-checkpoint finding; flags that
// cannot be used are usage errors.
func (v *verifyIntegrity) verify(ctx context.Context, dir string, sc *verifyScope) (*journal.Report, error) {
	var opts journal.VerifyOptions
	if len(v.trusted) > 0 {
		keys, err := loadTrustedKeys(v.trusted...)
		if err != nil {
			return nil, usageError("--trusted-key: %v", err)
		}
		opts.Keys = keys
	}
	opts.RequireSignatures = v.require
	if v.require && opts.Keys == nil {
		return nil, usageError("--require-signatures needs --trusted-key")
	}
	var texts []cpText
	for _, f := range v.checkpoints {
		b, err := readUserFile(f, 64<<10)
		if err != nil {
			return nil, usageError("--checkpoint: %v", err)
		}
		texts = append(texts, cpText{f, b, nil})
	}
	if len(texts) == 0 && len(v.witnesses) == 0 {
		if v.logKey != "" || len(v.witnessKeys) > 0 {
			return nil, usageError("--log-key and --witness-key need --checkpoint or --witness")
		}
		sc.keys = opts.Keys
		return journal.Verify(dir, opts)
	}
	if v.logKey == "" {
		return nil, usageError("--checkpoint and --witness need --log-key")
	}
	keys, err := v.checkpointKeys()
	if err != nil {
		return nil, err
	}
	for _, u := range v.witnesses {
		b, err := (&witness.Client{URL: u}).Latest(ctx, keys.Log.Name())
		texts = append(texts, cpText{u, b, err})
	}
	var cps []*journal.Checkpoint
	var bad []journal.Finding
	for _, t := range texts {
		err := t.err
		var cp *journal.Checkpoint
		if err == nil {
			cp, err = journal.OpenCheckpoint(t.b, keys)
		}
		if err != nil {
			bad = append(bad, journal.Finding{Kind: journal.FindingBadCheckpoint, File: t.from, Detail: err.Error()})
			continue
		}
		cps = append(cps, cp)
		sc.checkpoints = append(sc.checkpoints, usedCheckpoint{from: t.from, cp: cp})
	}
	sc.keys = opts.Keys
	if len(cps) > 0 {
		opts.Checkpoint = cps[0]
	}
	rep, err := journal.Verify(dir, opts)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps[min(1, len(cps)):] {
		rep.Findings = append(rep.Findings, journal.CheckCheckpoint(dir, cp)...)
	}
	rep.Findings = append(rep.Findings, bad...)
	rep.OK = len(rep.Findings) == 0
	return rep, nil
}

// exportOptions are the keys verify --export checks an export with: the
// export carries its own checkpoint, so --checkpoint and --witness (which
// name the latest one, newer than an export's head log) do not apply.
func (v *verifyIntegrity) exportOptions() (evidence.VerifyOptions, error) {
	var opts evidence.VerifyOptions
	if len(v.checkpoints) > 0 || len(v.witnesses) > 0 {
		return opts, usageError("--export checks the checkpoint the export carries (proofs/checkpoint): give --log-key and --witness-key, not --checkpoint or --witness")
	}
	if len(v.trusted) > 0 {
		keys, err := loadTrustedKeys(v.trusted...)
		if err != nil {
			return opts, usageError("--trusted-key: %v", err)
		}
		opts.Keys = keys
	}
	opts.RequireSignatures = v.require
	if v.require && opts.Keys == nil {
		return opts, usageError("--require-signatures needs --trusted-key")
	}
	if v.logKey == "" {
		if len(v.witnessKeys) > 0 {
			return opts, usageError("--witness-key needs --log-key")
		}
		return opts, nil
	}
	keys, err := v.checkpointKeys()
	if err != nil {
		return opts, err
	}
	opts.Checkpoint = keys
	return opts, nil
}

func (v *verifyIntegrity) checkpointKeys() (journal.CheckpointKeys, error) {
	var k journal.CheckpointKeys
	lv, err := noteVerifierArg(v.logKey, false)
	if err != nil {
		return k, usageError("--log-key: %v", err)
	}
	k.Log, k.Quorum = lv, v.quorum
	for _, w := range v.witnessKeys {
		wv, err := noteVerifierArg(w, true)
		if err != nil {
			return k, usageError("--witness-key: %v", err)
		}
		k.Witnesses = append(k.Witnesses, wv)
	}
	if k.Quorum > len(k.Witnesses) {
		return k, usageError("--witness-quorum %d with %d --witness-key", k.Quorum, len(k.Witnesses))
	}
	return k, nil
}

// noteVerifierArg is the verifier a --log-key (witness false) or
// --witness-key names: the key, or a .pub file keygen wrote.
func noteVerifierArg(arg string, witness bool) (note.Verifier, error) {
	text, err := verifierKeyArg(arg, witness)
	if err != nil {
		return nil, err
	}
	return journal.NewNoteVerifier(text)
}
