package render

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The repository's documentation: the README for users, docs/, and the chart README that `helm show readme`
// and Artifact Hub show outside the repository.
const repoRoot = "../.."

// readRepoFile reads a file by its path from the repository's root.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

var (
	fence       = regexp.MustCompile("(?ms)^ *(```|~~~).*?^ *(```|~~~)[^\n]*$")
	inlineCode  = regexp.MustCompile("`[^`\n]*`")
	inlineLink  = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refLink     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S*?)>?(?:\s+"[^"]*")?\s*$`)
	headingLine = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	notInSlug   = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// withoutCode blanks fenced code blocks and inline code spans, where brackets and parentheses are no links.
func withoutCode(markdown string) string {
	return inlineCode.ReplaceAllString(fence.ReplaceAllString(markdown, ""), "``")
}

// linkTargets lists the targets of the markdown links (inline, images and reference definitions).
func linkTargets(markdown string) []string {
	text := withoutCode(markdown)
	var targets []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// anchors lists the anchors GitHub gives the headings of a markdown file: lower case, punctuation dropped,
// spaces as dashes, a repeated heading numbered.
func anchors(markdown string) map[string]bool {
	have := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingLine.FindAllStringSubmatch(fence.ReplaceAllString(markdown, ""), -1) {
		slug := strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			have[slug+"-"+string(rune('0'+n))] = true
		} else {
			have[slug] = true
		}
		seen[slug]++
	}
	return have
}

func isAbsolute(target string) bool {
	return strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") ||
		strings.HasPrefix(target, "mailto:")
}

func TestTheReadmeIsShortAndStartsWithMakeDemoAndMakeTest(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	lines := strings.Split(strings.TrimRight(readme, "\n"), "\n")
	assert.Less(t, len(lines), 150, "README.md is for users: the rest belongs in docs/")

	require.NotEmpty(t, lines)
	assert.Equal(t, "# premigrate", lines[0], "the README starts with the title")
	head, _, found := strings.Cut(readme, "\n## ")
	require.True(t, found, "README.md has sections")
	block := fence.FindString(head)
	require.NotEmpty(t, block, "the README shows the two commands before its first section")
	var commands []string
	for _, line := range strings.Split(block, "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 2 && !strings.HasPrefix(f[0], "```") {
			commands = append(commands, f[0]+" "+f[1])
		}
	}
	assert.Equal(t, []string{"make demo", "make test"}, commands, "the two commands, in this order")
	intro := strings.TrimPrefix(strings.SplitN(head, block, 2)[0], "# premigrate\n")
	assert.Len(t, regexp.MustCompile(`[.!?](\s|$)`).FindAllString(strings.TrimSpace(intro), -1), 1,
		"between the title and the commands: one sentence")
}

func TestEveryRelativeLinkInTheReadmeAndTheDocsPointsToSomethingThatExists(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	require.Contains(t, files, "docs/how-it-works.md")

	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			markdown := readRepoFile(t, file)
			targets := linkTargets(markdown)
			if file == "README.md" {
				require.NotEmpty(t, targets, "README.md has no links: is the link pattern broken?")
			}
			for _, target := range targets {
				if isAbsolute(target) {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				pointed := markdown
				if path != "" {
					full := filepath.Join(repoRoot, filepath.Dir(file), filepath.FromSlash(path))
					info, err := os.Stat(full)
					if !assert.NoError(t, err, "%s links to %q, which does not exist", file, target) {
						continue
					}
					if anchor == "" || info.IsDir() || !strings.HasSuffix(path, ".md") {
						continue
					}
					b, err := os.ReadFile(full)
					require.NoError(t, err)
					pointed = string(b)
				}
				if anchor != "" {
					assert.True(t, anchors(pointed)[anchor], "%s links to %q: no heading has the anchor #%s", file, target, anchor)
				}
			}
		})
	}
}

func TestTheChartReadmeUsesOnlyAbsoluteLinks(t *testing.T) {
	for _, file := range []string{"charts/premigrate/README.md.gotmpl", "charts/premigrate/README.md"} {
		t.Run(file, func(t *testing.T) {
			targets := linkTargets(readRepoFile(t, file))
			require.NotEmpty(t, targets, "%s has no links: is the link pattern broken?", file)
			for _, target := range targets {
				assert.True(t, isAbsolute(target) || strings.HasPrefix(target, "#"),
					"%s links to %q: `helm show readme` and Artifact Hub show it outside the repository, so its links must be absolute", file, target)
			}
		})
	}
}

func TestTheChartReadmeNamesTheDeliveryAndTheMigrationPodAmongTheIdentityInputs(t *testing.T) {
	tmpl := readRepoFile(t, "charts/premigrate/README.md.gotmpl")
	section, _, _ := strings.Cut(strings.SplitN(tmpl, "## How it works\n", 2)[1], "\n## ")
	identity, _, _ := strings.Cut(section, "\n\n")
	for _, want := range []string{"gate.delivery", "nodeSelector", "tolerations", "sidecars",
		"https://github.com/premigrate/premigrate/blob/main/docs/design.md#migration-identity"} {
		assert.Contains(t, identity, want, "the chart README's paragraph on the identity")
	}
}

// defineBody is the body of a named template of a template file.
func defineBody(t *testing.T, tpl, name string) string {
	t.Helper()
	_, rest, found := strings.Cut(tpl, `{{- define "`+name+`" -}}`)
	require.True(t, found, "no define %q", name)
	body, _, found := strings.Cut(rest, "{{- end }}\n")
	require.True(t, found, "define %q has no end", name)
	return body
}

func TestTheDesignNamesEveryInputTheLibraryHashesIntoTheIdentity(t *testing.T) {
	tpl := readRepoFile(t, "charts/premigrate-lib/templates/_config.tpl")
	quoted := regexp.MustCompile(`"(\w+)"`)
	cases := []struct {
		name    string
		define  string
		line    string
		key     *regexp.Regexp
		atLeast []string
	}{
		{"the $migration dict", "premigrate-lib.computeIdentity", "$migration := dict", quoted, []string{"image", "command", "env"}},
		{"the $job dict of the Job's spec hash", "premigrate-lib.computeJobHash", "$job := dict", quoted, []string{"backoffLimit", "ttl"}},
		{"the $pod dict of the Job's spec hash", "premigrate-lib.computeJobHash", "$pod := dict", quoted, []string{"gateImage", "gateDelivery", "pod"}},
		{"the pod values of lists and maps", "premigrate-lib.config", "range $k := list", quoted, []string{"nodeSelector", "tolerations", "sidecars"}},
		{"the other pod values", "premigrate-lib.config", `set $p "`, regexp.MustCompile(`set \$p "(\w+)"`),
			[]string{"priorityClassName", "securityContext", "containerSecurityContext"}},
	}

	design := readRepoFile(t, "docs/design.md")
	_, section, found := strings.Cut(design, "\n## Migration identity\n")
	require.True(t, found, "docs/design.md has no section \"Migration identity\"")
	section, _, _ = strings.Cut(section, "\n## ")
	block := fence.FindString(section)
	require.NotEmpty(t, block, "the section \"Migration identity\" of docs/design.md has no code block")

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var keys []string
			for _, line := range strings.Split(defineBody(t, tpl, c.define), "\n") {
				if !strings.Contains(line, c.line) {
					continue
				}
				for _, m := range c.key.FindAllStringSubmatch(line, -1) {
					keys = append(keys, m[1])
				}
			}
			require.Subset(t, keys, c.atLeast, "the keys read from %s: is the pattern %q out of date?", c.define, c.line)
			for _, key := range keys {
				assert.Regexp(t, `\b`+regexp.QuoteMeta(key)+`\b`, block,
					"docs/design.md's \"Migration identity\" does not name %q, which %s hashes", key, c.define)
			}
		})
	}
}

func TestTheReadmesStateTheHelmAndKubernetesVersionsTheTestsRun(t *testing.T) {
	tools := readRepoFile(t, "hack/tools.sh")
	lib := readRepoFile(t, "hack/lib.sh")
	pin := func(src, name string) string {
		t.Helper()
		m := regexp.MustCompile(name + `=(v[0-9.]+)`).FindStringSubmatch(src)
		require.Len(t, m, 2, "%s is pinned", name)
		return m[1]
	}
	helm3, helm4, k8s := pin(tools, "HELM3_VERSION"), pin(tools, "HELM4_VERSION"), pin(lib, "K8S_VERSION")
	for _, f := range []string{"README.md", "charts/premigrate/README.md.gotmpl", "charts/premigrate/README.md"} {
		text := strings.Join(strings.Fields(readRepoFile(t, f)), " ")
		assert.Contains(t, text, fmt.Sprintf("Tested with Helm %s and %s", helm3, helm4), "%s names the Helm versions make test runs", f)
		assert.Contains(t, text, "Kubernetes "+k8s, "%s names the Kubernetes version make test runs", f)
		assert.Contains(t, text, fmt.Sprintf("Helm %s or a later 3.x", helm3), "%s gives the oldest Helm 3 the tests run as the minimum", f)
		assert.Contains(t, text, fmt.Sprintf("Helm %s or later", helm4), "%s gives the oldest Helm 4 the tests run as the minimum", f)
	}
}

// The oldest Kubernetes the charts accept is the one `make test-k8s-oldest` runs the cluster tests on: their
// kubeVersion floor is its minor, and the READMEs say so.
func TestTheChartsAcceptNoKubernetesOlderThanTheOldestTheTestsRun(t *testing.T) {
	m := regexp.MustCompile(`oldest\)\s*\n\s*export K8S_VERSION=v1\.([0-9]+)\.([0-9]+)`).FindStringSubmatch(readRepoFile(t, "hack/lib.sh"))
	require.Len(t, m, 3, "hack/lib.sh pins the oldest Kubernetes (PREMIGRATE_K8S=oldest)")
	floor := fmt.Sprintf(`kubeVersion: ">=1.%s.0-0"`, m[1])
	for _, f := range []string{"charts/premigrate/Chart.yaml", "charts/premigrate-lib/Chart.yaml", "examples/ledger/chart/Chart.yaml"} {
		assert.Contains(t, readRepoFile(t, f), floor, "%s accepts Kubernetes from the oldest minor the tests run (1.%s.%s)", f, m[1], m[2])
	}
	for _, f := range []string{"README.md", "charts/premigrate/README.md.gotmpl", "charts/premigrate/README.md"} {
		text := strings.Join(strings.Fields(readRepoFile(t, f)), " ")
		assert.Contains(t, text, fmt.Sprintf("Kubernetes v1.%s.%s", m[1], m[2]), "%s names the oldest Kubernetes the tests run", f)
		assert.Contains(t, text, fmt.Sprintf("Kubernetes 1.%s or later", m[1]), "%s gives it as the minimum", f)
	}
	assert.Contains(t, readRepoFile(t, "Makefile"), "PREMIGRATE_K8S=oldest", "a make target runs the cluster tests on it")
}
