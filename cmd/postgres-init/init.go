package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverUser is the account postgres-init drops to when started as root.
const serverUser = "postgres"

// dropRoot, when running as root, hands the data and socket directories to the postgres user and
// switches the process to it. Otherwise it does nothing.
func dropRoot(cfg config, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return fmt.Errorf("running as root, PostgreSQL refuses root, and there is no %q user to run it as: %w", serverUser, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("uid of %s: %w", serverUser, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("gid of %s: %w", serverUser, err)
	}
	log.Info(fmt.Sprintf("running as root: handing %s and %s to user %s (%d:%d) and dropping to it", cfg.pgdata, cfg.socketDir, serverUser, uid, gid))
	for _, dir := range []string{cfg.pgdata, cfg.socketDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if err := chownTree(dir, uid, gid); err != nil {
			return err
		}
	}
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("switch to group %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("switch to user %d: %w", uid, err)
	}
	return nil
}

// chownTree gives every file under root that uid does not own to uid:gid.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", path, err)
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			return nil
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			return fmt.Errorf("chown %s: %w", path, err)
		}
		return nil
	})
}

// initialise creates the data directory on first start; an initialised one is left alone.
func initialise(cfg config, log *slog.Logger, out io.Writer) error {
	if err := os.MkdirAll(cfg.pgdata, 0o700); err != nil {
		return fmt.Errorf("create PGDATA %s: %w", cfg.pgdata, err)
	}
	// PostgreSQL insists on 0700 (or 0750); a fresh volume mount often is not.
	if err := os.Chmod(cfg.pgdata, 0o700); err != nil {
		log.Warn(fmt.Sprintf("warning: cannot set the mode of %s to 0700: %v", cfg.pgdata, err))
	}
	if err := os.MkdirAll(cfg.socketDir, 0o775); err != nil {
		return fmt.Errorf("create socket directory %s: %w", cfg.socketDir, err)
	}

	versionFile := filepath.Join(cfg.pgdata, "PG_VERSION")
	if v, err := os.ReadFile(versionFile); err == nil {
		log.Info(fmt.Sprintf("%s is already initialised (PostgreSQL %s): skipping initialisation", cfg.pgdata, strings.TrimSpace(string(v))))
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", versionFile, err)
	}

	if cfg.password == "" && cfg.hostAuth != "trust" {
		return errors.New("POSTGRES_PASSWORD is not set: the database superuser needs a password for TCP connections; " +
			"set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection without one, never in production)")
	}
	log.Info(fmt.Sprintf("initialising %s: superuser %q, host authentication %s", cfg.pgdata, cfg.user, cfg.hostAuth))
	initdbArgs := []string{
		"-D", cfg.pgdata,
		"-U", cfg.user,
		"-E", "UTF8",
		"--locale=C",
		"--auth-local=trust",
		"--auth-host=" + cfg.hostAuth,
	}
	if cfg.password != "" {
		pwfile, err := writePasswordFile(cfg.password)
		if err != nil {
			return err
		}
		defer func() { _ = os.Remove(pwfile) }()
		initdbArgs = append(initdbArgs, "--pwfile="+pwfile)
	}
	initdb := exec.Command(filepath.Join(cfg.binDir, "initdb"), initdbArgs...)
	initdb.Stdout, initdb.Stderr = out, out
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}

	rule := "host all all all " + cfg.hostAuth
	if err := appendFile(filepath.Join(cfg.pgdata, "pg_hba.conf"), "\n# added by postgres-init: TCP connections from anywhere\n"+rule+"\n"); err != nil {
		return err
	}
	log.Info("pg_hba.conf: " + rule)

	if cfg.db != "postgres" {
		if err := createDatabase(cfg); err != nil {
			return err
		}
		log.Info(fmt.Sprintf("created database %q", cfg.db))
	}
	log.Info(fmt.Sprintf("initialisation of %s complete", cfg.pgdata))
	return nil
}

// writePasswordFile stores the password in a private temporary file for initdb --pwfile.
func writePasswordFile(password string) (string, error) {
	f, err := os.CreateTemp("", "postgres-init-pw-")
	if err != nil {
		return "", fmt.Errorf("create password file: %w", err)
	}
	if _, err := f.WriteString(password + "\n"); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write password file: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write password file: %w", err)
	}
	return f.Name(), nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}

// createDatabase creates cfg.db with the server in single-user mode: nothing can connect
// while the database does not exist yet.
func createDatabase(cfg config) error {
	postgres := filepath.Join(cfg.binDir, "postgres")
	cmd := exec.Command(postgres, "--single", "-j", "-D", cfg.pgdata, "postgres")
	cmd.Stdin = strings.NewReader("CREATE DATABASE " + quoteIdent(cfg.db) + ";\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("create database %q in single-user mode: %w\n%s", cfg.db, err, strings.TrimSpace(out.String()))
	}
	// Single-user mode reports SQL errors on its output and still exits 0.
	if bytes.Contains(out.Bytes(), []byte("ERROR:")) || bytes.Contains(out.Bytes(), []byte("FATAL:")) {
		return fmt.Errorf("create database %q in single-user mode failed:\n%s", cfg.db, strings.TrimSpace(out.String()))
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// serverArgv is the command line postgres is started with.
func serverArgv(cfg config) []string {
	argv := []string{
		filepath.Join(cfg.binDir, "postgres"),
		"-D", cfg.pgdata,
		"-c", "listen_addresses=*",
		"-c", "unix_socket_directories=" + cfg.socketDir,
	}
	return append(argv, cfg.serverArgs...)
}

// serverEnv is the environment of the server: the password has no business there.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POSTGRES_PASSWORD=") {
			env = append(env, kv)
		}
	}
	return env
}

// execPostgres replaces this process with the server; it returns only on failure.
func execPostgres(cfg config, log *slog.Logger) error {
	argv := serverArgv(cfg)
	log.Info(fmt.Sprintf("starting %s", strings.Join(argv, " ")))
	// argv[0] is the absolute path: postgres locates its installation from it.
	if err := syscall.Exec(argv[0], argv, serverEnv()); err != nil {
		return fmt.Errorf("exec %s: %w", argv[0], err)
	}
	return nil
}
