package subject

// DashboardBucket is the JetStream KV bucket holding the web dashboard's
// sessions and sign-in state (failure counts, the TOTP replay guard,
// half-done sign-ins), keyed by hashes: no session token is stored.
const DashboardBucket = "gatehouse_dashboard"
