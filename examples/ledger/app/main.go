// Command ledger is the app of premigrate's adopter example (examples/ledger): a service with its own
// schema, its own migration command and its own chart, which takes premigrate's migration machinery from the
// library chart premigrate-lib. It is small on purpose; what it records is the evidence the example's tests
// read: every migration's time by the database's clock (ledger_schema) and every app start with the schema it
// found (ledger_pod_starts).
//
//	ledger migrate --to N   apply the schema versions up to N, each once, one writer at a time (exit 3: N is older);
//	                        LEDGER_MIGRATE_DELAY makes it a long migration (a Go duration to wait first)
//	ledger contract --to N  the contract step of version N (premigrate-lib's contract, once no older ledger pod is
//	                        left): drop the tables of the versions before N, which only older builds used, and
//	                        record it (ledger_contracts); a version whose migration has not run is refused (exit 3)
//	ledger serve            record this start, refuse a schema older than LEDGER_SCHEMA, serve /readyz
//	ledger proxy            a TCP proxy (a database proxy sidecar of the migration pod), logging each connection
//	ledger wait-for-db      connect to the database and exit (an init container that needs the proxy first)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Exit codes.
const (
	exitFailure = 1
	exitUsage   = 2
	exitRefused = 3
)

// errRefused is a migration the app will not run (an older schema than the database has).
var errRefused = errors.New("refused")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Getenv, log)))
}

// exitCode maps an error of run to the process's exit code.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp), errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, errRefused):
		slog.Error("ledger", "err", err)
		return exitRefused
	default:
		slog.Error("ledger", "err", err)
		return exitFailure
	}
}

var errUsage = errors.New("usage: ledger migrate --to N | ledger contract --to N | ledger serve | ledger proxy --listen ADDR --to ADDR | ledger wait-for-db [--timeout D]")

func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	if len(args) == 0 {
		return errUsage
	}
	fs := flag.NewFlagSet("ledger "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "migrate":
		to := fs.Int("to", 0, "the schema version to migrate to")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		url := migrationURL(getenv)
		if d := getenv("LEDGER_MIGRATE_DELAY"); d != "" {
			delay, err := time.ParseDuration(d)
			if err != nil {
				return fmt.Errorf("LEDGER_MIGRATE_DELAY %q is not a duration: %w", d, err)
			}
			log.Info("a long migration: waiting first", "delay", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return migrate(ctx, url, *to, getenv("HOSTNAME"), log)
	case "contract":
		to := fs.Int("to", 0, "the schema version whose contract step to run")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *to < 1 {
			return fmt.Errorf("contract: --to must be a schema version >= 1: %w", errUsage)
		}
		return contract(ctx, migrationURL(getenv), *to, getenv("HOSTNAME"), log)
	case "serve":
		addr := fs.String("listen", ":8080", "HTTP address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		want, err := strconv.Atoi(getenv("LEDGER_SCHEMA"))
		if err != nil {
			return fmt.Errorf("LEDGER_SCHEMA %q is not a schema version: %w", getenv("LEDGER_SCHEMA"), err)
		}
		return serve(ctx, getenv("LEDGER_DATABASE_URL"), want, getenv("HOSTNAME"), *addr, log)
	case "proxy":
		listen := fs.String("listen", "127.0.0.1:6432", "address to listen on")
		to := fs.String("to", "", "address to forward to (host:port)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *to == "" {
			return fmt.Errorf("proxy: --to is required: %w", errUsage)
		}
		return proxy(ctx, *listen, *to, log)
	case "wait-for-db":
		within := fs.Duration("timeout", 30*time.Second, "how long to try")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return waitForDB(ctx, migrationURL(getenv), *within, log)
	default:
		return errUsage
	}
}

// migrationURL is the database URL of the migration's pod: LEDGER_MIGRATION_DATABASE_URL (e.g. through a
// proxy sidecar), else the app's.
func migrationURL(getenv func(string) string) string {
	if url := getenv("LEDGER_MIGRATION_DATABASE_URL"); url != "" {
		return url
	}
	return getenv("LEDGER_DATABASE_URL")
}

// connect retries for up to 30 s: the database may still be starting.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	return connectWithin(ctx, url, 30*time.Second)
}

// connectWithin retries once a second until it connects or `within` has passed.
func connectWithin(ctx context.Context, url string, within time.Duration) (*pgx.Conn, error) {
	if url == "" {
		return nil, errors.New("no database URL (LEDGER_DATABASE_URL)")
	}
	deadline := time.Now().Add(within)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to the database: %w", err)
		}
		time.Sleep(time.Second)
	}
}

// waitForDB connects once and closes: an init container that must not end before the database answers.
func waitForDB(ctx context.Context, url string, within time.Duration, log *slog.Logger) error {
	conn, err := connectWithin(ctx, url, within)
	if err != nil {
		return fmt.Errorf("wait for the database: %w", err)
	}
	log.Info("the database answers")
	return conn.Close(ctx)
}

// migrate applies the versions above the database's up to `to`, in one transaction under an advisory lock.
func migrate(ctx context.Context, url string, to int, pod string, log *slog.Logger) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, q := range []string{
		`SELECT pg_advisory_xact_lock(4242)`,
		`CREATE TABLE IF NOT EXISTS ledger_schema (version int PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp(), pod text NOT NULL)`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("prepare the schema table: %w", err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ledger_schema`).Scan(&have); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if to < have {
		return fmt.Errorf("the database has schema %d, newer than %d: %w", have, to, errRefused)
	}
	for v := have + 1; v <= to; v++ {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE ledger_v%d (id bigserial PRIMARY KEY, amount bigint NOT NULL)`, v)); err != nil {
			return fmt.Errorf("apply version %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_schema (version, pod) VALUES ($1, $2)`, v, pod); err != nil {
			return fmt.Errorf("record version %d: %w", v, err)
		}
		log.Info("migrated", "version", v)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	log.Info("schema is current", "version", max(have, to))
	return nil
}

// contract drops the tables of the versions before `to` (each version's build uses its own table and reads the
// older ones while it runs beside them: only once no older build is left may they go) and records the step in
// ledger_contracts by the database's clock, with the sessions of older builds connected then (serve names its
// session "ledger serve <version> <pod>"), in one transaction under the migration's advisory lock. It refuses
// a version the database has not migrated to; a version contracted before is not contracted again.
func contract(ctx context.Context, url string, to int, pod string, log *slog.Logger) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, q := range []string{
		`SELECT pg_advisory_xact_lock(4242)`,
		`CREATE TABLE IF NOT EXISTS ledger_contracts (version int PRIMARY KEY,
			contracted_at timestamptz NOT NULL DEFAULT clock_timestamp(), pod text NOT NULL, dropped text NOT NULL,
			older_sessions text NOT NULL)`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("prepare the contracts table: %w", err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ledger_schema`).Scan(&have); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if have < to {
		return fmt.Errorf("the database has schema %d: the contract of %d comes after its migration: %w", have, to, errRefused)
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_contracts WHERE version = $1)`, to).Scan(&done); err != nil {
		return fmt.Errorf("read the contracts: %w", err)
	}
	if done {
		log.Info("contracted before: nothing to do", "version", to)
		return nil
	}
	var dropped []string
	for v := 1; v < to; v++ {
		table := fmt.Sprintf("ledger_v%d", v)
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
			return fmt.Errorf("drop %s: %w", table, err)
		}
		dropped = append(dropped, table)
	}
	// the evidence of when it ran: the sessions of older ledger builds still connected (serve names them)
	var older string
	if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(application_name, ', ' ORDER BY application_name), '') FROM pg_stat_activity
		WHERE application_name ~ '^ledger serve [0-9]+ ' AND split_part(application_name, ' ', 3)::int < $1`, to).Scan(&older); err != nil {
		return fmt.Errorf("read the sessions of older builds: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_contracts (version, pod, dropped, older_sessions) VALUES ($1, $2, $3, $4)`,
		to, pod, strings.Join(dropped, ","), older); err != nil {
		return fmt.Errorf("record the contract of %d: %w", to, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	log.Info("contracted", "version", to, "dropped", dropped)
	return nil
}

// serve records the start (by the database's clock, with the schema it found), refuses an older schema than
// it was built for, and serves /readyz.
func serve(ctx context.Context, url string, want int, pod, addr string, log *slog.Logger) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// the session names the build it serves for as long as the pod runs: a contract step sees older ones
	if _, err := conn.Exec(ctx, `SELECT set_config('application_name', $1, false)`, fmt.Sprintf("ledger serve %d %s", want, pod)); err != nil {
		return fmt.Errorf("name the session: %w", err)
	}
	// before the first migration there is no schema table: that is schema 0 (a query naming the table would
	// fail to parse, so its existence is asked first)
	var seen int
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('ledger_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("look for the schema table: %w", err)
	}
	if exists {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ledger_schema`).Scan(&seen); err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ledger_pod_starts (pod text NOT NULL, wanted int NOT NULL, seen int NOT NULL,
			started_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("prepare the starts table: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO ledger_pod_starts (pod, wanted, seen) VALUES ($1, $2, $3)`, pod, want, seen); err != nil {
		return fmt.Errorf("record the start: %w", err)
	}
	if seen < want {
		return fmt.Errorf("the database has schema %d, this build needs %d: refusing to serve", seen, want)
	}
	log.Info("serving", "schema", seen, "addr", addr)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// proxy forwards every connection on listen to `to` until ctx ends.
func proxy(ctx context.Context, listen, to string, log *slog.Logger) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("proxy: listen on %s: %w", listen, err)
	}
	go func() { <-ctx.Done(); _ = l.Close() }()
	log.Info("proxy: listening", "listen", listen, "to", to)
	var n atomic.Int64
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				log.Info("proxy: stopped", "connections", n.Load())
				return nil
			}
			return fmt.Errorf("proxy: accept: %w", err)
		}
		id := n.Add(1)
		go func() {
			defer func() { _ = c.Close() }()
			var d net.Dialer
			up, err := d.DialContext(ctx, "tcp", to)
			if err != nil {
				log.Error("proxy: dial", "connection", id, "to", to, "err", err)
				return
			}
			defer func() { _ = up.Close() }()
			log.Info("proxy: connection", "connection", id, "from", c.RemoteAddr().String(), "to", to)
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}
