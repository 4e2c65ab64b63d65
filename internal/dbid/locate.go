package dbid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// defaultPorts are the ports a URL of each engine means when it names none.
var defaultPorts = map[string]string{"postgres": "5432", "mysql": "3306", "sqlserver": "1433"}

// engines folds a URL scheme into its engine: two spellings of one server's scheme are one database.
var engines = map[string]string{"postgres": "postgres", "postgresql": "postgres", "mysql": "mysql", "sqlserver": "sqlserver", "mssql": "sqlserver"}

// Locate names the database a URL points at by its server and its name only: the engine, every host with its
// port, and the database, as "postgres://db.example:5432/app". The user, the password and every option
// (sslmode, timeouts, application_name) are left out, so a rotated password, a new user of the same
// database, or an edited option is the same database, and another host, port or database name is another.
// It reads URLs (postgres://, postgresql://, mysql://, sqlserver://, any scheme://), libpq's key=value form
// (host=... port=... dbname=...) and the MySQL driver's user:pass@tcp(host:port)/db form; for anything else it
// answers ok false, and the caller must fall back to the whole URL.
func Locate(raw string) (locator string, ok bool) {
	raw = strings.TrimSpace(raw)
	switch {
	case strings.Contains(raw, "://"):
		return locateURL(raw)
	case mysqlDSN.MatchString(raw):
		m := mysqlDSN.FindStringSubmatch(raw)
		addr := m[2]
		if m[1] == "tcp" || m[1] == "tcp6" {
			addr = hostPorts(addr, "3306")
		}
		return "mysql://" + m[1] + "(" + addr + ")/" + m[3], true
	case strings.Contains(raw, "="):
		return locateKeyValues(raw)
	}
	return "", false
}

// mysqlDSN is the MySQL driver's form: [user[:password]@][protocol[(address)]]/dbname[?params].
var mysqlDSN = regexp.MustCompile(`^(?:.*@)?([a-z0-9]+)\(([^)]*)\)/([^?]*)`)

func locateURL(raw string) (string, bool) {
	scheme, rest, _ := strings.Cut(raw, "://")
	engine, known := engines[strings.ToLower(scheme)]
	if !known {
		engine = strings.ToLower(scheme)
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 { // the user and password
		authority = authority[i+1:]
	}
	query := ""
	path, query, _ = strings.Cut(path, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", false
	}
	name, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil {
		return "", false
	}
	// libpq and the SQL Server driver take the host and the database from the query as well
	if h := q.Get("host"); h != "" {
		authority = h
		if p := q.Get("port"); p != "" && !strings.Contains(h, ",") {
			authority = h + ":" + p
		}
	}
	for _, k := range []string{"dbname", "database"} {
		if v := q.Get(k); v != "" {
			name = v
		}
	}
	host, err := url.PathUnescape(authority)
	if err != nil {
		return "", false
	}
	return engine + "://" + hostPorts(host, defaultPorts[engine]) + "/" + name, true
}

// locateKeyValues reads libpq's form: keyword = value pairs, values optionally in single quotes with
// backslash escapes.
func locateKeyValues(raw string) (string, bool) {
	kv := map[string]string{}
	s := raw
	for {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			break
		}
		key, rest, ok := strings.Cut(s, "=")
		if !ok {
			return "", false
		}
		key = strings.TrimSpace(key)
		rest = strings.TrimLeft(rest, " \t")
		var val strings.Builder
		i := 0
		if strings.HasPrefix(rest, "'") {
			for i = 1; i < len(rest) && rest[i] != '\''; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				val.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return "", false // an unterminated quote
			}
			i++
		} else {
			for ; i < len(rest) && rest[i] != ' ' && rest[i] != '\t' && rest[i] != '\n'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				val.WriteByte(rest[i])
			}
		}
		kv[key] = val.String()
		s = rest[i:]
	}
	host := kv["host"]
	if host == "" {
		host = kv["hostaddr"]
	}
	if p := kv["port"]; p != "" && !strings.Contains(host, ",") {
		host += ":" + p
	}
	return "postgres://" + hostPorts(host, defaultPorts["postgres"]) + "/" + kv["dbname"], true
}

// hostPorts writes a comma-separated host list in one form: lower case, each with its port (the default
// when it names none), in the order given (libpq tries them in order: another order is another preference,
// and the same servers).
func hostPorts(hosts, port string) string {
	var out []string
	for _, h := range strings.Split(hosts, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" && len(out) > 0 {
			continue
		}
		host, p := h, ""
		switch {
		case strings.HasPrefix(h, "["): // [IPv6]:port
			if end := strings.Index(h, "]"); end >= 0 {
				host, p = h[:end+1], strings.TrimPrefix(h[end+1:], ":")
			}
		case strings.Count(h, ":") == 1:
			host, p, _ = strings.Cut(h, ":")
		}
		if p == "" {
			p = port
		}
		if p != "" && host != "" && !strings.HasPrefix(host, "/") { // a unix socket's directory has no port
			host += ":" + p
		}
		out = append(out, host)
	}
	return strings.Join(slices.Compact(out), ",")
}

// HashLocator is the URL part of an ID: "db:" and 16 hex characters of the SHA-256 of what Locate gives.
func HashLocator(locator string) string {
	sum := sha256.Sum256([]byte(locator))
	return "db:" + hex.EncodeToString(sum[:8])
}

// urlPart is the part of an ID that names an external database, and what a gate before the binding to the
// server and the name recorded for it (a hash of the whole URL: accepted as the same database, so an upgrade
// of the gate holds no pod). A URL Locate cannot read is named by its whole hash, and a note says so.
func urlPart(raw string) (part, legacy, note string) {
	legacy = HashURL(raw)
	loc, ok := Locate(raw)
	if !ok {
		return legacy, legacy, fmt.Sprintf("the database URL is in no form the gate reads (scheme://, key=value, "+
			"or user@tcp(host)/db): the whole URL (%s) names the database, so a new password or option holds new pods "+
			"until the next upgrade migrates again", legacy)
	}
	return HashLocator(loc), legacy, ""
}
