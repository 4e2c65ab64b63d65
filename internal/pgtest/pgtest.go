// Package pgtest runs real PostgreSQL servers (Debian's postgresql-15 binaries) for tests: on a
// temporary directory, a free loopback port, as a non-root user when the tests run as root.
//
// The cheap way is one server per test package and a fresh database per test:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.NewDB(t)
//		...
//	}
//
// Tests that need a server of their own (stopped, started late, restarted) use Prepare and
// Launch, or Start.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultBinDir is where Debian's postgresql-15 package installs the server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// BinDirEnv overrides DefaultBinDir.
const BinDirEnv = "PGTEST_BINDIR"

// Superuser is the database superuser every server is initialised with (trust authentication).
const Superuser = "postgres"

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 20 * time.Second
)

// Server is one PostgreSQL server on a temporary data directory.
type Server struct {
	BinDir  string
	DataDir string
	LogPath string
	Port    int

	cred *syscall.Credential

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// BinDir returns the directory holding initdb and postgres, failing the test with installation
// instructions when they are missing.
func BinDir(t testing.TB) string {
	t.Helper()
	dir, err := findBinDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func findBinDir() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		dir = DefaultBinDir
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("PostgreSQL 15 server binaries not found (%s: %w): install them with `apt-get install postgresql-15` "+
				"or point %s at a directory holding initdb and postgres", filepath.Join(dir, name), err, BinDirEnv)
		}
	}
	return dir, nil
}

// Credential returns the credential child processes of PostgreSQL must run with: nil when the
// tests do not run as root, else the "postgres" system user (or "nobody"), because PostgreSQL
// refuses to run as root.
func Credential(t testing.TB) *syscall.Credential {
	t.Helper()
	cred, err := runAs()
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse uid of %s: %w", name, err)
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse gid of %s: %w", name, err)
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: need a 'postgres' or 'nobody' user to run it as: %w", errors.Join(errs...))
}

// OwnedTempDir returns a fresh temporary directory that the user of Credential owns and can
// reach; it is removed when the test ends.
func OwnedTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := handOver(dir, Credential(t)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// handOver chowns dir to cred (when set) and makes sure the user can traverse to it.
func handOver(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("hand %s over to uid %d: %w", dir, cred.Uid, err)
	}
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return fmt.Errorf("resolve temp dir: %w", err)
	}
	// Directories created under the temp dir by the testing package are 0700 root: let others
	// traverse (not list) them. Directories above the temp dir are left alone.
	for p := filepath.Dir(dir); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("make %s traversable: %w", p, err)
			}
		}
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Prepare initialises a data directory under t.TempDir() and picks a free port, without starting
// the server: DSN works already, connecting does not until Launch.
func Prepare(t testing.TB) *Server {
	t.Helper()
	bin := BinDir(t)
	cred := Credential(t)
	base := t.TempDir()
	if err := handOver(base, cred); err != nil {
		t.Fatal(err)
	}
	s, err := initServer(bin, base, cred)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Launch starts a prepared server and waits until it accepts connections; the server is stopped
// when the test ends.
func (s *Server) Launch(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
}

// Start is Prepare followed by Launch.
func Start(t testing.TB) *Server {
	t.Helper()
	s := Prepare(t)
	s.Launch(t)
	return s
}

func initServer(bin, base string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		BinDir:  bin,
		DataDir: filepath.Join(base, "data"),
		LogPath: filepath.Join(base, "postgres.log"),
		Port:    port,
		cred:    cred,
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"),
		"-D", s.DataDir, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb in %s: %w\n%s", s.DataDir, err, out)
	}
	return s, nil
}

// childEnv is the environment without PG* variables, which would redirect the server or clients.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG=") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("PostgreSQL is already running")
	}
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(filepath.Join(s.BinDir, "postgres"),
		"-D", s.DataDir,
		"-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		// Durability is worthless for a throw-away test server; speed is not.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	)
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// SIGQUIT (immediate shutdown) if the test process dies without stopping the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited during startup: %s\n%s", cmd.ProcessState, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready within %s: %w\n%s", readyTimeout, lastErr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		lastErr = err
	}
}

// Stop shuts the server down (fast shutdown, then a kill after a grace period). Stopping a
// stopped server is a no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres: %w", err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("postgres did not stop within %s; killed it\n%s", stopTimeout, s.logTail())
	}
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "server log (tail):\n" + string(b)
}

// DSN is the connection URL of database db on this server, as the superuser.
func (s *Server) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

var dbCounter atomic.Int64

var notIdent = regexp.MustCompile(`[^a-z0-9]+`)

// CreateDB creates a fresh, empty database named after the test and returns its DSN; it is
// dropped when the test ends.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	name := notIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t%d_%s", dbCounter.Add(1), name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return s.DSN(name)
}

func (s *Server) adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect as %s: %w", Superuser, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

var shared struct {
	once   sync.Once
	server *Server
	base   string
	err    error
}

// Shared returns the test process's shared server, starting it on first use. Use Main in
// TestMain so it is stopped and its directory removed when the tests end.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		bin, err := findBinDir()
		if err != nil {
			shared.err = err
			return
		}
		cred, err := runAs()
		if err != nil {
			shared.err = err
			return
		}
		base, err := os.MkdirTemp("", "pgtest-")
		if err != nil {
			shared.err = fmt.Errorf("create shared server directory: %w", err)
			return
		}
		shared.base = base
		if err := handOver(base, cred); err != nil {
			shared.err = err
			return
		}
		s, err := initServer(bin, base, cred)
		if err != nil {
			shared.err = err
			return
		}
		if err := s.start(); err != nil {
			shared.err = err
			return
		}
		shared.server = s
	})
	if shared.err != nil {
		t.Fatalf("shared PostgreSQL server: %v", shared.err)
	}
	return shared.server
}

// NewDB returns the DSN of a fresh database on the shared server.
func NewDB(t testing.TB) string {
	t.Helper()
	return Shared(t).CreateDB(t)
}

// Main runs the tests, then stops the shared server (if one was started) and removes its files.
// Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.server != nil {
		if err := shared.server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			code = 1
		}
	}
	if shared.base != "" {
		if err := os.RemoveAll(shared.base); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove %s: %v\n", shared.base, err)
		}
	}
	return code
}
