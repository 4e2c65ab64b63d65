package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/pgtest"
)

// runMainEnv makes the test binary behave as postgres-init, so the tests exercise the real
// entrypoint (including its exec of postgres) without building another binary.
const runMainEnv = "POSTGRES_INIT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// entrypoint copies the test binary where the server user can execute it.
func entrypoint(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(pgtest.OwnedTempDir(t), "postgres-init")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// instance is one run of the entrypoint (which becomes the postgres server).
type instance struct {
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
	err    error
}

func launch(t *testing.T, bin string, cred *syscall.Credential, env map[string]string, args ...string) *instance {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{runMainEnv + "=1", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	in := &instance{cmd: cmd, output: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = in.output, in.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start postgres-init: %v", err)
	}
	go func() {
		in.err = cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-in.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			<-in.exited
		}
	})
	return in
}

// waitConnect connects to dsn as soon as the server accepts connections.
func (in *instance) waitConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-in.exited:
			t.Fatalf("postgres-init exited (%v) before accepting connections:\n%s", in.err, in.output)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection after 2 minutes: %v\n%s", err, in.output)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM to the entrypoint's process, which must be postgres by now, and expects a
// clean exit.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-in.exited:
	case <-time.After(time.Minute):
		t.Fatalf("server did not stop within a minute of SIGTERM:\n%s", in.output)
	}
	if in.err != nil {
		t.Fatalf("server exited with %v after SIGTERM:\n%s", in.err, in.output)
	}
}

func dsn(user, password string, port int, db string) string {
	u := url.URL{Scheme: "postgres", Host: "127.0.0.1:" + strconv.Itoa(port), Path: "/" + db, RawQuery: "sslmode=disable"}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else {
		u.User = url.User(user)
	}
	return u.String()
}

func cannotConnect(t *testing.T, dsn, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		_ = conn.Close(ctx)
		t.Errorf("connected %s", why)
	}
}

func processExe(t *testing.T, pid int) string {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("read the executable of pid %d: %v", pid, err)
	}
	return exe
}

func TestInitialisesOnFirstStartAndNeverReinitialisesOnRestart(t *testing.T) {
	bin := entrypoint(t)
	cred := pgtest.Credential(t)
	pgdata := filepath.Join(pgtest.OwnedTempDir(t), "data")
	port := pgtest.FreePort(t)
	env := map[string]string{
		"POSTGRES_USER":     "app",
		"POSTGRES_PASSWORD": "first secret",
		"POSTGRES_DB":       "appdb",
		"PGDATA":            pgdata,
		"PG_BINDIR":         pgtest.BinDir(t),
		"PG_SOCKET_DIR":     pgtest.OwnedTempDir(t),
	}
	// listen_addresses given last overrides the entrypoint's "*": the test listens on loopback only.
	args := []string{"postgres", "-c", "port=" + strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1"}

	first := launch(t, bin, cred, env, args...)
	conn := first.waitConnect(t, dsn("app", "first secret", port, "appdb"))
	ctx := context.Background()
	var user, db string
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_user, current_database(), rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&user, &db, &super); err != nil {
		t.Fatal(err)
	}
	if user != "app" || db != "appdb" || !super {
		t.Errorf("connected as %s to %s (superuser %v), want superuser app on appdb", user, db, super)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE survives_restart (id int)"); err != nil {
		t.Fatal(err)
	}
	cannotConnect(t, dsn("app", "wrong", port, "appdb"), "with a wrong password")
	cannotConnect(t, dsn("app", "", port, "appdb"), "without a password over TCP")
	if exe := processExe(t, first.cmd.Process.Pid); filepath.Base(exe) != "postgres" {
		t.Errorf("the entrypoint's process runs %s: it did not exec postgres", exe)
	}
	for _, line := range []string{"initialising " + pgdata, `created database "appdb"`, "pg_hba.conf: host all all all scram-sha-256", "listen_addresses=*"} {
		if !strings.Contains(first.output.String(), logged(line)) {
			t.Errorf("first start's output lacks %q:\n%s", line, first.output)
		}
	}
	versionInfo, err := os.Stat(filepath.Join(pgdata, "PG_VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(pgdata); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("PGDATA mode %v (%v), want 0700", info.Mode().Perm(), err)
	}
	_ = conn.Close(ctx)
	first.stop(t)

	// A new password in the environment must not matter: the data directory is kept as it is.
	env["POSTGRES_PASSWORD"] = "second secret"
	second := launch(t, bin, cred, env, args...)
	conn = second.waitConnect(t, dsn("app", "first secret", port, "appdb"))
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM survives_restart").Scan(&n); err != nil {
		t.Errorf("the table created before the restart is gone: %v", err)
	}
	cannotConnect(t, dsn("app", "second secret", port, "appdb"), "with the password of the second start")
	if !strings.Contains(second.output.String(), "is already initialised (PostgreSQL 15): skipping initialisation") {
		t.Errorf("restart does not say it skipped initialisation:\n%s", second.output)
	}
	if strings.Contains(second.output.String(), "initialising") {
		t.Errorf("restart initialised again:\n%s", second.output)
	}
	if after, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); err != nil || !after.ModTime().Equal(versionInfo.ModTime()) {
		t.Errorf("PG_VERSION was rewritten on restart (%v)", err)
	}
	_ = conn.Close(ctx)
	second.stop(t)
}

func TestTrustAuthenticationNeedsNoPasswordAndRootDropsToThePostgresUser(t *testing.T) {
	// Started without a credential: as root this exercises the entrypoint's own privilege drop.
	bin := entrypoint(t)
	pgdata := filepath.Join(pgtest.OwnedTempDir(t), "data")
	port := pgtest.FreePort(t)
	in := launch(t, bin, nil, map[string]string{
		"POSTGRES_HOST_AUTH_METHOD": "trust",
		"PGDATA":                    pgdata,
		"PG_BINDIR":                 pgtest.BinDir(t),
		"PG_SOCKET_DIR":             pgtest.OwnedTempDir(t),
	}, "-c", "port="+strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1")
	conn := in.waitConnect(t, dsn("postgres", "", port, "postgres"))
	var db string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil || db != "postgres" {
		t.Errorf("connected to %q (%v), want the default postgres database", db, err)
	}
	if strings.Contains(in.output.String(), "created database") {
		t.Errorf("created a database although POSTGRES_DB defaults to postgres:\n%s", in.output)
	}
	if os.Geteuid() == 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "Uid:" && fields[1] == "0" {
				t.Errorf("the server runs as root")
			}
		}
		if !strings.Contains(in.output.String(), "dropping to it") {
			t.Errorf("no word about dropping root:\n%s", in.output)
		}
	}
	_ = conn.Close(context.Background())
	in.stop(t)
}

func TestFirstStartWithoutAPasswordIsRefusedAndInitialisesNothing(t *testing.T) {
	bin := entrypoint(t)
	pgdata := filepath.Join(pgtest.OwnedTempDir(t), "data")
	in := launch(t, bin, pgtest.Credential(t), map[string]string{
		"PGDATA":        pgdata,
		"PG_BINDIR":     pgtest.BinDir(t),
		"PG_SOCKET_DIR": pgtest.OwnedTempDir(t),
	})
	select {
	case <-in.exited:
	case <-time.After(time.Minute):
		t.Fatal("postgres-init did not exit")
	}
	var exitErr *exec.ExitError
	if !errors.As(in.err, &exitErr) || exitErr.ExitCode() != exitFailure {
		t.Errorf("exit %v, want code %d", in.err, exitFailure)
	}
	if !strings.Contains(in.output.String(), "POSTGRES_PASSWORD is not set") {
		t.Errorf("output does not name POSTGRES_PASSWORD:\n%s", in.output)
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PGDATA was initialised anyway (%v)", err)
	}
}

func TestConfigurationComesFromTheEnvironmentAndLeadingFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		args     []string
		want     config
		wantArgv []string
	}{
		{
			name: "defaults",
			want: config{user: "postgres", db: "postgres", hostAuth: "scram-sha-256", pgdata: defaultPGData, binDir: defaultBinDir, socketDir: defaultSocketDir},
			wantArgv: []string{defaultBinDir + "/postgres", "-D", defaultPGData, "-c", "listen_addresses=*",
				"-c", "unix_socket_directories=" + defaultSocketDir},
		},
		{
			name: "database defaults to the user",
			env:  map[string]string{"POSTGRES_USER": "app", "POSTGRES_PASSWORD": "pw"},
			want: config{user: "app", password: "pw", db: "app", hostAuth: "scram-sha-256", pgdata: defaultPGData, binDir: defaultBinDir, socketDir: defaultSocketDir},
		},
		{
			name: "flags override the environment and server options follow",
			env:  map[string]string{"PG_BINDIR": "/env/bin", "PGDATA": "/env/data", "PG_SOCKET_DIR": "/env/run", "POSTGRES_DB": "db"},
			args: []string{"--bindir", "/flag/bin", "--pgdata=/flag/data", "--socket-dir", "/flag/run", "postgres", "-c", "port=5433"},
			want: config{user: "postgres", db: "db", hostAuth: "scram-sha-256", pgdata: "/flag/data", binDir: "/flag/bin", socketDir: "/flag/run", serverArgs: []string{"-c", "port=5433"}},
			wantArgv: []string{"/flag/bin/postgres", "-D", "/flag/data", "-c", "listen_addresses=*",
				"-c", "unix_socket_directories=/flag/run", "-c", "port=5433"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.args, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if got.user != tc.want.user || got.password != tc.want.password || got.db != tc.want.db || got.hostAuth != tc.want.hostAuth ||
				got.pgdata != tc.want.pgdata || got.binDir != tc.want.binDir || got.socketDir != tc.want.socketDir ||
				!slices.Equal(got.serverArgs, tc.want.serverArgs) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.wantArgv != nil && !slices.Equal(serverArgv(got), tc.wantArgv) {
				t.Errorf("server argv %q, want %q", serverArgv(got), tc.wantArgv)
			}
		})
	}
}

// runCode runs postgres-init in-process and returns its exit code.
func runCode(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return cli.ExitCode(run(context.Background(), args, &env{Streams: cli.Streams{Out: stdout, Err: stderr}, getenv: getenv}))
}

// logged is how s appears within the msg value of a log line: quotes and backslashes escaped.
func logged(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func TestUsageMistakesExitTwoAndHelpDocumentsTheEnvironment(t *testing.T) {
	for _, args := range [][]string{{"--bindir"}, {"--pgdata="}, {"bash"}, {"postgres", "extra"}} {
		var stderr bytes.Buffer
		if code := runCode(args, func(string) string { return "" }, io.Discard, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, stderr.String())
		}
	}
	for _, delay := range []string{"soon", "-1s"} {
		var stderr bytes.Buffer
		getenv := func(k string) string { return map[string]string{"POSTGRES_START_DELAY": delay}[k] }
		if code := runCode(nil, getenv, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "POSTGRES_START_DELAY") {
			t.Errorf("POSTGRES_START_DELAY=%s: exit %d, want %d naming the variable\n%s", delay, code, exitUsage, stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := runCode([]string{"--help"}, func(string) string { return "" }, &stdout, io.Discard); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, name := range []string{"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "POSTGRES_HOST_AUTH_METHOD", "PGDATA", "PG_BINDIR", "PG_SOCKET_DIR", "POSTGRES_START_DELAY", "--bindir"} {
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("help lacks %s", name)
		}
	}
}
