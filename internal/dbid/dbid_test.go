package dbid

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func getter(objs map[string]Object) Getter {
	return func(_ context.Context, kind, name string) (Object, error) {
		o, ok := objs[kind+"/"+name]
		if !ok {
			return Object{}, errors.New("not found")
		}
		return o, nil
	}
}

func TestResolveNamesTheObjectByUIDAndTheURLByItsHashOnly(t *testing.T) {
	get := getter(map[string]Object{
		"pod/db-0":                   {UID: "u1", Created: created},
		"persistentvolumeclaim/data": {UID: "u2", Created: created.Add(time.Hour)},
	})
	cases := []struct {
		name       string
		spec       Spec
		want       string
		wantSince  time.Time
		wantHolder *Holder
		wantErr    string
	}{
		{name: "nothing is unbound", spec: Spec{}, want: ""},
		{name: "a pod", spec: Spec{Object: "pod/db-0"}, want: "pod/db-0@u1", wantSince: created,
			wantHolder: &Holder{APIVersion: "v1", Kind: "Pod", Name: "db-0", UID: "u1"}},
		{name: "a claim by its short kind", spec: Spec{Object: "pvc/data"}, want: "persistentvolumeclaim/data@u2", wantSince: created.Add(time.Hour),
			wantHolder: &Holder{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data", UID: "u2"}},
		{name: "a URL by its server and database", spec: Spec{URL: "postgres://u:secret@db/app"}, want: HashLocator("postgres://db:5432/app")},
		{name: "both", spec: Spec{Object: "pod/db-0", URL: "postgres://db/app"}, want: "pod/db-0@u1 " + HashLocator("postgres://db:5432/app"), wantSince: created,
			wantHolder: &Holder{APIVersion: "v1", Kind: "Pod", Name: "db-0", UID: "u1"}},
		{name: "a missing object", spec: Spec{Object: "pod/gone"}, wantErr: "reading the database's pod gone"},
		{name: "another kind", spec: Spec{Object: "secret/db"}, wantErr: `kind "secret" is not one of`},
		{name: "no name", spec: Spec{Object: "pod/"}, wantErr: "want KIND/NAME"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := Resolve(context.Background(), c.spec, get)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Value != c.want || !id.Since.Equal(c.wantSince) {
				t.Errorf("Resolve = %q since %s, want %q since %s", id.Value, id.Since, c.want, c.wantSince)
			}
			if (id.Holder == nil) != (c.wantHolder == nil) || (id.Holder != nil && *id.Holder != *c.wantHolder) {
				t.Errorf("Resolve's holder = %+v, want %+v", id.Holder, c.wantHolder)
			}
			if strings.Contains(id.Value, "secret") {
				t.Errorf("the ID %q carries the URL's password", id.Value)
			}
		})
	}
}

func TestDescribesAcceptsOnlyEvidenceMadeOnTheDatabaseThereNow(t *testing.T) {
	now := ID{Value: "pod/db-0@u2", Since: created}
	cases := []struct {
		name     string
		id       ID
		recorded string
		at       time.Time
		want     bool
		why      string
	}{
		{name: "the same database", id: now, recorded: "pod/db-0@u2", at: created.Add(time.Minute), want: true},
		{name: "a pod made again under the same name", id: now, recorded: "pod/db-0@u1", at: created.Add(-time.Hour), want: false,
			why: "recorded on database pod/db-0@u1, and the database is now pod/db-0@u2"},
		{name: "another URL", id: ID{Value: HashURL("b")}, recorded: HashURL("a"), want: false, why: "the database is now url:"},
		{name: "an unbound record made after the database was created", id: now, at: created.Add(time.Minute), want: true},
		{name: "an unbound record made before the database was created", id: now, at: created.Add(-time.Minute), want: false,
			why: "before the database's pod/db-0 was created"},
		{name: "an unbound record of unknown time", id: now, want: true},
		{name: "an unbound gate accepts any record", id: ID{}, recorded: "pod/db-0@u1", want: true},
		{name: "a URL-only database has no creation time", id: ID{Value: HashURL("a")}, at: created.Add(-time.Hour), want: true},
		{name: "a record of the whole URL, made by an older gate", id: ID{Value: HashLocator("x"), Legacy: HashURL("a")}, recorded: HashURL("a"), want: true},
		{name: "a record of another whole URL", id: ID{Value: HashLocator("x"), Legacy: HashURL("a")}, recorded: HashURL("b"), want: false,
			why: "the database is now db:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := c.id.Describes(c.recorded, c.at)
			if ok != c.want || !strings.Contains(why, c.why) {
				t.Errorf("Describes(%q, %s) = %v %q, want %v and a reason containing %q", c.recorded, c.at, ok, why, c.want, c.why)
			}
		})
	}
}

func TestLocateNamesTheServerAndTheDatabaseNeverTheCredentialsOrOptions(t *testing.T) {
	cases := []struct {
		name, url, want string
	}{
		{name: "a PostgreSQL URL", url: "postgres://app:s3cret@DB.example:5432/orders?sslmode=require", want: "postgres://db.example:5432/orders"},
		{name: "the default port and the other scheme", url: "postgresql://app@db.example/orders", want: "postgres://db.example:5432/orders"},
		{name: "several hosts", url: "postgres://u:p@a:5432,b:5433/orders", want: "postgres://a:5432,b:5433/orders"},
		{name: "an IPv6 host", url: "postgres://u:p@[::1]/orders", want: "postgres://[::1]:5432/orders"},
		{name: "host and database in the query", url: "postgresql:///ignored?host=/var/run/postgresql&dbname=orders&user=u&password=p", want: "postgres:///var/run/postgresql/orders"},
		{name: "an escaped database name", url: "postgres://u:p@db/my%20orders", want: "postgres://db:5432/my orders"},
		{name: "a MySQL URL", url: "mysql://root:pw@db/shop?parseTime=true", want: "mysql://db:3306/shop"},
		{name: "a SQL Server URL", url: "sqlserver://sa:pw@db:1444?database=shop&encrypt=true", want: "sqlserver://db:1444/shop"},
		{name: "an unknown scheme keeps the port it names", url: "cockroach://u:p@db:26257/app", want: "cockroach://db:26257/app"},
		{name: "libpq key=value", url: "host=db.example port=6432 dbname=orders user=app password='a b\\'c' sslmode=disable", want: "postgres://db.example:6432/orders"},
		{name: "libpq key=value with the default port", url: "dbname = orders host = db", want: "postgres://db:5432/orders"},
		{name: "the MySQL driver's form", url: "app:pw@tcp(db.example)/shop?parseTime=true", want: "mysql://tcp(db.example:3306)/shop"},
		{name: "the MySQL driver's socket", url: "app:pw@unix(/run/mysqld.sock)/shop", want: "mysql://unix(/run/mysqld.sock)/shop"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Locate(c.url)
			if !ok || got != c.want {
				t.Errorf("Locate(%q) = %q %v, want %q", c.url, got, ok, c.want)
			}
		})
	}
}

func TestTheBindingOfAURLIgnoresWhatARotationChangesAndSeesAnotherServerOrDatabase(t *testing.T) {
	base := "postgres://app:old@db.example:5432/orders?sslmode=disable"
	same := []string{
		"postgres://app:new@db.example:5432/orders?sslmode=disable",
		"postgres://v-token-app-8f2:generated@db.example/orders?sslmode=require&application_name=x",
		"postgresql://app:old@DB.EXAMPLE:5432/orders",
		"host=db.example dbname=orders user=other password=x",
	}
	other := []string{
		"postgres://app:old@db2.example:5432/orders?sslmode=disable",
		"postgres://app:old@db.example:5433/orders?sslmode=disable",
		"postgres://app:old@db.example:5432/fresh?sslmode=disable",
		"mysql://app:old@db.example/orders",
	}
	want, _, _ := urlPart(base)
	for _, u := range same {
		if got, _, _ := urlPart(u); got != want {
			t.Errorf("%q names database %s, want the same as %q (%s)", u, got, base, want)
		}
	}
	for _, u := range other {
		if got, _, _ := urlPart(u); got == want {
			t.Errorf("%q names the same database as %q (%s), want another", u, base, want)
		}
	}
}

func TestAURLInNoKnownFormIsNamedWhole(t *testing.T) {
	part, legacy, note := urlPart("just-a-name")
	if part != HashURL("just-a-name") || legacy != part || !strings.Contains(note, "the whole URL") {
		t.Errorf("urlPart = %q %q %q, want the whole URL's hash and a note", part, legacy, note)
	}
	id, err := Resolve(context.Background(), Spec{URL: "postgres://u:p@db/app"}, nil)
	if err != nil || id.Legacy != HashURL("postgres://u:p@db/app") || id.Note != "" {
		t.Errorf("Resolve = %+v, %v: want the whole URL's hash as the legacy value and no note", id, err)
	}
}
