package browser

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Pool)(nil)

const selectorField = "a Playwright selector for the element, such as text=Sign in, #email or css=button.primary"

// Actions implements broker.ActionDescriber. Every action acts on the
// run's current page (see pages and switch); every request a page makes
// that carries data out is decided on its own as a send.
func (p *Pool) Actions() []broker.Action {
	act := func(name, title, desc string, params any, fields map[string]string, mutates bool, example string) broker.Action {
		return broker.Action{Sink: policy.SinkBrowser, Name: name, Title: title, Description: desc, Params: params,
			Fields: fields, Mutates: mutates, Class: policy.EffectRead, System: string(policy.SinkBrowser),
			Examples: []json.RawMessage{json.RawMessage(example)}}
	}
	return []broker.Action{
		act(ActionGoto, "Open a web page", "Navigate this run's browser page to an address (decided as a navigation to "+
			"that host and path). The reply carries the page's final address, status and title.",
			gotoParams{}, map[string]string{"url": "an absolute http or https address"}, false, `{"url": "https://example.com/"}`),
		act(ActionClick, "Click an element", "Click an element of the current page. Any request the click makes that "+
			"carries data out of the page is decided on its own.", selectorParams{}, map[string]string{"selector": selectorField}, true,
			`{"selector": "text=More"}`),
		act(ActionFill, "Type into a field", "Fill a form field of the current page with text (the field is cleared first).",
			fillParams{}, map[string]string{"selector": selectorField, "value": "the text to type, at most 256 KiB"}, true,
			`{"selector": "#q", "value": "gatehouse"}`),
		act(ActionSelect, "Choose options", "Select options of a select element of the current page by their values.",
			selectParams{}, map[string]string{"selector": selectorField, "values": "the option values to select"}, true,
			`{"selector": "#country", "values": ["fr"]}`),
		act(ActionPress, "Press a key", "Press a key or chord on an element of the current page.",
			pressParams{}, map[string]string{"selector": selectorField, "key": `the key, such as "Enter" or "Control+A"`}, true,
			`{"selector": "#q", "key": "Enter"}`),
		act(ActionText, "Read an element's text", "Return the visible text of an element of the current page.",
			selectorParams{}, map[string]string{"selector": selectorField}, false, `{"selector": "h1"}`),
		act(ActionContent, "Read the page's HTML", "Return the current page's HTML, for reading what the page says "+
			"when text of one element is not enough.", nil, nil, false, `{}`),
		act(ActionScreenshot, "Take a screenshot", "Take a PNG screenshot of the current page. It is stored as an "+
			"artifact (its storing decided as an artifact publish) and the reply names it, or with inline it comes back "+
			"base64 in the reply.", screenshotParams{}, map[string]string{"inline": "true: return the PNG in the reply instead of storing it"},
			false, `{"inline": true}`),
		act(ActionPages, "List open pages", "List this run's pages by index: the one it started on and every popup opened since.",
			nil, nil, false, `{}`),
		act(ActionSwitch, "Switch page", "Make another of this run's pages the one later actions act on.",
			switchParams{}, map[string]string{"page": "the page's index, from pages or an action's opened"}, false, `{"page": 0}`),
		act(ActionClose, "Close the browser", "Close this run's browser context: its pages, cookies and storage.",
			nil, nil, true, `{}`),
	}
}
