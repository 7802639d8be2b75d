package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Credentials resolves a credential scope name to an API key on the worker.
// Keys never travel through activity input, so they never reach workflow
// history; only the name does.
type Credentials interface {
	APIKey(ctx context.Context, name string) (string, error)
}

// ErrUnknownCredential is returned (wrapped) for a name with no key.
var ErrUnknownCredential = errors.New("activities: unknown credential scope")

// StaticCredentials maps credential scope names to keys held by the worker.
type StaticCredentials map[string]string

// APIKey implements Credentials.
func (s StaticCredentials) APIKey(_ context.Context, name string) (string, error) {
	if k, ok := s[name]; ok && k != "" {
		return k, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownCredential, name)
}

// EnvCredentials reads the key of scope name from the environment variable
// Prefix + NAME (upper-cased, '-' and '.' as '_'): with Prefix
// "OPENAI_API_KEY_", scope "team-a" reads OPENAI_API_KEY_TEAM_A.
type EnvCredentials struct {
	Prefix string
}

// APIKey implements Credentials.
func (e EnvCredentials) APIKey(_ context.Context, name string) (string, error) {
	v := e.Prefix + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(name))
	if k := os.Getenv(v); k != "" {
		return k, nil
	}
	return "", fmt.Errorf("%w %q (environment variable %s is empty)", ErrUnknownCredential, name, v)
}
