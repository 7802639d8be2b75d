package assistantbatch_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of a Compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string `yaml:"image"`
		HealthCheck *struct {
			Test any `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Ports []string `yaml:"ports"`
	} `yaml:"services"`
}

// TestComposeFile checks docker-compose.temporal.yml without Docker: it
// names a Temporal server with its database and UI and a Redis 7, every
// image is pinned to a release tag, and every service has a health check.
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.temporal.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f))

	images := map[string]string{
		"postgresql":  "postgres:",
		"temporal":    "temporalio/auto-setup:",
		"temporal-ui": "temporalio/ui:",
		"redis":       "redis:7.",
	}
	for name, prefix := range images {
		svc, ok := f.Services[name]
		if !assert.Truef(t, ok, "service %s missing", name) {
			continue
		}
		assert.Truef(t, strings.HasPrefix(svc.Image, prefix), "service %s: image %q, want %s...", name, svc.Image, prefix)
	}
	assert.Len(t, f.Services, len(images), "services")

	for name, svc := range f.Services {
		repo, tag, ok := strings.Cut(svc.Image, ":")
		if assert.Truef(t, ok, "service %s: image %q has no tag", name, svc.Image) {
			assert.NotEmpty(t, repo, name)
			assert.NotContainsf(t, []string{"", "latest", "alpine", "stable"}, tag, "service %s: image %q is not pinned", name, svc.Image)
			assert.Truef(t, tag[0] >= '0' && tag[0] <= '9', "service %s: tag %q is not a version", name, tag)
			assert.Truef(t, strings.Count(strings.SplitN(tag, "-", 2)[0], ".") >= 1, "service %s: tag %q names no minor version", name, tag)
		}
		if assert.NotNilf(t, svc.HealthCheck, "service %s has no health check", name) {
			assert.NotEmptyf(t, svc.HealthCheck.Test, "service %s: empty health check", name)
		}
		for dep, d := range svc.DependsOn {
			assert.Equalf(t, "service_healthy", d.Condition, "service %s waits for %s", name, dep)
		}
	}

	ports := map[string]string{"temporal": "7233:7233", "temporal-ui": "8080:8080", "redis": "6379:6379"}
	for name, p := range ports {
		assert.Containsf(t, f.Services[name].Ports, p, "service %s publishes", name)
	}
	assert.Equal(t, "service_healthy", f.Services["temporal"].DependsOn["postgresql"].Condition)
}
