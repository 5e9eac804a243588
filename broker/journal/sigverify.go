package journal

import (
	"bytes"
	"crypto/ed25519"
	"sync"
)

// Strict verification on every core: verify hands each signature to a
// pool of GOMAXPROCS goroutines (sigPool), whatever the runs they are in,
// so a journal of one long run verifies as fast as one of many. Each check
// is verifyChecked: the checks of R and S, then crypto/ed25519's
// cofactorless equation. Two things that look faster were measured or
// weighed and left out: decoding a trusted key's point once and doing the
// arithmetic with filippo.io/edwards25519 cost the same per signature as
// crypto/ed25519, which decodes the key every time but has the faster
// arithmetic (BenchmarkStrictVerify, the two alternating); and batch
// verification (one multi-scalar multiplication for many signatures)
// holds exactly when the cofactored equation holds for each, so it would
// accept a signature with a mixed-order R that the strict check
// (FORMAT.md section 4) refuses.

// verifyKey is a trusted public key, checked once by CheckPublicKey.
type verifyKey struct {
	pub ed25519.PublicKey
}

func newVerifyKey(pub ed25519.PublicKey) (*verifyKey, error) {
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	return &verifyKey{pub: bytes.Clone(pub)}, nil
}

func (k *verifyKey) verify(msg, sig []byte) error { return verifyChecked(k.pub, msg, sig) }

// sigPool verifies signatures on a fixed set of goroutines, for every run
// verifier of one Verify. Close stops them once every job is done.
type sigPool struct {
	jobs chan sigJobV
	wg   sync.WaitGroup
}

// sigJobV is one signature to check and where its finding goes.
type sigJobV struct {
	key *verifyKey
	msg []byte
	sig []byte
	bad func(err error) // called with the error when it does not verify
	wg  *sync.WaitGroup // Done when checked
}

func newSigPool(workers int) *sigPool {
	p := &sigPool{jobs: make(chan sigJobV, 4*workers)}
	for range workers {
		p.wg.Go(func() {
			for j := range p.jobs {
				if err := j.key.verify(j.msg, j.sig); err != nil {
					j.bad(err)
				}
				j.wg.Done()
			}
		})
	}
	return p
}

func (p *sigPool) submit(j sigJobV) {
	j.wg.Add(1)
	p.jobs <- j
}

func (p *sigPool) close() {
	close(p.jobs)
	p.wg.Wait()
}
