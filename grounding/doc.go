// Package grounding checks that the values a provider call sends come from
// records the broker itself read earlier in the same workflow.
//
// A deployment names, for operations such as a payment, which request
// fields must match which fields of which records. The model still picks
// the call; it does not get to pick those values. The broker runs Check
// on the call exactly as it is about to leave and puts the Result in
// policy.Effect.Grounding; policy.Decide refuses a call with failures as
// ungrounded. Check takes its records through the Records interface and
// the time as a value: this package does no I/O of its own beyond Load,
// and a *Rules is immutable and safe for concurrent use.
//
// # Rules file
//
// JSON or YAML with one top-level key, grounding, holding a list of rules
// ("grounding: []" for none). Any other key, anywhere, is an error, as are
// YAML aliases and merge keys and a key written twice.
//
//	grounding:
//	  - name: supplier-payment
//	    match: {provider: erp, method: POST, path: /payments}
//	    selectors_from: [input]   # optional
//	    fresh: reread             # optional
//	    max_age_seconds: 300      # optional
//	    bind:
//	      - name: invoice
//	        read: {provider: erp, path: "/invoices/{id}"}
//	        where: {id: input.invoice}
//	      - name: supplier
//	        read: {provider: erp, path: "/suppliers/{id}"}
//	        where: {id: invoice.supplier_id}
//	    require:
//	      - {field: request.json.iban, equals: supplier.iban, as: iban}
//	      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
//	      - {field: request.json.currency, one_of: "invoice.currencies[*]", as: exact}
//	      - {field: request.json.invoice, equals: input.invoice, as: id}
//	    other_fields: deny
//
// match needs provider; method (any case) and path are optional. Each is
// one value or a list, matched if any element fits. A match path starts
// with "/"; each segment is "{name}" (exactly one non-empty segment, whose
// value is request.path.name), "**" (any number of segments) or a
// path.Match glob such as "*" or "inv-*". The first rule whose match fits
// a call is the one checked; later rules are not tried.
//
// Paths (match and read) are the paths as sent, the provider's base path
// included ("/api/payments" for base_url https://erp.example.com/api),
// and they are matched against the canonical call the provider sink
// sends: every spelling of an operation the sink accepts is one path here
// (see the provider sink's documentation). Rules.Resolve, which the sink
// runs when rules are loaded, binds each rule to the catalogue's
// operations: a match path, method or provider that fits no declared
// operation, and a read that no integration declares as a GET, are load
// errors naming the file, the rule, the part and what to write.
//
// bind follows records in order. read names the provider and a path
// template whose "{name}" segments are whole segments; where fills every
// placeholder, and nothing else, from a field path. A where may name
// request fields, or (only with selectors_from: [input], and then only)
// input fields, or a binding bound earlier in the same rule: a later
// name, its own name or an unknown one is a load error, so there are no
// cycles. A selector value must be a string or a JSON number that is
// usable unchanged as one URL path segment (no "/", nothing needing
// escaping, not "." or ".."); anything else fails rather than being
// escaped, so the path looked up is exactly the path that was read.
//
// require lists checks: field (a request path) and exactly one relation,
// compared as the kind in as (iban, money, number, email, text, id,
// exact; see Compare):
//   - equals: a path into a binding, or an input path when the rule takes
//     selectors_from: [input].
//   - at_most, at_least: the same, or a literal decimal number
//     (at_least: 0.01), for money and number only.
//   - one_of: a literal list (strings, decimal numbers, true, false, null;
//     every entry readable as the kind), or a path ending in a list with
//     [*], e.g. invoice.currencies[*] or invoice.lines[*].iban.
//
// A request value never grounds another request value (equals:
// request.json.x is a load error).
//
// sign (money and number only) says what sign the value sent may have:
// positive (above zero), non-negative (not below zero, and not written
// with a minus sign: "-0" and "-0.00" are refused) or any. A requirement
// with at_most is non-negative unless it says otherwise, so an amount
// bounded from above cannot be a negative one; the others default to any.
//
// A list of the JSON body that a require or where indexes
// (request.json.payments[0].iban) may hold only elements the rule names a
// path into: a batch whose first payment is grounded fails when it carries
// a second, whatever other_fields says, rather than send the second
// unchecked.
//
// other_fields: deny refuses every request field no require field and no
// where names: every leaf of the JSON body (a scalar, an empty object or
// an empty list; naming a path names everything inside it), every form key,
// every query key and every match-path placeholder. A JSON key holding a
// character a path cannot name (".", "[", "]", white space, or the empty
// key) is never named, so it is refused under deny. The default,
// other_fields: allow, leaves unnamed fields alone.
//
// fresh: reread calls Input.Reread for each binding's filled path, in
// binding order, just before deciding, and uses (and cites) only that
// record; Records.Lookup is not consulted. max_age_seconds fails a binding
// whose record was read longer ago than that before Input.Now (measured
// from the newest read of it); a zero Now cannot be checked and fails.
// Both may be given.
//
// A rule needs a unique name, a match, and a require list or
// other_fields: deny.
//
// # Field paths
//
//	request.json.a.b[0].c   the JSON body
//	request.form.x          one key of a form body
//	request.query.x         one query parameter
//	request.path.x          the {x} segment of the match path (every
//	                        path the match lists must have it)
//	input.a.b               Input.Caller (selectors_from: [input] only)
//	<binding>.a.b           the record a binding selected
//
// Keys are separated by "." and may hold any character but ".", "[", "]"
// and white space; "[n]" indexes a list; "[*]" takes every element and is
// allowed only in one_of. Inside a YAML flow mapping ({...}) a path with
// brackets must be quoted: one_of: "invoice.currencies[*]".
//
// # Deciding a call
//
// Check finds the first rule whose match fits and then, without stopping
// at the first failure:
//
//  1. reads the request: the body by its content type (a body it cannot
//     read fails, when a rule applies), and fails each field sent twice:
//     a JSON object key at any depth written twice, also when the two are
//     written differently but equal after Unicode case folding and NFC,
//     "iban" and "IBAN", which a provider matching fields without regard
//     to case reads as one (strictjson.FoldKey); a form or query name with
//     two values; and each pair of top-level names (query names, form
//     names, the JSON body's keys) common servers read as one field or one
//     inside the other (paramnames.Clashes): equal up to case, a body field
//     and a query name (frameworks that merge query and body parameters
//     read one of the two), "iban" and "iban[]", "payment" and
//     "payment[iban]" or "payment.iban", " iban" and "iban" (PHP);
//  2. follows each binding in order: fills the read path from its where;
//     finds the records read at exactly that path (Records.Lookup, or one
//     Reread); fails when there is none, when records with different
//     digests answer it (the same response read twice is fine), when any
//     of them was read at or after the time this workflow first wrote to
//     that path (Records.WrittenAt; a record read after the run's own
//     write may show the run's change, so it grounds nothing, while one
//     read before the write is still a record the run did not shape), or
//     at or after the time it first sent the provider a change no rule
//     grounded (WrittenAt with AnyPath: such a change may show in any
//     record, under any path), or that the asking agent sent one in any
//     workflow (WrittenAt of AgentScope(agent) with AnyPath), when a money or number requirement compares
//     against it and it was read at or before the newest record of its
//     path that a carried-out call already relied on
//     (Records.SpentThrough; see Spend: the record that bounds an amount
//     grounds one call), when it is older than max_age_seconds, when its citation's digest is not
//     the digest of its body, or when its body is not one JSON value
//     strictjson reads without repeated keys (equal up to case and NFC
//     included). A binding that fails leaves every binding and
//     requirement that depends on it failing too;
//  3. checks each requirement: both sides present (JSON null counts as
//     missing) and readable as the kind, then the relation;
//  4. with other_fields: deny, fails every field nothing names.
//
// Result.Spends lists the records the money and number requirements
// compared against; the broker marks them spent when it carries the call
// out.
//
// Result.Failures names every failure, in that order, as a sentence
// without a trailing period. Failures name paths, bindings, rules and
// kinds, never a value sent or recorded (keys from a request or record are
// shown only when they are short plain names with few digits). What was
// sent is recorded only as a digest, in Result.Checks. Result.Citations
// cites each record a binding could rely on: the journal event of the
// response, the digest of its body and "provider:path".
//
// # Fail closed
//
// An error from Records or Reread fails the binding; it never panics.
// A nil *Rules applies to nothing. Parse and Load return an error (wrapping
// ErrInvalidRules, naming the file, and for a rule its index and name) for
// any file or rule they cannot read, including an unknown key, an unknown
// as or relation, at_most on a kind without order, a where naming a
// binding not bound before, a bind template placeholder without a where,
// and a bad match; there is no partly loaded file. The broker then runs
// with Unreadable(name, err), whose Check applies to every provider call
// (Applied true, Rule UnreadableRule) and fails it with the file's name and
// the problem. This is how "a rule that cannot be read refuses the calls it
// matches, and one whose match cannot be read refuses every call" is kept:
// with any rule unreadable every call is refused, which is the stricter of
// the two, because whether a broken rule's match would have fitted cannot
// be trusted and a half-applied file hides the mistake.
//
// # What to keep
//
// Keeps reports whether a provider response at a path could ground a rule
// (the path fits some binding's read template), so the broker stores only
// those; grounding costs nothing when no rule applies. The broker records
// its mutating calls to the same paths for WrittenAt, and, when no rule
// grounded one, marks the whole provider (AnyPath) for every provider
// ReadsFrom names, for the workflow and for the agent's scope.
package grounding
