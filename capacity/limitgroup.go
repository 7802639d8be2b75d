package capacity

import (
	"regexp"
	"sort"
	"strings"
)

// LimitGroups maps a model name to the limit group whose budget it draws on.
// Providers pool limits across snapshots and families: "gpt-4o-2024-08-06"
// shares "gpt-4o"'s budget, "claude-sonnet-4-5-20250929" shares
// "claude-sonnet-4-5"'s.
//
// Resolution order: an exact entry in Models, then the longest matching entry
// in Prefixes, then the model name with a trailing date snapshot suffix removed
// (-YYYY-MM-DD, -YYYYMMDD, -MMDD), then the model name itself. The zero value
// resolves by suffix stripping alone. A LimitGroups must not be modified while
// it is used.
type LimitGroups struct {
	// Models maps exact model names to their limit group.
	Models map[string]string
	// Prefixes maps a model-name prefix to a limit group: {"gpt-4.1": "gpt-4.1"}
	// puts "gpt-4.1-mini-2025-04-14" in "gpt-4.1" unless a longer prefix matches.
	Prefixes map[string]string
}

var snapshotSuffix = regexp.MustCompile(`(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{4}|-latest|-preview-\d{2}-\d{2})$`)

// Resolve returns the limit group of model.
func (g LimitGroups) Resolve(model string) string {
	if grp, ok := g.Models[model]; ok {
		return grp
	}
	if len(g.Prefixes) > 0 {
		keys := make([]string, 0, len(g.Prefixes))
		for p := range g.Prefixes {
			if strings.HasPrefix(model, p) {
				keys = append(keys, p)
			}
		}
		if len(keys) > 0 {
			sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
			return g.Prefixes[keys[0]]
		}
	}
	if m := snapshotSuffix.FindStringIndex(model); m != nil && m[0] > 0 {
		return model[:m[0]]
	}
	return model
}

// ScopeFor returns the scope of a call to model on the given credential.
func (g LimitGroups) ScopeFor(p Provider, model, credential, region string) Scope {
	return Scope{Provider: p, LimitGroup: g.Resolve(model), Credential: credential, Region: region}
}
