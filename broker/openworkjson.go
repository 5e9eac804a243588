package broker

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// checkOpenWorkJSON refuses an application's work.open request, its input
// included, that parsers could read in different ways: anything strictjson
// refuses (a key written twice, invalid UTF-8, an unpaired surrogate
// escape, deep nesting), and two keys of one object equal after case
// folding and NFC (encoding/json itself matches "Tenant" to tenant, and
// keeps the last). Grounding takes selectors from the input
// (selectors_from: [input]), so if "the last key wins" picked another
// invoice than the application meant, the run would be pinned to a record
// nobody chose. Errors wrap ErrBadRequest and name the path of the key,
// never a value.
func checkOpenWorkJSON(raw json.RawMessage) error {
	dups, err := strictjson.Scan(raw, strictjson.Options{Fold: true})
	if err != nil {
		for _, e := range []error{strictjson.ErrInvalidUTF8, strictjson.ErrSurrogate, strictjson.ErrTooDeep} {
			if errors.Is(err, e) {
				return fmt.Errorf("%w: work.open: %v", ErrBadRequest, e)
			}
		}
		return fmt.Errorf("%w: the request is not one JSON object", ErrBadRequest)
	}
	if len(dups) > 0 {
		d := dups[0]
		how := "twice"
		if d.Folded {
			how = "twice, as keys that differ only in case or Unicode form"
		}
		return fmt.Errorf("%w: %s is written %s; write each key once", ErrBadRequest, clip(strictjson.PathText(d.Path, "work.open")), how)
	}
	return nil
}
