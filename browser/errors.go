package browser

import (
	"github.com/gatehouse/gatehouse/broker"
)

// Sentinel failures of the browser sink. Each is a broker.OutcomeError: the
// journal records its type, the agent reads its message (wrapped with the
// detail) in the reply.
var (
	// ErrUnavailable: the browser or its driver cannot start. The message
	// it is wrapped with names what is missing and the fix.
	ErrUnavailable = broker.NewOutcomeError("browser-unavailable", "the browser cannot start")
	// ErrNotBound: the pool was never bound to a broker (Bind), so the
	// requests its pages send could not be decided.
	ErrNotBound = broker.NewOutcomeError("browser-not-bound", "the browser pool is not bound to a broker")
	// ErrNoPage: an action that needs a page came before any goto.
	ErrNoPage = broker.NewOutcomeError("no-page", "no page is open for this run; goto a URL first")
	// ErrAction: Playwright could not carry out the action (no element
	// matched the selector, a timeout, a navigation error).
	ErrAction = broker.NewOutcomeError("browser-action-failed", "the browser action failed")
	// ErrTooLarge: the action's result does not fit in a reply.
	ErrTooLarge = broker.NewOutcomeError("too-large", "the result is larger than a reply can carry")
	// ErrRestarted: the browser went away (it crashed or was killed) since
	// the run's last action; the run's context, pages, cookies and storage
	// are gone. The next goto starts a new browser and context.
	ErrRestarted = broker.NewOutcomeError("browser-restarted", "the browser restarted and this run's pages, cookies and storage are gone; goto a URL to start again")
	// ErrNoArtifactStore: a screenshot was asked to be stored, but the pool
	// has no artifact store (Config.Artifacts); ask with {"inline": true}.
	ErrNoArtifactStore = broker.NewOutcomeError("no-artifact-store", `no artifact store is configured for screenshots; ask with {"inline": true} for the PNG in the reply`)
	// ErrNotStored: the screenshot was taken, but its publish to the
	// artifact store was refused, held or failed; the message it is
	// wrapped with says which.
	ErrNotStored = broker.NewOutcomeError("screenshot-not-stored", "the screenshot was not stored as an artifact")
	// ErrClosed: the pool is closed.
	ErrClosed = broker.NewOutcomeError("browser-closed", "the browser pool is closed")
)

// FixCommand is what an operator runs to install Chromium and the driver.
const FixCommand = "run `bash .ci/install-deps` (or: apt-get install -y chromium; and " +
	"npm pack playwright-core@" + DriverVersion + " unpacked into " + DefaultDriverDir +
	" with a `node` link beside it, or PLAYWRIGHT_DRIVER_PATH set to that folder)"
