package capacity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/secrets"
)

// Provider names an LLM provider. Its value appears in scope keys and metrics.
type Provider string

// Providers tollgate knows how to account for and parse headers from.
const (
	OpenAI    Provider = "openai"
	Anthropic Provider = "anthropic"
	Gemini    Provider = "gemini"
)

// Scope identifies one quota: the budget a provider meters together. Workers
// that share a Scope share one budget.
//
// Credential is the name of a credential scope (for example "team-a" or an
// HMAC fingerprint from Fingerprint), never the secret itself: a scope's key
// appears in Redis keys, metrics and logs.
type Scope struct {
	Provider   Provider
	LimitGroup string // the provider's limit group, see LimitGroups
	Credential string // credential scope name, never a secret
	Region     string // optional
}

// Validate reports whether s can be used as a quota scope. It refuses missing
// fields, and any field (Provider, LimitGroup, Credential, Region) with the
// shape of an API key or token (a known key prefix with a key body: sk-,
// sk-proj-, sk-ant-, AIza, gsk_, AKIA, ghp_, a JWT, ...; a long random or
// hex token; a bearer token) with an error wrapping ErrKeyShapedName: a
// scope's fields land in Redis keys, metrics and logs. Model names,
// regions, names such as "team-a" or "prod/eu" and Fingerprint's names
// pass. No error it returns holds a field's value.
func (s Scope) Validate() error {
	switch {
	case s.Provider == "":
		return fmt.Errorf("%w: Provider is empty", ErrInvalidScope)
	case s.LimitGroup == "":
		return fmt.Errorf("%w: LimitGroup is empty", ErrInvalidScope)
	case s.Credential == "":
		return fmt.Errorf("%w: Credential is empty (use a credential scope name such as \"default\")", ErrInvalidScope)
	case secrets.LooksLikeKey(s.Credential):
		return fmt.Errorf("%w: Credential (use a name or Fingerprint(...))", ErrKeyShapedName)
	case secrets.LooksLikeKey(s.LimitGroup):
		return fmt.Errorf("%w: LimitGroup (the model name or its limit group)", ErrKeyShapedName)
	case secrets.LooksLikeKey(s.Region):
		return fmt.Errorf("%w: Region", ErrKeyShapedName)
	case secrets.LooksLikeKey(string(s.Provider)):
		return fmt.Errorf("%w: Provider", ErrKeyShapedName)
	}
	return nil
}

// Key returns a stable string for s: provider/group/credential[/region], each
// part path-escaped so that no part can forge another.
func (s Scope) Key() string {
	var b strings.Builder
	b.Grow(len(s.Provider) + len(s.LimitGroup) + len(s.Credential) + len(s.Region) + 4)
	b.WriteString(url.PathEscape(string(s.Provider)))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(s.LimitGroup))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(s.Credential))
	if s.Region != "" {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s.Region))
	}
	return b.String()
}

// CredentialKey returns the key shared by every scope on the same provider
// credential; credential-wide blocks (a revoked key) are stored under it.
func (s Scope) CredentialKey() string {
	return url.PathEscape(string(s.Provider)) + "/" + url.PathEscape(s.Credential)
}

// String returns s.Key().
func (s Scope) String() string { return s.Key() }

// ParseScopeKey is the inverse of Scope.Key.
func ParseScopeKey(key string) (Scope, error) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || len(parts) > 4 {
		return Scope{}, fmt.Errorf("%w: key %q is not provider/group/credential[/region]", ErrInvalidScope, key)
	}
	var un [4]string
	for i, p := range parts {
		v, err := url.PathUnescape(p)
		if err != nil {
			return Scope{}, fmt.Errorf("%w: key %q: %v", ErrInvalidScope, key, err)
		}
		un[i] = v
	}
	return Scope{Provider: Provider(un[0]), LimitGroup: un[1], Credential: un[2], Region: un[3]}, nil
}

// Fingerprint returns a credential scope name derived from an API key with
// HMAC-SHA256 under a deployment secret: stable across workers that share the
// secret, useless to anyone who reads it. Use it when credentials have no
// natural name.
func Fingerprint(deploymentSecret, apiKey []byte) string {
	m := hmac.New(sha256.New, deploymentSecret)
	m.Write(apiKey)
	return "fp-" + hex.EncodeToString(m.Sum(nil)[:12])
}
