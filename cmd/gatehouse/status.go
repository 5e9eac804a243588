package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/approval/approvalredis"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/subject"
)

const statusUsage = `Usage: gatehouse status [--nats-url URL] [--creds FILE] [--system-user U] [--redis-url URL] [--json]

Shows a Gatehouse deployment as an operator wants to see it:
  - the NATS servers and their JetStream state (meta leader, peers, lag),
    with --system-user and $GATEHOUSE_SYSTEM_PASSWORD (the NATS system
    account); without them only the server this command reached;
  - every stream and bucket: replicas, leader, each replica's lag, messages;
  - the brokers in the queue group (NATS micro discovery of the service
    "gatehouse"): id, version, requests, errors (effect replies carrying an
    error code: bad requests, unknown runs, failures; a policy refusal
    is a decision, not an error), average time;
  - the journal writer's consumer: stream last sequence, ack floor, lag,
    pending and redelivered events;
  - approvals waiting for a person (pending or reopened): how many, and
    since when the oldest waits, read from JetStream KV (bucket
    gatehouse_approvals), or with --redis-url from Redis, for deployments
    whose serve keeps approvals there (serve --redis-url).
`

// statusReport is what status prints with --json.
type statusReport struct {
	NATSURL   string           `json:"nats_url"`
	Connected string           `json:"connected_server"`
	Servers   []statusServer   `json:"servers,omitempty"`
	Meta      *statusMeta      `json:"meta,omitempty"`
	Streams   []statusStream   `json:"streams"`
	Brokers   []statusBroker   `json:"brokers"`
	Writer    *statusWriter    `json:"writer,omitempty"`
	Approvals *statusApprovals `json:"approvals,omitempty"`
	Findings  []string         `json:"findings"`
	Notes     []string         `json:"notes,omitempty"`
}

type statusServer struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	Version string `json:"version,omitempty"`
	// The figures are nil when unknown: without the system account only an
	// embedded server's own broker can tell them.
	Connections *int   `json:"connections,omitempty"`
	Streams     *int   `json:"streams,omitempty"`
	Consumers   *int   `json:"consumers,omitempty"`
	Uptime      string `json:"uptime,omitempty"`
}

type statusMeta struct {
	Leader string       `json:"leader"`
	Size   int          `json:"cluster_size"`
	Peers  []statusPeer `json:"peers"`
}

type statusPeer struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline,omitempty"`
	Lag     uint64 `json:"lag,omitempty"`
}

type statusStream struct {
	Name     string       `json:"name"`
	Kind     string       `json:"kind"` // stream, kv, objects
	Replicas int          `json:"replicas"`
	Leader   string       `json:"leader,omitempty"`
	Peers    []statusPeer `json:"peers,omitempty"`
	Messages uint64       `json:"messages"`
	Bytes    uint64       `json:"bytes"`
	LastSeq  uint64       `json:"last_seq"`
}

type statusBroker struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	Started  string `json:"started,omitempty"`
	Requests int    `json:"requests"`
	Errors   int    `json:"errors"`
	// AverageMs is NATS micro's processing time per request: the time to
	// hand a request to its goroutine, not the effect's (see
	// gatehouse_effect_seconds for that).
	AverageMs float64 `json:"average_ms"`
	// Status is what the broker says of itself: mode, policy (and whether
	// it could be read), grounding rules, sinks, an embedded NATS server's
	// figures. Nil for a broker too old to say.
	Status *broker.InstanceStatus `json:"status,omitempty"`
}

type statusWriter struct {
	broker.JournalLag
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	LastActive  string `json:"last_active,omitempty"`
	// Health is what the writer last reported about itself (can it write).
	Health *broker.WriterHealth `json:"health,omitempty"`
}

// statusApprovals is what waits for a person in the approvals bucket.
type statusApprovals struct {
	Pending int `json:"pending"`
	// Oldest is when the longest-waiting request was made; OldestAge how
	// long ago (seconds in JSON).
	Oldest    *time.Time `json:"oldest,omitempty"`
	OldestAge float64    `json:"oldest_age_seconds,omitempty"`
}

func cmdStatus(ctx context.Context, env *cliEnv, args []string) error {
	var (
		cf       connFlags
		sysUser  string
		redisURL string
		wait     time.Duration
	)
	fs := newEnvFlags(env, "status", statusUsage)
	cf.register(fs)
	fs.stringVar(&sysUser, "system-user", "", "NATS system account user, to read every server's JetStream state (password in $GATEHOUSE_SYSTEM_PASSWORD)")
	fs.DurationVar(&wait, "wait", 500*time.Millisecond, "how long to collect answers from servers and brokers")
	fs.stringVar(&redisURL, "redis-url", "", "read pending approvals from Redis (redis://host:port/db), where serve --redis-url keeps them, instead of JetStream KV")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	var approvalsRedis *redis.Client
	if redisURL != "" {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			// Not %v: url.Parse errors quote the URL, password and all.
			return usageError("--redis-url is not a redis:// or rediss:// URL")
		}
		approvalsRedis = redis.NewClient(opt)
		defer approvalsRedis.Close()
	}
	url, creds := cf.natsURL, cf.creds
	if url == "" || creds == "" {
		if ep, err := readEndpoints(cf.dataDir); err == nil {
			if url == "" {
				url = ep.NATSURL
			}
			if creds == "" && ep.AppCreds != "" {
				creds = embedded.CredsPath(filepath.Join(cf.dataDir, "nats"), embedded.RoleBroker)
			}
		} else if url == "" {
			return &exitError{code: exitUsage, err: err}
		}
	}
	// Brokers answer micro discovery only into inbox spaces; the operator
	// tools' is _INBOX_ops.
	nc, err := connectNATS(url, creds, "gatehouse-status", nats.CustomInboxPrefix(subject.OpsInbox))
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("connect to NATS at %s: %w", redactURL(url), err)}
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()

	rep := &statusReport{NATSURL: redactURL(url), Connected: nc.ConnectedServerName(), Streams: []statusStream{},
		Brokers: []statusBroker{}, Findings: []string{}}
	if sysUser != "" {
		statusServers(ctx, rep, url, sysUser, env.getenv("GATEHOUSE_SYSTEM_PASSWORD"), wait)
	} else {
		rep.Notes = append(rep.Notes, noteNoSystemUser)
		rep.Servers = []statusServer{{Name: nc.ConnectedServerName(), Cluster: nc.ConnectedClusterName(), Version: nc.ConnectedServerVersion()}}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	statusStreams(ctx, rep, js)
	statusBrokers(rep, nc, wait)
	embeddedFigures(rep)
	statusJournalWriter(ctx, rep, js)
	if approvalsRedis != nil {
		statusApprovalsPendingRedis(ctx, rep, approvalsRedis, time.Now())
	} else {
		statusApprovalsPending(ctx, rep, js, time.Now())
	}

	if cf.json {
		if err := printJSON(env, rep); err != nil {
			return err
		}
	} else {
		printStatus(env, rep)
	}
	if len(rep.Findings) > 0 {
		return &exitError{code: exitFindings}
	}
	return nil
}

// redactURL drops any user:password from NATS URLs before they are shown.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if at := strings.LastIndexByte(p, '@'); at >= 0 {
			scheme := ""
			if k := strings.Index(p, "://"); k >= 0 && k < at {
				scheme = p[:k+3]
			}
			parts[i] = scheme + "[redacted]@" + p[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// collect sends a request that many may answer (every server, every
// service instance) and gathers the answers that come within wait.
func collect(nc *nats.Conn, subj string, wait time.Duration) [][]byte {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil
	}
	var out [][]byte
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return out
		}
		m, err := sub.NextMsg(left)
		if err != nil {
			return out
		}
		if len(m.Data) > 0 {
			out = append(out, m.Data)
		}
	}
}

// statusServers reads every server's VARZ and JSZ through the system
// account.
func statusServers(ctx context.Context, rep *statusReport, url, user, password string, wait time.Duration) {
	sys, err := nats.Connect(url, nats.UserInfo(user, password), nats.Name("gatehouse-status-system"))
	if err != nil {
		rep.Findings = append(rep.Findings, fmt.Sprintf("system account: %v", err))
		return
	}
	defer sys.Close()
	type serverInfo struct {
		Name    string `json:"name"`
		Cluster string `json:"cluster"`
		Version string `json:"ver"`
	}
	servers := map[string]*statusServer{}
	for _, b := range collect(sys, "$SYS.REQ.SERVER.PING.VARZ", wait) {
		var v struct {
			Server serverInfo `json:"server"`
			Data   struct {
				Connections int    `json:"connections"`
				Uptime      string `json:"uptime"`
				Version     string `json:"version"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &v) == nil && v.Server.Name != "" {
			servers[v.Server.Name] = &statusServer{Name: v.Server.Name, Cluster: v.Server.Cluster, Version: v.Data.Version,
				Connections: &v.Data.Connections, Uptime: v.Data.Uptime}
		}
	}
	for _, b := range collect(sys, "$SYS.REQ.SERVER.PING.JSZ", wait) {
		var j struct {
			Server serverInfo `json:"server"`
			Data   struct {
				Streams   int `json:"streams"`
				Consumers int `json:"consumers"`
				Meta      *struct {
					Leader   string `json:"leader"`
					Size     int    `json:"cluster_size"`
					Replicas []struct {
						Name    string `json:"name"`
						Current bool   `json:"current"`
						Offline bool   `json:"offline"`
						Lag     uint64 `json:"lag"`
					} `json:"replicas"`
				} `json:"meta_cluster"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &j) != nil || j.Server.Name == "" {
			continue
		}
		s := servers[j.Server.Name]
		if s == nil {
			s = &statusServer{Name: j.Server.Name, Cluster: j.Server.Cluster}
			servers[j.Server.Name] = s
		}
		s.Streams, s.Consumers = &j.Data.Streams, &j.Data.Consumers
		if m := j.Data.Meta; m != nil && m.Leader == j.Server.Name {
			rep.Meta = &statusMeta{Leader: m.Leader, Size: m.Size, Peers: []statusPeer{{Name: m.Leader, Current: true}}}
			for _, r := range m.Replicas {
				rep.Meta.Peers = append(rep.Meta.Peers, statusPeer{Name: r.Name, Current: r.Current, Offline: r.Offline, Lag: r.Lag})
			}
		}
	}
	for _, s := range servers {
		rep.Servers = append(rep.Servers, *s)
	}
	sort.Slice(rep.Servers, func(i, k int) bool { return rep.Servers[i].Name < rep.Servers[k].Name })
	if len(rep.Servers) == 0 {
		rep.Findings = append(rep.Findings, "no NATS server answered on the system account")
	}
	if rep.Meta == nil {
		rep.Findings = append(rep.Findings, "no JetStream meta leader answered")
	} else {
		for _, p := range rep.Meta.Peers {
			if p.Offline || !p.Current {
				rep.Findings = append(rep.Findings, fmt.Sprintf("JetStream peer %s is offline or behind", p.Name))
			}
		}
	}
}

func statusStreams(ctx context.Context, rep *statusReport, js jetstream.JetStream) {
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		s := statusStream{Name: si.Config.Name, Kind: "stream", Replicas: si.Config.Replicas,
			Messages: si.State.Msgs, Bytes: si.State.Bytes, LastSeq: si.State.LastSeq}
		switch {
		case strings.HasPrefix(s.Name, "KV_"):
			s.Kind, s.Name = "kv", strings.TrimPrefix(s.Name, "KV_")
		case strings.HasPrefix(s.Name, "OBJ_"):
			s.Kind, s.Name = "objects", strings.TrimPrefix(s.Name, "OBJ_")
		}
		if c := si.Cluster; c != nil {
			s.Leader = c.Leader
			if c.Leader != "" {
				s.Peers = append(s.Peers, statusPeer{Name: c.Leader, Current: true})
			}
			for _, r := range c.Replicas {
				s.Peers = append(s.Peers, statusPeer{Name: r.Name, Current: r.Current, Offline: r.Offline, Lag: r.Lag})
			}
			if c.Leader == "" {
				rep.Findings = append(rep.Findings, fmt.Sprintf("%s %s has no leader", s.Kind, s.Name))
			}
			for _, p := range s.Peers {
				if p.Offline {
					rep.Findings = append(rep.Findings, fmt.Sprintf("%s %s: replica on %s is offline", s.Kind, s.Name, p.Name))
				}
			}
		}
		rep.Streams = append(rep.Streams, s)
	}
	if err := l.Err(); err != nil {
		rep.Findings = append(rep.Findings, fmt.Sprintf("list streams: %v", err))
	}
	sort.Slice(rep.Streams, func(i, k int) bool {
		if rep.Streams[i].Kind != rep.Streams[k].Kind {
			return rep.Streams[i].Kind > rep.Streams[k].Kind // streams, objects, kv
		}
		return rep.Streams[i].Name < rep.Streams[k].Name
	})
}

// statusBrokers finds every broker through NATS micro: $SRV.STATS.gatehouse
// is answered by each instance of the service.
func statusBrokers(rep *statusReport, nc *nats.Conn, wait time.Duration) {
	for _, b := range collect(nc, "$SRV.STATS."+subject.ServiceName, wait) {
		var st micro.Stats
		if json.Unmarshal(b, &st) != nil || st.ID == "" {
			continue
		}
		br := statusBroker{ID: st.ID, Version: st.Version}
		if !st.Started.IsZero() {
			br.Started = st.Started.UTC().Format(time.RFC3339)
		}
		var total time.Duration
		for _, e := range st.Endpoints {
			br.Requests += e.NumRequests
			br.Errors += e.NumErrors
			total += e.ProcessingTime
			var is broker.InstanceStatus
			if len(e.Data) > 0 && json.Unmarshal(e.Data, &is) == nil && is.Mode != "" {
				br.Status = &is
				// The broker's own count: micro's misses every answer
				// given from a goroutine of its own.
				br.Errors += int(is.EffectErrors)
			}
		}
		brokerFindings(rep, &br)
		if br.Requests > 0 {
			br.AverageMs = float64(total.Microseconds()) / 1000 / float64(br.Requests)
		}
		rep.Brokers = append(rep.Brokers, br)
	}
	slices.SortFunc(rep.Brokers, func(a, b statusBroker) int { return strings.Compare(a.ID, b.ID) })
	if len(rep.Brokers) == 0 {
		rep.Findings = append(rep.Findings, "no broker answered NATS micro discovery ($SRV.STATS.gatehouse): effects cannot be decided")
	}
}

func statusJournalWriter(ctx context.Context, rep *statusReport, js jetstream.JetStream) {
	lag, err := broker.ReadJournalLag(ctx, js)
	if err != nil {
		rep.Findings = append(rep.Findings, err.Error())
		return
	}
	w := &statusWriter{JournalLag: lag}
	if c, err := js.Consumer(ctx, subject.JournalStream, subject.JournalConsumer); err == nil {
		if info, err := c.Info(ctx); err == nil {
			w.AckPending, w.Redelivered = info.NumAckPending, info.NumRedelivered
			if info.AckFloor.Last != nil {
				w.LastActive = info.AckFloor.Last.UTC().Format(time.RFC3339)
			}
		}
	} else {
		rep.Findings = append(rep.Findings, "no journal writer consumer: no writer has run yet ('gatehouse writer' or serve without --no-writer)")
	}
	if h, err := broker.ReadWriterHealth(ctx, js); err == nil { // from the leader: a replica may be behind
		w.Health = &h
		if h.State == broker.WriterFailing {
			rep.Findings = append(rep.Findings, fmt.Sprintf("the journal writer cannot write since %s: %s (strict brokers refuse effects)",
				h.Since.UTC().Format(time.RFC3339), h.Reason))
		}
	}
	rep.Writer = w
}

// statusApprovalsPending counts the requests waiting for a person in the
// approvals bucket, when it exists. It reads every request (one KV get
// each): status is an operator's command, not a hot path.
func statusApprovalsPending(ctx context.Context, rep *statusReport, js jetstream.JetStream, now time.Time) {
	kv, err := js.KeyValue(ctx, subject.ApprovalsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return
	}
	if err != nil {
		rep.Findings = append(rep.Findings, fmt.Sprintf("approvals bucket %s: %v", subject.ApprovalsBucket, err))
		return
	}
	keys, err := kv.ListKeysFiltered(ctx, approval.RequestKeyPrefix+">")
	if err != nil {
		rep.Findings = append(rep.Findings, fmt.Sprintf("approvals bucket %s: %v", subject.ApprovalsBucket, err))
		return
	}
	a := &statusApprovals{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		a.count(e.Value())
	}
	rep.Approvals = a.since(now)
}

// approvalsRedisPrefix is where serve --redis-url keeps approval requests
// (openApprovals): status must read the same keys.
const approvalsRedisPrefix = approvalredis.Prefix

// statusApprovalsPendingRedis counts the requests waiting for a person
// among those serve --redis-url keeps in Redis: one SCAN and an MGET per
// chunk of keys. Redis that cannot be read is a finding; the URL (which
// may carry a password) is never shown.
func statusApprovalsPendingRedis(ctx context.Context, rep *statusReport, rdb *redis.Client, now time.Time) {
	entries, err := approvalredis.New(rdb, approvalsRedisPrefix).Entries(ctx, approval.RequestKeyPrefix)
	if err != nil {
		rep.Findings = append(rep.Findings, fmt.Sprintf("approvals in Redis at %s: %v", rdb.Options().Addr, err))
		return
	}
	a := &statusApprovals{}
	for _, e := range entries {
		a.count(e.Value)
	}
	rep.Approvals = a.since(now)
}

// count adds one stored request, if it waits for a person.
func (a *statusApprovals) count(val []byte) {
	var r approval.Request
	if json.Unmarshal(val, &r) != nil || !isPending(r.State) {
		return
	}
	a.Pending++
	if a.Oldest == nil || r.Requested.Before(*a.Oldest) {
		t := r.Requested.UTC()
		a.Oldest = &t
	}
}

// since sets how long the oldest has waited at now, and returns a.
func (a *statusApprovals) since(now time.Time) *statusApprovals {
	if a.Oldest != nil {
		a.OldestAge = max(now.Sub(*a.Oldest), 0).Round(time.Second).Seconds()
	}
	return a
}

func printStatus(env *cliEnv, r *statusReport) {
	o := env.stdout
	fmt.Fprintf(o, "NATS %s (connected to %s)\n", r.NATSURL, r.Connected)
	for _, s := range r.Servers {
		fmt.Fprintf(o, "  server %-12s cluster %-16s %-8s connections %-4s streams %-3s consumers %-3s up %s\n",
			s.Name, orDash(s.Cluster), s.Version, count(s.Connections), count(s.Streams), count(s.Consumers), orDash(s.Uptime))
	}
	if m := r.Meta; m != nil {
		fmt.Fprintf(o, "JetStream meta leader %s, %d peers:", m.Leader, m.Size)
		for _, p := range m.Peers {
			fmt.Fprintf(o, " %s", peerState(p))
		}
		fmt.Fprintln(o)
	}
	fmt.Fprintln(o, "Streams and buckets:")
	for _, s := range r.Streams {
		fmt.Fprintf(o, "  %-8s %-24s R%d leader %-8s msgs %-8d last seq %-8d", s.Kind, s.Name, s.Replicas, orDash(s.Leader), s.Messages, s.LastSeq)
		for _, p := range s.Peers {
			fmt.Fprintf(o, " %s", peerState(p))
		}
		fmt.Fprintln(o)
	}
	fmt.Fprintf(o, "Brokers (queue group %s): %d\n", subject.QueueGroup, len(r.Brokers))
	for _, b := range r.Brokers {
		fmt.Fprintf(o, "  %s v%s requests %d errors %d", b.ID, b.Version, b.Requests, b.Errors)
		switch {
		case b.AverageMs >= 0.1:
			fmt.Fprintf(o, " average %.2f ms", b.AverageMs)
		case b.AverageMs > 0:
			fmt.Fprintf(o, " average %.0f µs", b.AverageMs*1000)
		}
		fmt.Fprintf(o, " since %s\n", b.Started)
		printBrokerStatus(o, b.Status)
	}
	if w := r.Writer; w != nil {
		fmt.Fprintf(o, "Journal writer: stream last seq %d, ack floor %d, lag %d, pending %d, ack pending %d, redelivered %d",
			w.LastSeq, w.AckFloor, w.Lag, w.Pending, w.AckPending, w.Redelivered)
		if w.Health != nil {
			fmt.Fprintf(o, ", health %s", w.Health.State)
		}
		fmt.Fprintln(o)
	}
	if a := r.Approvals; a != nil {
		fmt.Fprintf(o, "Approvals pending: %d", a.Pending)
		if a.Oldest != nil {
			fmt.Fprintf(o, ", oldest waiting %s (since %s)", time.Duration(a.OldestAge)*time.Second, a.Oldest.Format(time.RFC3339))
		}
		fmt.Fprintln(o)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(o, "note:", n)
	}
	for _, f := range r.Findings {
		fmt.Fprintln(o, "FINDING:", f)
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(o, "ok")
	}
}

func peerState(p statusPeer) string {
	switch {
	case p.Offline:
		return p.Name + "(offline)"
	case !p.Current:
		return fmt.Sprintf("%s(behind %d)", p.Name, p.Lag)
	}
	return p.Name + "(current)"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
