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
		{name: "a URL", spec: Spec{URL: "postgres://u:secret@db/app"}, want: HashURL("postgres://u:secret@db/app")},
		{name: "both", spec: Spec{Object: "pod/db-0", URL: "postgres://db/app"}, want: "pod/db-0@u1 " + HashURL("postgres://db/app"), wantSince: created,
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
