package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// TOTP as RFC 6238 defines it with the parameters every authenticator app
// defaults to: HMAC-SHA-1, 6 digits, 30-second steps. A code is accepted
// for its own step and the one before and after (clock skew); each step's
// code signs in once per user (replay refused) while this process runs.
const (
	totpDigits = 6
	totpPeriod = 30 // seconds
	totpSkew   = 1  // steps either side
)

// AssuranceMFA is the assurance of a password and TOTP sign-in.
const AssuranceMFA = "mfa"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewTOTPSecret returns a random 160-bit secret, base32 without padding.
func NewTOTPSecret() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return b32.EncodeToString(b)
}

// decodeTOTPSecret accepts a base32 secret in any case, with or without
// padding and spaces.
func decodeTOTPSecret(s string) ([]byte, error) {
	s = strings.ToUpper(strings.NewReplacer(" ", "", "=", "").Replace(s))
	k, err := b32.DecodeString(s)
	if err != nil || len(k) < 10 {
		return nil, fmt.Errorf("%w: TOTP secret is not base32 of at least 80 bits", ErrBadUser)
	}
	return k, nil
}

// hotp is RFC 4226's HOTP of counter under key, as a decimal of digits
// digits (leading zeros kept).
func hotp(key []byte, counter uint64, digits int) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, v%mod)
}

// totpStep is the RFC 6238 time step of t.
func totpStep(t time.Time) uint64 { return uint64(t.Unix()) / totpPeriod }

// TOTPCode is the 6-digit code of secret (base32) at t.
func TOTPCode(secret string, t time.Time) (string, error) {
	k, err := decodeTOTPSecret(secret)
	if err != nil {
		return "", err
	}
	return hotp(k, totpStep(t), totpDigits), nil
}

// matchTOTP returns the step whose code is code, within ±totpSkew steps of
// now, and whether one matched. It compares in constant time.
func matchTOTP(secret, code string, now time.Time) (uint64, bool) {
	code = strings.TrimSpace(code)
	if len(code) != totpDigits {
		return 0, false
	}
	k, err := decodeTOTPSecret(secret)
	if err != nil {
		return 0, false
	}
	cur := totpStep(now)
	var found uint64
	ok := false
	for d := -totpSkew; d <= totpSkew; d++ {
		step := cur + uint64(d)
		if constantEqual(hotp(k, step, totpDigits), code) && !ok {
			found, ok = step, true
		}
	}
	return found, ok
}

// TOTPURI is the otpauth:// URI an authenticator app reads (as a QR code
// or pasted) to enrol secret for user under issuer.
func TOTPURI(issuer, user, secret string) string {
	q := url.Values{"secret": {secret}, "issuer": {issuer}, "algorithm": {"SHA1"}, "digits": {"6"}, "period": {"30"}}
	return "otpauth://totp/" + url.PathEscape(issuer+":"+user) + "?" + q.Encode()
}
