package broker

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// ApprovalAPI is what the approval endpoints serve. Implementations:
// *approval.Service.
type ApprovalAPI interface {
	List(ctx context.Context, f approval.Filter) ([]approval.Request, error)
	Get(ctx context.Context, id string) (*approval.Request, error)
	DecideSigned(ctx context.Context, sa approval.SignedAssertion) (*approval.Request, error)
}

var _ ApprovalAPI = (*approval.Service)(nil)

// ApprovalReply answers the approval endpoints.
type ApprovalReply struct {
	Request  *approval.Request  `json:"request,omitempty"`
	Requests []approval.Request `json:"requests,omitempty"`
	Error    *ErrorBody         `json:"error,omitempty"`
}

// ApprovalQuery is the body of ApprovalList and ApprovalGet.
type ApprovalQuery struct {
	ID     string           `json:"id,omitempty"`
	States []approval.State `json:"states,omitempty"`
	Tenant string           `json:"tenant,omitempty"`
	Limit  int              `json:"limit,omitempty"`
}

// maxApprovalLimit bounds ApprovalQuery.Limit.
const maxApprovalLimit = 10000

// DecodeApprovalQuery decodes the body of ApprovalList (empty is the whole
// queue) and ApprovalGet (get: an id is required). It refuses, with
// ErrBadRequest, unknown fields, an id that cannot be a request id, an
// unknown state and a negative or huge limit: the body comes from NATS and
// is not trusted.
func DecodeApprovalQuery(data []byte, get bool) (ApprovalQuery, error) {
	var q ApprovalQuery
	if len(data) > 0 || get {
		if err := decodeStrict(data, &q); err != nil {
			return ApprovalQuery{}, err
		}
	}
	switch {
	case get && q.ID == "":
		return ApprovalQuery{}, fmt.Errorf("%w: id is required", ErrBadRequest)
	case q.ID != "" && !approval.ValidID(q.ID):
		return ApprovalQuery{}, fmt.Errorf("%w: %q is not an approval id", ErrBadRequest, clip(q.ID))
	case q.Limit < 0 || q.Limit > maxApprovalLimit:
		return ApprovalQuery{}, fmt.Errorf("%w: limit must be 0..%d", ErrBadRequest, maxApprovalLimit)
	case len(q.Tenant) > 256:
		return ApprovalQuery{}, fmt.Errorf("%w: tenant is too long", ErrBadRequest)
	}
	for _, st := range q.States {
		if !st.Known() {
			return ApprovalQuery{}, fmt.Errorf("%w: unknown state %q", ErrBadRequest, clip(string(st)))
		}
	}
	return q, nil
}

// DecodeSignedAssertion decodes the body of ApprovalDecide. It checks the
// shape only (ErrBadRequest); the signature is checked by
// approval.Service.DecideSigned against the configured key.
func DecodeSignedAssertion(data []byte) (approval.SignedAssertion, error) {
	var sa approval.SignedAssertion
	if err := decodeStrict(data, &sa); err != nil {
		return approval.SignedAssertion{}, err
	}
	if !approval.ValidID(sa.Assertion.ID) {
		return approval.SignedAssertion{}, fmt.Errorf("%w: %q is not an approval id", ErrBadRequest, clip(sa.Assertion.ID))
	}
	if sa.Signature == "" {
		return approval.SignedAssertion{}, fmt.Errorf("%w: the assertion is not signed", ErrBadRequest)
	}
	return sa, nil
}

func (s *Service) addApprovals(add func(name, subj string, class subject.Class, h handler) error) error {
	api, ok := s.b.approvals.(ApprovalAPI)
	if !ok {
		return nil
	}
	// Approvals span tenants: an application bound to tenants may not use
	// them (admitApprovals).
	admitted := func(h handler) handler {
		return func(ctx context.Context, from Caller, r micro.Request) {
			if err := s.b.admitApprovals(from); err != nil {
				respond(r, &ApprovalReply{Error: errorBody(err)})
				return
			}
			h(ctx, from, r)
		}
	}
	if err := add("approval-decide", subject.AppEndpoint(subject.ApprovalDecideOp), subject.ClassApp, admitted(func(ctx context.Context, _ Caller, r micro.Request) {
		sa, err := DecodeSignedAssertion(r.Data())
		if err != nil {
			respond(r, &ApprovalReply{Error: errorBody(err)})
			return
		}
		req, err := api.DecideSigned(ctx, sa)
		if err != nil {
			respond(r, &ApprovalReply{Request: req, Error: errorBody(err)})
			return
		}
		respond(r, &ApprovalReply{Request: req})
	})); err != nil {
		return err
	}
	if err := add("approval-list", subject.AppEndpoint(subject.ApprovalListOp), subject.ClassApp, admitted(func(ctx context.Context, _ Caller, r micro.Request) {
		q, err := DecodeApprovalQuery(r.Data(), false)
		if err != nil {
			respond(r, &ApprovalReply{Error: errorBody(err)})
			return
		}
		rs, err := api.List(ctx, approval.Filter{States: q.States, Tenant: q.Tenant, Limit: q.Limit})
		if err != nil {
			respond(r, &ApprovalReply{Error: errorBody(err)})
			return
		}
		respond(r, &ApprovalReply{Requests: rs})
	})); err != nil {
		return err
	}
	return add("approval-get", subject.AppEndpoint(subject.ApprovalGetOp), subject.ClassApp, admitted(func(ctx context.Context, _ Caller, r micro.Request) {
		q, err := DecodeApprovalQuery(r.Data(), true)
		if err != nil {
			respond(r, &ApprovalReply{Error: errorBody(err)})
			return
		}
		req, err := api.Get(ctx, q.ID)
		if err != nil {
			respond(r, &ApprovalReply{Error: errorBody(err)})
			return
		}
		respond(r, &ApprovalReply{Request: req})
	}))
}
