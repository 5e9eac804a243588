package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// Role is what a dashboard user may do.
type Role string

// The roles. A tenant auditor is bound to one tenant.
const (
	RoleReviewer Role = "reviewer" // approves or refuses held actions, reconciles unknown outcomes
	RoleOperator Role = "operator" // policy review
	RoleAuditor  Role = "auditor"  // one tenant's evidence and export
	RoleAdmin    Role = "admin"    // everything, every tenant
)

var validRole = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ParseRole parses a role name. Besides the four that open pages, a user
// may hold roles the deployment's approvals: rules name (finance,
// payments-approver, ...); they are passed on with every decision.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if !validRole.MatchString(string(r)) {
		return "", fmt.Errorf("%w: %q (reviewer, operator, auditor, admin, or a role your approvals rules name: lowercase letters, digits, '-', '_')", ErrBadRole, s)
	}
	return r, nil
}

// Sentinel errors of the user store.
var (
	ErrBadRole      = errors.New("web: unknown role")
	ErrBadUser      = errors.New("web: invalid user")
	ErrUserExists   = errors.New("web: user exists")
	ErrNoUser       = errors.New("web: no such user")
	ErrBadPassword  = errors.New("web: wrong name or password") // also for unknown names: never say which
	ErrWeakPassword = errors.New("web: password too short (at least 12 characters)")
)

// MinPassword is the shortest password accepted.
const MinPassword = 12

// User is one dashboard user as stored. The password is kept only as an
// argon2id hash.
type User struct {
	Name    string    `json:"name"`
	Roles   []Role    `json:"roles"`
	Tenant  string    `json:"tenant,omitempty"` // required for auditors: the one tenant they see
	Hash    string    `json:"hash"`             // $argon2id$v=19$m=...,t=...,p=...$salt$key
	Created time.Time `json:"created"`
	// TOTP is the base32 secret of the user's authenticator (totp.go), ""
	// when none is enrolled. Like Hash, it never leaves the store: List and
	// Authenticate clear it and set TOTPEnrolled.
	TOTP         string `json:"totp,omitempty"`
	TOTPEnrolled bool   `json:"totp_enrolled,omitempty"`
	// stamp fingerprints the credentials (hash and TOTP secret) the
	// user signed in with; Current compares it, so a password change or a
	// new authenticator ends older sessions. Never stored or shown.
	stamp string
}

// credentialStamp is a fingerprint of u's stored credentials.
func credentialStamp(u User) string {
	sum := sha256.Sum256([]byte(u.Hash + "\x00" + u.TOTP))
	return hex.EncodeToString(sum[:8])
}

// Has reports whether u holds role r (admins hold every role).
func (u *User) Has(r Role) bool {
	return slices.Contains(u.Roles, r) || slices.Contains(u.Roles, RoleAdmin)
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._@-]{0,63}$`)

// Validate checks the user's name, roles and tenant binding.
func (u *User) Validate() error {
	if !validName.MatchString(u.Name) {
		return fmt.Errorf("%w: name %q (letters, digits, '.', '_', '@', '-'; up to 64)", ErrBadUser, u.Name)
	}
	if len(u.Roles) == 0 {
		return fmt.Errorf("%w: %s has no role", ErrBadUser, u.Name)
	}
	for _, r := range u.Roles {
		if _, err := ParseRole(string(r)); err != nil {
			return err
		}
	}
	if slices.Contains(u.Roles, RoleAuditor) && u.Tenant == "" {
		return fmt.Errorf("%w: an auditor needs --tenant", ErrBadUser)
	}
	if slices.Contains(u.Roles, RoleAdmin) && u.Tenant != "" {
		return fmt.Errorf("%w: an admin sees every tenant; drop --tenant", ErrBadUser)
	}
	return nil
}

// argon2id parameters (OWASP's second recommended set: 19 MiB, 2 passes).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

func hashPassword(pw string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

func checkPassword(hash, pw string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m > 1<<20 || t > 10 || p == 0 {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when a name is unknown, so a login takes
// as long for unknown names as for wrong passwords.
var dummyHash = hashPassword("gatehouse-dummy-password")

// Users is the user store, a JSON file (mode 0600) rewritten atomically on
// every change. Safe for concurrent use within one process; the CLI and a
// running serve each reread the file on every lookup, so users added from
// the terminal can sign in without a restart.
type Users struct {
	path string
	mu   sync.Mutex
}

// OpenUsers returns the store kept in path (DATA_DIR/users.json). The file
// need not exist yet.
func OpenUsers(path string) *Users { return &Users{path: path} }

// Path is the store's file.
func (s *Users) Path() string { return s.path }

type usersFile struct {
	Users []User `json:"users"`
}

func (s *Users) load() ([]User, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f usersFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return f.Users, nil
}

func (s *Users) save(users []User) error {
	for i := range users {
		users[i].TOTPEnrolled = users[i].TOTP != ""
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })
	b, _ := json.MarshalIndent(usersFile{Users: users}, "", "  ")
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".users-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}

// List returns every user, by name, without password hashes.
func (s *Users) List() ([]User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	users, err := s.load()
	for i := range users {
		users[i].Hash = ""
		users[i].TOTPEnrolled, users[i].TOTP = users[i].TOTP != "", ""
	}
	return users, err
}

// Empty reports whether no user exists yet (first run).
func (s *Users) Empty() (bool, error) {
	users, err := s.List()
	return len(users) == 0, err
}

// Add creates a user. It returns ErrUserExists, ErrWeakPassword or a
// validation error.
func (s *Users) Add(u User, password string) error {
	if len(password) < MinPassword {
		return ErrWeakPassword
	}
	if err := u.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	users, err := s.load()
	if err != nil {
		return err
	}
	for _, x := range users {
		if strings.EqualFold(x.Name, u.Name) {
			return fmt.Errorf("%w: %s", ErrUserExists, u.Name)
		}
	}
	u.Hash = hashPassword(password)
	if u.Created.IsZero() {
		u.Created = time.Now().UTC().Truncate(time.Second)
	}
	return s.save(append(users, u))
}

// SetPassword replaces a user's password.
func (s *Users) SetPassword(name, password string) error {
	if len(password) < MinPassword {
		return ErrWeakPassword
	}
	return s.update(name, func(u *User) { u.Hash = hashPassword(password) })
}

// Remove deletes a user.
func (s *Users) Remove(name string) error {
	return s.change(name, func(users []User, i int) []User { return slices.Delete(users, i, i+1) })
}

func (s *Users) update(name string, fn func(*User)) error {
	return s.change(name, func(users []User, i int) []User { fn(&users[i]); return users })
}

// change saves what fn makes of the stored users, given name's index in
// them; ErrNoUser when name is not stored.
func (s *Users) change(name string, fn func(users []User, i int) []User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	users, err := s.load()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	return s.save(fn(users, i))
}

// lookup rereads the store and returns name's entry, hash and TOTP
// secret included; ok is false when name is not stored.
func (s *Users) lookup(name string) (u User, ok bool, err error) {
	s.mu.Lock()
	users, err := s.load()
	s.mu.Unlock()
	if err != nil {
		return User{}, false, err
	}
	i := slices.IndexFunc(users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return User{}, false, nil
	}
	return users[i], true, nil
}

// Authenticate checks a name and password and returns the user without
// its hash. Any failure is ErrBadPassword, whether the name exists or not.
func (s *Users) Authenticate(name, password string) (*User, error) {
	u, ok, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		checkPassword(dummyHash, password)
		return nil, ErrBadPassword
	}
	if !checkPassword(u.Hash, password) {
		return nil, ErrBadPassword
	}
	u.stamp = credentialStamp(u)
	u.Hash = ""
	u.TOTPEnrolled, u.TOTP = u.TOTP != "", ""
	return &u, nil
}

// SetTOTP enrols secret (base32, from NewTOTPSecret) as name's second
// factor, replacing any earlier one; "" removes it.
func (s *Users) SetTOTP(name, secret string) error {
	if secret != "" {
		if _, err := decodeTOTPSecret(secret); err != nil {
			return err
		}
	}
	return s.update(name, func(u *User) { u.TOTP = secret })
}

// CheckTOTP reports the time step of code if it is name's code at now
// (±1 step). Replays are the caller's to refuse (totpUsed). An unknown
// name or a user without TOTP never matches.
func (s *Users) CheckTOTP(name, code string, now time.Time) (uint64, bool) {
	u, ok, err := s.lookup(name)
	if err != nil || !ok || u.TOTP == "" {
		return 0, false
	}
	return matchTOTP(u.TOTP, code, now)
}

// Current reports whether the session user u still stands as stored: the
// name exists with the same roles, tenant and credentials. A session of a
// user removed, changed or given a new password or authenticator since
// sign-in does not (the dashboard ends it); an unreadable store does not
// either (fail closed).
func (s *Users) Current(u User) bool {
	x, ok, err := s.lookup(u.Name)
	return err == nil && ok && x.Tenant == u.Tenant && slices.Equal(x.Roles, u.Roles) &&
		credentialStamp(x) == u.stamp
}
