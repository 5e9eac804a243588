package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Intent is a change written ahead of the store. The promise it keeps:
// the store never shows a change (approved, refused, reopened, settled,
// reconciled) whose journal event is not durable. A change goes in three
// steps:
//
//  1. compare-and-swap the intent onto the request (its state unchanged):
//     the one caller that wins is the only one that may make a change now,
//     so the first decision stands;
//  2. record the journal event under a stable id (Event) and wait for the
//     journal's acknowledgement;
//  3. compare-and-swap the request to Next, clearing the intent.
//
// A failure in step 2 takes the intent back (the change did not happen).
// A crash between the steps leaves the intent in the store; once it is
// older than the intent timeout, whoever touches the request next (Sweep
// does, routinely) records the event again and applies Next. Recording
// again is harmless: the journal writer keeps the first event with an id
// in a run and drops the rest, so the journal holds the change once.
type Intent struct {
	Event  string          // the journal event's id, stable for this change
	Type   journal.Type    // the event's type
	Effect string          // the event's effect
	Data   json.RawMessage // the event's data
	Next   json.RawMessage // the request once the change is applied, without the intent
	Time   time.Time
}

// errGone: the intent was applied or taken back by someone else.
var errGone = errors.New("approval: intent no longer in the store")

// eventID is the stable journal id of r's change number step.
func eventID(r *Request, step int) string { return fmt.Sprintf("ev_%s_%d", r.ID, step) }

// writeAhead makes the change f describes (f mutates the request to its
// next state and returns the event's effect and data) under the promise
// of Intent. busy is the sentinel returned while another change is in
// flight. It returns the request as changed, or the error of f, busy, the
// journal or the store.
func (s *Service) writeAhead(ctx context.Context, id string, typ journal.Type, busy error,
	f func(r *Request) (effect string, data any, err error)) (*Request, error) {
	if err := s.finishStale(ctx, id); err != nil {
		return nil, err
	}
	var in *Intent
	cur, err := s.change(ctx, id, func(r *Request) error {
		if r.Intent != nil {
			return fmt.Errorf("%w: %s has a change in progress (%s)", busy, r.ID, r.Intent.Type)
		}
		orig := *r
		effect, data, err := f(r)
		if err != nil {
			*r = orig
			return err
		}
		now := s.now().UTC()
		r.Step, r.Updated = orig.Step+1, now
		next, err := json.Marshal(r)
		if err != nil {
			*r = orig
			return err
		}
		raw, err := json.Marshal(data)
		if err != nil {
			*r = orig
			return err
		}
		*r = orig
		in = &Intent{Event: eventID(r, orig.Step+1), Type: typ, Effect: effect, Data: raw, Next: next, Time: now}
		r.Intent = in
		return nil
	})
	if err != nil {
		return cur, err
	}
	if err := s.recordIntent(ctx, cur, in); err != nil {
		// Not durable: the change did not happen. Take the intent back so
		// it can be tried again; if even that fails, the intent times out
		// and is finished (recorded, then applied) later.
		back, berr := s.change(ctx, id, func(r *Request) error {
			if r.Intent == nil || r.Intent.Event != in.Event {
				return errGone
			}
			r.Intent = nil
			return nil
		})
		if berr != nil && !errors.Is(berr, errGone) {
			s.log.Error("approval change not recorded and its intent not taken back; it will be finished later", "approval", id, "type", typ, "err", berr)
		}
		if back == nil {
			back = cur
		}
		return back, err
	}
	return s.apply(ctx, id, in.Event)
}

// recordIntent records in's event in r's run.
func (s *Service) recordIntent(ctx context.Context, r *Request, in *Intent) error {
	ev := &journal.Event{V: journal.Version, ID: in.Event, Run: r.Run, Type: in.Type, Time: in.Time, Effect: in.Effect, Data: in.Data}
	if err := s.journal.Record(ctx, ev); err != nil {
		return fmt.Errorf("record %s: %w", in.Type, err)
	}
	return nil
}

// apply replaces the request by the intent's Next. When someone else
// applied it already, it returns the request as it is.
func (s *Service) apply(ctx context.Context, id, event string) (*Request, error) {
	r, err := s.change(ctx, id, func(r *Request) error {
		if r.Intent == nil || r.Intent.Event != event {
			return errGone
		}
		var next Request
		if err := json.Unmarshal(r.Intent.Next, &next); err != nil {
			return fmt.Errorf("%w: request %s: intent: %v", ErrStore, r.ID, err)
		}
		*r = next
		r.Intent = nil
		return nil
	})
	if errors.Is(err, errGone) {
		return s.Get(ctx, id)
	}
	return r, err
}

// finishStale finishes the request's intent if it is older than the
// intent timeout: its writer died between the steps.
func (s *Service) finishStale(ctx context.Context, id string) error {
	r, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	return s.finishIntent(ctx, r)
}

func (s *Service) finishIntent(ctx context.Context, r *Request) error {
	in := r.Intent
	if in == nil || s.now().Sub(in.Time) < s.intentTimeout {
		return nil
	}
	if err := s.recordIntent(ctx, r, in); err != nil {
		return err
	}
	_, err := s.apply(ctx, r.ID, in.Event)
	if err == nil {
		s.log.Warn("finished an approval change its writer left half done", "approval", r.ID, "type", in.Type)
	}
	return err
}
