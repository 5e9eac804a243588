package broker

import (
	"errors"
	"testing"
	"time"
)

func TestDecodePeerNext(t *testing.T) {
	for body, want := range map[string]int64{"": 0, `{}`: 0, `{"wait_ms":0}`: 0, `{"wait_ms":10000}`: 10000} {
		r, err := DecodePeerNext([]byte(body))
		if err != nil || r.WaitMS != want {
			t.Errorf("%q: %+v %v", body, r, err)
		}
	}
	for _, body := range []string{`{"wait_ms":-1}`, `{"wait_ms":10001}`, `{"wait_ms":9223372036854775807}`, `{"agent":"alice"}`, `{"consumer":"peer_alice"}`, `[]`, `{"wait_ms":1}x`} {
		if _, err := DecodePeerNext([]byte(body)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: err = %v, want ErrBadRequest", body, err)
		}
	}
}

// FuzzDecodePeerNext: whatever it accepts waits 0 to MaxPeerWait.
func FuzzDecodePeerNext(f *testing.F) {
	f.Add([]byte(`{"wait_ms":5000}`))
	f.Add([]byte(`{"wait_ms":-5}`))
	f.Add([]byte(`{"agent":"bob"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodePeerNext(data)
		if err != nil {
			return
		}
		if d := time.Duration(r.WaitMS) * time.Millisecond; r.WaitMS < 0 || d > MaxPeerWait || d < 0 {
			t.Fatalf("accepted a wait of %d ms", r.WaitMS)
		}
	})
}

// Each agent has at most maxPeerWaiters waiting requests; others are not
// held up by one that has them all.
func TestPeerWaitersBoundEachAgent(t *testing.T) {
	var w peerWaiters
	for i := 0; i < maxPeerWaiters; i++ {
		if !w.acquire("bob") {
			t.Fatalf("bob's request %d refused", i+1)
		}
	}
	if w.acquire("bob") {
		t.Fatal("bob got more than the bound")
	}
	if !w.acquire("alice") {
		t.Fatal("alice was held up by bob's requests")
	}
	w.release("bob")
	if !w.acquire("bob") {
		t.Fatal("a released slot was not given again")
	}
	for i := 0; i < maxPeerWaiters; i++ {
		w.release("bob")
	}
	w.release("alice")
	if len(w.n) != 0 {
		t.Fatalf("counts left behind: %v", w.n)
	}
}
