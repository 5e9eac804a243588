package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gatehouse/gatehouse/web"
)

const usersUsage = `Usage: gatehouse users <command> [flags]

Manages the dashboard's users, kept in DATA_DIR/users.json (argon2id
password hashes, mode 0600). A running 'gatehouse serve' sees changes at
the next sign-in.

Commands:
  add NAME --role ROLE [--role ROLE...] [--tenant T] [--password-stdin]
  passwd NAME [--password-stdin]
  totp NAME [--remove] [--json]
  remove NAME
  list [--json]

Roles: reviewer (approvals), operator (policy review), auditor (one
tenant's evidence; needs --tenant), admin (everything). Further roles
named by your approvals: rules (e.g. finance) may be added beside them.
Without --password-stdin the password is asked for twice at the terminal.

'totp' enrols a TOTP authenticator (RFC 6238: 6 digits, 30 s, SHA-1) as
the user's second factor, replacing any earlier one: it prints the
otpauth:// URI and the base32 secret once, to add to an authenticator app.
From then on the dashboard asks for the code after the password, and the
session has assurance mfa (approvals rules with 'assurance: mfa' accept
it). The secret is kept in users.json (mode 0600), not encrypted: guard
that file. --remove drops the second factor.
`

func cmdUsers(_ context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "users", usersUsage); done {
		return err
	}
	var (
		dataDir string
		roles   listFlag
		tenant  string
		pwStdin bool
		asJSON  bool
		sub     = args[0]

		totpRemove bool
	)
	fs := newEnvFlags(env, "users "+sub, usersUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir holding users.json")
	switch sub {
	case "add":
		fs.Var(&roles, "role", "a role (repeatable or comma-separated)")
		fs.StringVar(&tenant, "tenant", "", "the one tenant an auditor (or a tenant-bound reviewer) sees")
		fs.BoolVar(&pwStdin, "password-stdin", false, "read the password from the first line of standard input")
	case "passwd":
		fs.BoolVar(&pwStdin, "password-stdin", false, "read the password from the first line of standard input")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print the users as JSON")
	case "totp":
		fs.BoolVar(&asJSON, "json", false, "print the URI and secret as JSON")
		fs.BoolVar(&totpRemove, "remove", false, "remove the user's TOTP second factor")
	case "remove":
	default:
		return unknownSubcommand("users", sub, "add", "passwd", "remove", "list", "totp")
	}
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	store := web.OpenUsers(filepath.Join(dataDir, "users.json"))
	refused := func(err error) error {
		if errors.Is(err, web.ErrBadUser) || errors.Is(err, web.ErrBadRole) || errors.Is(err, web.ErrWeakPassword) {
			return &exitError{code: exitUsage, err: err}
		}
		return &exitError{code: exitFindings, err: err}
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageError("users list takes no arguments")
		}
		users, err := store.List()
		if err != nil {
			return err
		}
		if asJSON {
			if users == nil {
				users = []web.User{}
			}
			return printJSON(env, users)
		}
		if len(users) == 0 {
			fmt.Fprintf(env.stdout, "No users in %s. Add one: gatehouse users add NAME --role admin\n", store.Path())
			return nil
		}
		for _, u := range users {
			rs := make([]string, len(u.Roles))
			for i, r := range u.Roles {
				rs[i] = string(r)
			}
			line := fmt.Sprintf("%-20s %s", u.Name, strings.Join(rs, ","))
			if u.Tenant != "" {
				line += "  tenant " + u.Tenant
			}
			if u.TOTPEnrolled {
				line += "  totp"
			}
			fmt.Fprintln(env.stdout, line)
		}
		return nil
	case "remove":
		if len(pos) != 1 {
			return usageError("users remove takes one NAME")
		}
		if err := store.Remove(pos[0]); err != nil {
			return refused(err)
		}
		fmt.Fprintf(env.stdout, "Removed %s. Their open dashboard sessions end at their next request.\n", pos[0])
		return nil
	}
	if len(pos) != 1 {
		return usageError("users %s takes one NAME", sub)
	}
	name := pos[0]
	if sub == "totp" {
		return usersTOTP(env, store, name, totpRemove, asJSON, refused)
	}
	if sub == "add" {
		if len(roles) == 0 {
			return usageError("users add needs --role (reviewer, operator, auditor or admin)")
		}
		u := web.User{Name: name, Tenant: tenant}
		for _, r := range roles {
			role, err := web.ParseRole(r)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			u.Roles = append(u.Roles, role)
		}
		if err := u.Validate(); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		pw, err := readPassword(env, pwStdin)
		if err != nil {
			return err
		}
		if err := store.Add(u, pw); err != nil {
			return refused(err)
		}
		fmt.Fprintf(env.stdout, "Added %s (%s) to %s.\n", name, strings.Join(roles, ","), store.Path())
		return nil
	}
	pw, err := readPassword(env, pwStdin)
	if err != nil {
		return err
	}
	if err := store.SetPassword(name, pw); err != nil {
		return refused(err)
	}
	fmt.Fprintf(env.stdout, "Password of %s changed.\n", name)
	return nil
}

// readPassword reads the first line of stdin (--password-stdin), or asks
// twice at the terminal with echo off.
func readPassword(env *cliEnv, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(env.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return "", usageError("--password-stdin: no password on standard input")
		}
		return pw, nil
	}
	f, ok := env.stdin.(*os.File)
	if !ok {
		return "", usageError("no terminal to ask for a password: use --password-stdin")
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(env.stderr, prompt)
		defer fmt.Fprintln(env.stderr)
		return readNoEcho(f)
	}
	pw, err := ask("Password (at least 12 characters): ")
	if err != nil {
		return "", err
	}
	again, err := ask("Again: ")
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", &exitError{code: exitUsage, err: errors.New("the passwords differ")}
	}
	return pw, nil
}

// readNoEcho reads one line from a terminal with echo turned off.
func readNoEcho(f *os.File) (string, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", usageError("standard input is not a terminal: use --password-stdin")
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", err
	}
	defer func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// dashboardUsers opens DATA_DIR/users.json for serve and, when it holds no
// user yet, makes the one-time token of the first-run setup link.
func dashboardUsers(dataDir string) (*web.Users, string, error) {
	users := web.OpenUsers(filepath.Join(dataDir, "users.json"))
	empty, err := users.Empty()
	if err != nil {
		return nil, "", fmt.Errorf("dashboard users: %w", err)
	}
	if !empty {
		return users, "", nil
	}
	return users, web.NewSetupToken(), nil
}

// usersTOTP enrols (or with remove drops) name's TOTP second factor and
// prints the secret once.
func usersTOTP(env *cliEnv, store *web.Users, name string, remove, asJSON bool, refused func(error) error) error {
	if remove {
		if err := store.SetTOTP(name, ""); err != nil {
			return refused(err)
		}
		fmt.Fprintf(env.stdout, "%s signs in with a password alone now (assurance password).\n", name)
		return nil
	}
	secret := web.NewTOTPSecret()
	if err := store.SetTOTP(name, secret); err != nil {
		return refused(err)
	}
	uri := web.TOTPURI("Gatehouse", name, secret)
	if asJSON {
		return printJSON(env, struct {
			User   string `json:"user"`
			URI    string `json:"uri"`
			Secret string `json:"secret"`
		}{name, uri, secret})
	}
	fmt.Fprintf(env.stdout, `TOTP enrolled for %s. Add it to an authenticator app now: it is not shown again.
  URI     %s
  secret  %s (SHA-1, 6 digits, 30 s)
The dashboard asks %s for the code after the password from the next sign-in on.
`, name, uri, secret, name)
	return nil
}
