#!/usr/bin/env bash
# What the unit tests need beyond Go: Debian's PostgreSQL 15 server binaries (internal/pgtest starts a real
# server for the demo app's, the ledger's and postgres-init's tests). Installed once; `make test-unit` runs it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
apt_install postgresql-15
[ -x /usr/lib/postgresql/15/bin/postgres ] || { echo "error: /usr/lib/postgresql/15/bin/postgres is missing after installing postgresql-15" >&2; exit 1; }
say "unit-test dependencies ready: PostgreSQL 15 in /usr/lib/postgresql/15/bin"
