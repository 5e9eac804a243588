// Package web is Gatehouse's HTTP server (echo): the pages of package
// dashboard, static assets embedded in the binary (htmx and its SSE
// extension, vendored: see static/VERSIONS), health, readiness and
// Prometheus metrics. It listens on loopback by default.
//
// With Config.Users set, every page but /login, /setup, /static, /healthz,
// /readyz and /metrics needs a signed-in user, and each page a role
// (/api/status, which names the NATS URL and file paths, an operator:
// 401 without a session, 403 for other roles):
// approvals the reviewer role, policy review the operator role, evidence
// the auditor role (bound to one tenant: another tenant's pages and export
// answer 404), admins everything. Sessions are 32 random bytes in an
// HttpOnly, SameSite=Strict cookie, kept in Config.State (JetStream KV or
// Redis in serve, so they survive a restart and work across several
// dashboard processes) and expire after Config.SessionTTL, or at the next
// request once their user is removed or its roles or tenant change. Every
// POST carries a double-submit CSRF token (403 without it). Failed
// sign-ins slow further tries with a doubling wait per name at an address,
// per name and per address, never a lock (throttle.go). Passwords are
// stored as argon2id hashes (users.go); a user with a TOTP authenticator
// (totp.go) gives its code after the password, and that session has
// assurance mfa instead of password. Requests whose Host is not one this
// server answers to are refused (hosts.go, against DNS rebinding), bodies
// are capped at MaxBody, signed-in pages are never cached, and errors are
// pages for browsers. Without Config.Users only the public status page is
// served at /.
//
// # Choices where the issue was silent
//
//   - Sign-in state lives in a StateStore keyed by hashes, so a copy of
//     the store (a KV backup, a Redis dump) holds no usable session; the
//     values carry their own expiry, since a KV bucket's age limit is per
//     bucket. A store that cannot be read signs no one in.
//   - Throttling never locks: it makes the next try wait, doubling per
//     failure past an allowance, under three keys (name at address, name,
//     address) so one person's typos behind a shared proxy slow only them.
//   - The Host check accepts any IP literal and localhost (a rebinding
//     page can only ever send a name) and the names given in Config.Hosts;
//     the public verifier endpoints and health probes answer any Host.
//   - After sign-in, next may only name one of the dashboard's own pages:
//     an allow-list is simpler to trust than a list of forms to refuse.
//   - The approvals list is paged (50) and filtered on the server from
//     one List of the store; the live stream re-renders the page the
//     browser shows, for its filter, and names the changed requests so an
//     open pane refreshes itself (its reason field is preserved).
//   - Actions a user may not take are not rendered; the same
//     approval.StandingOf the engine applies decides what is shown, so the
//     page cannot offer what the engine would refuse.
//   - Errors are pages for browsers, text for the page script (which shows
//     it in the notice, and a 401 as the sign-in banner) and JSON on /api.
package web
