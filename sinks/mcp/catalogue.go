package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/policy/rulesyaml"
)

// ErrCatalogue: the catalogue of upstream servers cannot be used.
var ErrCatalogue = errors.New("mcp servers catalogue")

// Catalogue lists the upstream MCP servers agents may call through
// Gatehouse (serve --mcp-servers).
type Catalogue struct {
	Servers []Server `yaml:"servers"`
}

// AuthType is how a person's credential reaches an upstream server.
type AuthType string

const (
	AuthNone   AuthType = "none"   // no credential
	AuthBearer AuthType = "bearer" // HTTP: Authorization: Bearer <token>
	AuthHeader AuthType = "header" // HTTP: <header>: <token>
	AuthEnv    AuthType = "env"    // stdio: the environment variable <env> of that person's process
)

// Auth is how a server gets the credential of the person the work is for,
// looked up only after the decision (the provider sink's credential store,
// with the server's name as the provider).
type Auth struct {
	Type   AuthType `yaml:"type"`
	Header string   `yaml:"header,omitempty"`
	Env    string   `yaml:"env,omitempty"`
}

// DefaultMemoryMB is a stdio server's address space when the catalogue
// sets none (see Limits.MemoryMB).
const DefaultMemoryMB = 16384

// Limits bound a stdio server's process in the sandbox.
type Limits struct {
	// MemoryMB is its address space (RLIMIT_AS; default DefaultMemoryMB).
	// Runtimes reserve far more address space than they use: Node, the
	// runtime of most published MCP servers, reserves about 10 GiB for each
	// WebAssembly instance, and its HTTP client (fetch) is one, so under 8
	// GiB such a server dies at its first fetch or at a random moment.
	MemoryMB int64 `yaml:"memory_mb,omitempty"`
	// LifetimeSeconds is how long one process may live (default 3600); it
	// is started again on the next call.
	LifetimeSeconds int `yaml:"lifetime_seconds,omitempty"`
	// CPUSeconds is the CPU time of each of its processes (default 600).
	CPUSeconds int `yaml:"cpu_seconds,omitempty"`
	// Processes bounds its processes and threads (default 128).
	Processes int `yaml:"processes,omitempty"`
}

// ToolPolicy is what the catalogue says about one tool.
type ToolPolicy struct {
	// Effect is the class the tool is decided under (read, write,
	// destructive, notify); default: from the pinned annotations (read
	// only: read; destructiveHint false: write; else destructive).
	Effect policy.EffectClass `yaml:"effect,omitempty"`
}

// Server is one upstream MCP server: stdio (Command, started by Gatehouse
// in the sandbox) or streamable HTTP (URL).
type Server struct {
	// Name is the server's name: the mandate's system, the first part of
	// every tool's card name "<name>/<tool>".
	Name string `yaml:"name"`
	// Command is the program and its arguments, as the sandbox sees them
	// (a path under /usr, or a file of Files in the workspace: "./server").
	Command []string `yaml:"command,omitempty"`
	// Files are copied into the process's workspace, executable: the
	// workspace name to the host path.
	Files map[string]string `yaml:"files,omitempty"`
	// Env is the process's whole environment besides the credential.
	Env    map[string]string `yaml:"env,omitempty"`
	Limits Limits            `yaml:"limits,omitempty"`
	// URL is a streamable HTTP endpoint (http or https).
	URL  string `yaml:"url,omitempty"`
	Auth Auth   `yaml:"auth"`
	// CallTimeoutSeconds bounds one call (default 60).
	CallTimeoutSeconds int                   `yaml:"call_timeout_seconds,omitempty"`
	Tools              map[string]ToolPolicy `yaml:"tools,omitempty"`
	// Reaches are the providers (of --providers) the server can change
	// records of; nil is every one, and [] none (grounding.go).
	Reaches *[]string `yaml:"reaches,omitempty"`
}

// Stdio reports whether the server is started by Gatehouse.
func (s *Server) Stdio() bool { return len(s.Command) > 0 }

func (s *Server) callTimeout() time.Duration {
	if s.CallTimeoutSeconds > 0 {
		return time.Duration(s.CallTimeoutSeconds) * time.Second
	}
	return 60 * time.Second
}

// Server returns the named server.
func (c *Catalogue) Server(name string) (*Server, bool) {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return &c.Servers[i], true
		}
	}
	return nil, false
}

var (
	serverName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	headerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)
)

// LoadCatalogue reads a catalogue file.
func LoadCatalogue(p string) (*Catalogue, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalogue, err)
	}
	return ParseCatalogue(p, data)
}

// ParseCatalogue decodes a catalogue (YAML or JSON) strictly: unknown
// keys, aliases, more than one document, duplicate names and values out
// of range are errors naming the entry.
func ParseCatalogue(name string, data []byte) (*Catalogue, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrCatalogue, name, fmt.Sprintf(format, args...))
	}
	// One document (a .json file valid JSON), no aliases or merge keys,
	// then a decode that refuses unknown keys.
	root, err := rulesyaml.Reader{Fail: fail}.Root(name, data)
	if errors.Is(err, rulesyaml.ErrEmpty) {
		return nil, fail("the file is empty; write servers: [] for none")
	}
	if err != nil {
		return nil, err
	}
	if hasAlias(root) {
		return nil, fail("YAML aliases and merge keys are not allowed")
	}
	var c Catalogue
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fail("%v", err)
	}
	seen := map[string]bool{}
	for i := range c.Servers {
		s := &c.Servers[i]
		at := fmt.Sprintf("servers[%d] (%s)", i, s.Name)
		if err := s.validate(); err != nil {
			return nil, fail("%s: %v", at, err)
		}
		if seen[s.Name] {
			return nil, fail("%s: the name is used twice", at)
		}
		seen[s.Name] = true
	}
	return &c, nil
}

func (s *Server) validate() error {
	if !serverName.MatchString(s.Name) {
		return fmt.Errorf("name must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	switch {
	case s.Stdio() && s.URL != "":
		return fmt.Errorf("give command (stdio) or url (HTTP), not both")
	case !s.Stdio() && s.URL == "":
		return fmt.Errorf("give command (stdio, started in the sandbox) or url (streamable HTTP)")
	case s.Stdio():
		if s.Command[0] == "" {
			return fmt.Errorf("command[0] is empty")
		}
		for k, v := range s.Env {
			if !envName.MatchString(k) || bytes.ContainsRune([]byte(v), 0) {
				return fmt.Errorf("env %q is not a variable name and value", k)
			}
		}
		for k, v := range s.Files {
			if k == "" || filepath.IsAbs(k) || filepath.Clean(k) != k || k == ".." || len(k) > 2 && k[:3] == "../" {
				return fmt.Errorf("files: %q must be a relative path inside the workspace", k)
			}
			if !filepath.IsAbs(v) {
				return fmt.Errorf("files: %q: the host path %q must be absolute", k, v)
			}
		}
	default:
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("url must be an http or https address without credentials")
		}
		if len(s.Files) > 0 || len(s.Env) > 0 || s.Limits != (Limits{}) {
			return fmt.Errorf("files, env and limits are for stdio servers only")
		}
	}
	switch s.Auth.Type {
	case "", AuthNone:
		s.Auth.Type = AuthNone
	case AuthBearer, AuthHeader:
		if s.Stdio() {
			return fmt.Errorf("auth %s is for HTTP servers; a stdio server gets its credential with auth env", s.Auth.Type)
		}
		if s.Auth.Type == AuthHeader && !headerName.MatchString(s.Auth.Header) {
			return fmt.Errorf("auth header needs header: NAME")
		}
	case AuthEnv:
		if !s.Stdio() || !envName.MatchString(s.Auth.Env) {
			return fmt.Errorf("auth env is for stdio servers and needs env: NAME")
		}
	default:
		return fmt.Errorf("auth type %q is not none, bearer, header or env", s.Auth.Type)
	}
	for name, tp := range s.Tools {
		switch tp.Effect {
		case "", policy.EffectRead, policy.EffectWrite, policy.EffectDestructive, policy.EffectNotify:
		default:
			return fmt.Errorf("tools.%s.effect %q is not read, write, destructive or notify", name, tp.Effect)
		}
	}
	if s.CallTimeoutSeconds < 0 || s.Limits.MemoryMB < 0 || s.Limits.LifetimeSeconds < 0 || s.Limits.CPUSeconds < 0 || s.Limits.Processes < 0 {
		return fmt.Errorf("limits and timeouts cannot be negative")
	}
	return nil
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Tag == "!!merge" {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}
