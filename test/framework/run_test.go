package framework

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheRunnerReturnsCombinedOutputOrStandardOutputAlone(t *testing.T) {
	r := &Runner{Kubeconfig: "/nowhere/kubeconfig"}
	out, err := r.Run(t, "sh", "-c", "echo out; echo err >&2; echo $KUBECONFIG")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"out", "err", "/nowhere/kubeconfig"}, strings.Split(out, "\n"))

	out, err = r.Stdout(t, "sh", "-c", "echo out; echo warning >&2")
	require.NoError(t, err)
	assert.Equal(t, "out", out)
}

func TestTheRunnerFeedsStandardInputAndClosesItOtherwise(t *testing.T) {
	r := &Runner{}
	out, err := r.Input(t, []byte("a\nb\n"), "sh", "-c", "wc -l")
	require.NoError(t, err)
	assert.Equal(t, "2", strings.TrimSpace(out))

	out, err = r.Run(t, "sh", "-c", "cat")
	require.NoError(t, err, "cat on a closed standard input ends at once")
	assert.Empty(t, out)
}

func TestAFailedCommandNamesItsCommandLineAndKeepsItsOutput(t *testing.T) {
	r := &Runner{}
	out, err := r.Stdout(t, "sh", "-c", `echo partial; echo br""oken >&2; exit 3`)
	require.Error(t, err)
	assert.Equal(t, "partial", out)
	for _, want := range []string{"sh -c echo partial", "exit status 3", "partial", "broken"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, 1, strings.Count(err.Error(), "broken"), "standard error once, not repeated by terratest's error")
}

func TestEveryCommandGoesToItsTestsLogWithItsOutputAndExit(t *testing.T) {
	r := &Runner{Dir: t.TempDir()}
	_, _ = r.Run(t, "sh", "-c", "echo hello")
	_, _ = r.Run(t, "sh", "-c", "echo bye >&2; exit 2")
	require.NoError(t, r.Close())
	raw, err := os.ReadFile(r.LogPath(t.Name()))
	require.NoError(t, err)
	log := string(raw)
	for _, want := range []string{"[1] $ sh -c echo hello", "[1] hello", "[1] exit 0 after", "[2] bye", "[2] exit: exit status 2"} {
		assert.Contains(t, log, want)
	}
	assert.NotContains(t, log, "Running command", "terratest's own line is not repeated")
}

func TestOnLineSeesEachLineAsItArrives(t *testing.T) {
	r := &Runner{}
	var mu sync.Mutex
	var lines []string
	_, err := r.RunCmd(t, Cmd{Bin: "sh", Args: []string{"-c", "echo one; echo two"}, OnLine: func(l string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, l)
	}})
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two"}, lines)
}

func TestCommandsOutsideATestLogToTheSetUpLog(t *testing.T) {
	r := &Runner{Dir: t.TempDir()}
	out, err := r.RunCmd(nil, Cmd{Bin: "sh", Args: []string{"-c", "echo early"}})
	require.NoError(t, err)
	assert.Equal(t, "early", out)
	require.NoError(t, r.Close())
	raw, err := os.ReadFile(r.LogPath("setup"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), "early")
}
