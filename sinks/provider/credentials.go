package provider

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

const redacted = "[REDACTED]"

// Secret is the secret part of a credential. It prints, logs and encodes as
// "[REDACTED]" whatever the verb or encoder; only Reveal returns it, and
// the sink calls Reveal only to set the outgoing request's header.
type Secret struct{ v string }

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the secret. Call it only to hand the secret to the
// provider.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) MarshalYAML() (any, error)    { return redacted, nil }
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fmt.Errorf("line %d: a secret must be a string", n.Line)
	}
	s.v = n.Value
	return nil
}

// Credential is what Gatehouse attaches for one person on one provider:
// Token for bearer and header auth, Username and Password for basic.
type Credential struct {
	Token    Secret
	Username string
	Password Secret
}

// LogValue keeps the secrets out of logs.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", c.Username), slog.String("secret", redacted))
}

// CredentialStore finds a person's own credential for a provider.
// Implementations are safe for concurrent use, return an error wrapping
// ErrNoCredential when the person has none, and never return another
// person's credential in its place.
type CredentialStore interface {
	Credential(ctx context.Context, who policy.Principal, provider string) (Credential, error)
}

// ErrNoCredential: the person has no credential for the provider.
var ErrNoCredential = errors.New("no credential")

// credKey is whose credential for which provider: the only key of every
// credential lookup and cache.
type credKey struct{ tenant, person, provider string }

// FileCredentials are credentials read from a YAML file the operator
// keeps (LoadCredentials). Safe for concurrent use; the file is read once.
//
//	credentials:
//	  - {tenant: acme, person: ada, provider: erp, token: "..."}
//	  - {tenant: acme, person: bob, provider: bank, username: bob, password: "..."}
type FileCredentials struct {
	name string
	m    map[credKey]Credential
}

var _ CredentialStore = (*FileCredentials)(nil)

type credentialsFile struct {
	Credentials []struct {
		Tenant   string `yaml:"tenant"`
		Person   string `yaml:"person"`
		Provider string `yaml:"provider"`
		Token    Secret `yaml:"token"`
		Username string `yaml:"username"`
		Password Secret `yaml:"password"`
	} `yaml:"credentials"`
}

// ErrCredentialsFile is wrapped by every error loading a credentials file.
var ErrCredentialsFile = errors.New("credentials file")

// LoadCredentials reads the credentials file at p. It refuses a file that
// is not a regular file or that its group or others can read or write:
// chmod 600 it.
func LoadCredentials(p string) (*FileCredentials, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentialsFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w %s: not a regular file", ErrCredentialsFile, p)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w %s: mode %04o lets other users read or change the credentials it holds; run chmod 600 %s", ErrCredentialsFile, p, perm, p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentialsFile, err)
	}
	return ParseCredentials(p, data)
}

// ParseCredentials decodes a credentials file strictly. Errors name the
// file and the entry, never a secret.
func ParseCredentials(name string, data []byte) (*FileCredentials, error) {
	var f credentialsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w %s: %v", ErrCredentialsFile, name, err)
	}
	fc := &FileCredentials{name: name, m: make(map[credKey]Credential, len(f.Credentials))}
	for i, c := range f.Credentials {
		where := fmt.Sprintf("credentials[%d] (%s/%s on %s)", i, c.Tenant, c.Person, c.Provider)
		if c.Tenant == "" || c.Person == "" || c.Provider == "" {
			return nil, fmt.Errorf("%w %s: %s: tenant, person and provider are required", ErrCredentialsFile, name, where)
		}
		if c.Token.IsZero() == (c.Password.IsZero() && c.Username == "") {
			return nil, fmt.Errorf("%w %s: %s: give either token, or username and password", ErrCredentialsFile, name, where)
		}
		k := credKey{c.Tenant, c.Person, c.Provider}
		if _, dup := fc.m[k]; dup {
			return nil, fmt.Errorf("%w %s: %s: given twice", ErrCredentialsFile, name, where)
		}
		fc.m[k] = Credential{Token: c.Token, Username: c.Username, Password: c.Password}
	}
	return fc, nil
}

// Credential implements CredentialStore.
func (f *FileCredentials) Credential(_ context.Context, who policy.Principal, provider string) (Credential, error) {
	c, ok := f.m[credKey{who.Tenant, who.Person, provider}]
	if !ok {
		return Credential{}, fmt.Errorf("%w in %s", ErrNoCredential, f.name)
	}
	return c, nil
}

// KVCredentials keeps credentials in a JetStream KV bucket, keyed
// "<tenant>.<person>.<provider>" with each part hex-encoded. Only the
// broker's NATS role can read the bucket; agents cannot. Safe for
// concurrent use.
type KVCredentials struct {
	kv   jetstream.KeyValue
	name string
}

var _ CredentialStore = (*KVCredentials)(nil)

// KVConfig configures the JetStream KV stores of this package.
type KVConfig struct {
	Bucket   string // "" is the store's default bucket
	Replicas int    // 0 is 1; use 3 on a cluster
}

// OpenKVCredentials creates or updates the bucket and returns the store.
func OpenKVCredentials(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KVCredentials, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = subject.CredentialsBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: cfg.Bucket, Description: "Gatehouse provider credentials per tenant, person and provider",
		Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1), History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("credentials bucket %s: %w", cfg.Bucket, err)
	}
	return &KVCredentials{kv: kv, name: "jetstream kv " + cfg.Bucket}, nil
}

type storedCredential struct {
	Token    string `json:"token,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

func credKV(who policy.Principal, provider string) string {
	return hex.EncodeToString([]byte(who.Tenant)) + "." + hex.EncodeToString([]byte(who.Person)) + "." + hex.EncodeToString([]byte(provider))
}

// Put keeps c as who's credential for provider.
func (s *KVCredentials) Put(ctx context.Context, who policy.Principal, provider string, c Credential) error {
	b, err := json.Marshal(storedCredential{Token: c.Token.Reveal(), Username: c.Username, Password: c.Password.Reveal()})
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, credKV(who, provider), b); err != nil {
		return fmt.Errorf("%s: put: %w", s.name, err)
	}
	return nil
}

// Delete removes who's credential for provider.
func (s *KVCredentials) Delete(ctx context.Context, who policy.Principal, provider string) error {
	if err := s.kv.Delete(ctx, credKV(who, provider)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s: delete: %w", s.name, err)
	}
	return nil
}

// Credential implements CredentialStore.
func (s *KVCredentials) Credential(ctx context.Context, who policy.Principal, provider string) (Credential, error) {
	e, err := s.kv.Get(ctx, credKV(who, provider))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Credential{}, fmt.Errorf("%w in %s", ErrNoCredential, s.name)
	}
	if err != nil {
		return Credential{}, fmt.Errorf("%s: read: %w", s.name, err)
	}
	var sc storedCredential
	if err := json.Unmarshal(e.Value(), &sc); err != nil {
		return Credential{}, fmt.Errorf("%s: the stored credential is not JSON", s.name) // never the value
	}
	return Credential{Token: NewSecret(sc.Token), Username: sc.Username, Password: NewSecret(sc.Password)}, nil
}
