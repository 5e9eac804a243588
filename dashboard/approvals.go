package dashboard

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/dashboard/reveal"
)

// Query is the filter as a query string (without "?"), leaving out
// defaults; set overrides one key ("page", "state", "sel", ...).
func (f Filter) Query(set ...string) string {
	q := url.Values{}
	add := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.State != "waiting" {
		add("state", f.State)
	}
	add("tenant", f.Tenant)
	add("rule", f.Rule)
	add("agent", f.Agent)
	add("person", f.Person)
	add("age", f.Age)
	add("q", f.Q)
	if f.Sort != "oldest" {
		add("sort", f.Sort)
	}
	if f.Page > 1 {
		q.Set("page", strconv.Itoa(f.Page))
	}
	for i := 0; i+1 < len(set); i += 2 {
		if set[i+1] == "" {
			q.Del(set[i])
		} else {
			q.Set(set[i], set[i+1])
		}
	}
	return q.Encode()
}

// Active reports whether any filter or search narrows the list.
func (f Filter) Active() bool {
	return f.Tenant != "" || f.Rule != "" || f.Agent != "" || f.Person != "" || f.Age != "" || f.Q != ""
}

func withQuery(path, q string) string {
	if q == "" {
		return path
	}
	return path + "?" + q
}

// summary is the action's arguments on one line, cut to max characters,
// every value shown by reveal's rule: for the list and the notice.
func summary(as []approval.Argument, max int) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(" ")
		}
		shown, kind, _ := reveal.Value(a.Value)
		if kind == "json" {
			shown = a.Value // canonical JSON: one line, keys sorted
		}
		b.WriteString(a.Name + "=" + shown)
	}
	return reveal.Short(b.String(), max)
}

// argShown is one argument as the pane shows it.
type argShown struct {
	Name       string
	Head, Rest string // the shown value, folded
	Kind       string // string, json, other
	Notes      []string
	Len        int // characters of the real value
}

func argOf(a approval.Argument) argShown {
	shown, kind, dup := reveal.Value(a.Value)
	s := argShown{Name: reveal.Line(a.Name), Kind: kind, Len: len([]rune(a.Value))}
	s.Head, s.Rest = reveal.Fold(shown, 12, 600)
	s.Notes = reveal.Notes(a.Name + " " + rawOf(a.Value))
	if dup != "" {
		s.Notes = append(s.Notes, "the key "+reveal.Line(dup)+" occurs twice in one object: programs may read either")
	}
	return s
}

// rawOf is a JSON string argument's text, else the value as written.
func rawOf(v string) string {
	var s string
	if strings.HasPrefix(v, `"`) && jsonUnquote(v, &s) == nil {
		return s
	}
	return v
}

func decidedWord(d *approval.Decision) string {
	if d.Approved {
		return "Approved"
	}
	return "Refused"
}

// why says, for a person, why h may not decide: which role or sign-in
// the rule needs, or that they asked for it.
func why(st approval.Standing, h Holder, verb string) string {
	switch {
	case st.OK:
		return ""
	case st.Requester:
		return "You asked for this action (you are its agent or the person it is for), so someone else must " + verb + " it."
	case st.NeedRoles != nil:
		held := "none of them"
		if len(h.Roles) > 0 {
			held = "you hold " + strings.Join(h.Roles, ", ")
		}
		s := "You cannot " + verb + " this: the rule needs one of the roles " + strings.Join(st.NeedRoles, ", ") + " (" + held + ")."
		if st.NeedAssurance != "" {
			s += " It also needs a sign-in of assurance " + st.NeedAssurance + "."
		}
		return s + " Ask someone who has it, or an admin to add it: gatehouse users add NAME --role " + st.NeedRoles[0] + "."
	case st.NeedAssurance != "":
		s := "You cannot " + verb + " this: the rule needs a sign-in of assurance " + st.NeedAssurance + ", and you signed in with " + orWord(h.Assurance, "less") + "."
		if h.TOTP {
			return s + " Sign out and sign in again with your authenticator code."
		}
		return s + " Enrol an authenticator (gatehouse users totp " + h.Name + "), then sign in again with its code."
	}
	return "You cannot " + verb + " this."
}

// lock is the list's short form of why: what is missing.
func lock(st approval.Standing) string {
	switch {
	case st.OK:
		return ""
	case st.Requester:
		return "yours"
	case st.NeedRoles != nil:
		return "needs " + strings.Join(st.NeedRoles, " or ")
	}
	return "needs " + st.NeedAssurance
}

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func stateTabs() []struct{ Key, Label string } {
	return []struct{ Key, Label string }{{"waiting", "Waiting"}, {"unknown", "Outcome unknown"}, {"decided", "Decided"}, {"all", "All"}}
}

func pageNumbers(q QueueView) []int {
	var out []int
	for p := 1; p <= q.Pages; p++ {
		if p == 1 || p == q.Pages || p >= q.Page-2 && p <= q.Page+2 {
			out = append(out, p)
		} else if len(out) > 0 && out[len(out)-1] != 0 {
			out = append(out, 0) // a gap
		}
	}
	return out
}

func sortOptions() []struct{ Key, Label string } {
	return []struct{ Key, Label string }{{"oldest", "Oldest first"}, {"newest", "Newest first"}, {"rule", "Rule"}, {"tenant", "Tenant and person"}}
}

func ageOptions() []struct{ Key, Label string } {
	return []struct{ Key, Label string }{{"", "Any age"}, {"1h", "Older than 1 hour"}, {"4h", "Older than 4 hours"}, {"24h", "Older than a day"}, {"7d", "Older than a week"}}
}

func lower(s string) string { return strings.ToLower(s) }

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func roleText(roles []string) string {
	if len(roles) == 0 {
		return "any reviewer"
	}
	return joinStrings(roles)
}

func activeFlag(f Filter) string {
	if f.Active() || f.Sort != "oldest" {
		return "yes"
	}
	return ""
}

// pageNote is ", page P of N" when the list has more than one page.
func pageNote(q QueueView) string {
	if q.Pages <= 1 {
		return ""
	}
	return ", page " + itoa(q.Page) + " of " + itoa(q.Pages)
}
